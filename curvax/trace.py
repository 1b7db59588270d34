"""Stochastic trace and diagonal estimates of a symmetric operator.

Contract: `trace(op, num_probes=P, key=key, method=...)` spends at most `num_probes` matvecs of the symmetric
operator `op` (a `curvax.operators.LinearOperator`: its size and dtype come from it) and returns the estimate with a
standard error; `diagonal(op, num_probes=P, key=key)` returns diag(A) as a pytree shaped like the operator's input,
with a standard error per entry. Only jax and numpy (and matfree for XTrace): no project imports.

  * "hutchinson": Hutchinson (1989), mean of z_pᵀ A z_p over Rademacher probes z_p.
  * "hutch++": Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1): a low-rank sketch's trace exactly, Hutchinson
    on the deflated rest; smaller error than Hutchinson at equal matvecs when the spectrum decays.
  * "xtrace": XTrace (Epperly, Tropp & Webber 2024, Alg. 1 with its leave-one-out error estimate), through matfree's
    `stochtrace.leave_one_out_xtrace` and `estimator_leave_one_out_mean_and_sem`: s = num_probes // 2 sphere probes,
    2s matvecs, every probe used both in the sketch and in the residual's Hutchinson term (exchangeable, so the
    leave-one-out estimates give the standard error). When 2s ≥ n matfree materializes the operator (n matvecs)
    and the trace is exact.
  * `diagonal`: Bekas, Kokiopoulou & Saad (2007), diag(A) ≈ mean_p z_p ⊙ A z_p over Rademacher z_p (exact for a
    diagonal A, since z ⊙ z = 1); the standard error of each entry is the sample standard deviation over probes /√P.

Own code for Hutchinson and Hutch++ rather than `matfree.stochtrace`: matfree has no Hutch++; tests/test_trace.py
checks Hutchinson against `matfree.stochtrace` on the same probes.
"""

import dataclasses
import importlib.util
from typing import Any, Optional

import jax
import jax.numpy as jnp

from curvax import summary
from curvax.finite import check_finite
from curvax.operators import run_program
from curvax.probes import PROBES, check_positive_int, check_probe_batch, map_probes, operator_info


@dataclasses.dataclass(frozen=True)
class TraceEstimate:
  """Output of `trace`.

  Attributes:
    estimate: scalar trace estimate.
    std_error: scalar standard error (for Hutch++: of its stochastic part, conditional on the sketch; see `trace`).
    num_matvecs: matvecs used (static).
    method: "hutchinson", "hutch++" or "xtrace" (static).
  """

  estimate: jax.Array
  std_error: jax.Array
  num_matvecs: int
  method: str

  def __repr__(self):
    return summary.trace(self)


jax.tree_util.register_dataclass(
    TraceEstimate, data_fields=["estimate", "std_error"], meta_fields=["num_matvecs", "method"]
)


def _quadratic_forms(op, z_pxn, probe_batch):
  """z_pᵀ A z_p for each row: one after another, or `probe_batch` rows in lockstep (`map_probes`)."""
  return map_probes(lambda z: jnp.vdot(z, op.flat_matvec(z)), z_pxn, probe_batch)


def _mean_and_sem(q_p):
  return jnp.mean(q_p), jnp.std(q_p, ddof=1) / jnp.sqrt(q_p.shape[0])


def _signs(key, num, n, dtype):
  return PROBES["rademacher"](key, (num, n), dtype)


def _hutchinson(op, n, dtype, num_probes, key, probe_batch):
  """Hutchinson (1989): tr(A) ≈ mean_p z_pᵀ A z_p with Rademacher z; variance 2(‖A‖_F² − Σ a_ii²)/P."""
  return _mean_and_sem(_quadratic_forms(op, _signs(key, num_probes, n, dtype), probe_batch))


def _hutchpp(op, n, dtype, num_probes, key, probe_batch):
  """Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1) with `num_probes` matvecs in total.

  s = num_probes // 3 sketch vectors S give Q = orth(A S); tr(A) = tr(QᵀAQ) + tr((I−QQᵀ)A(I−QQᵀ)), the first
  term exact with s more matvecs (AQ), the second by Hutchinson with the remaining g = num_probes − 2s probes
  G: (1/g) Σ_p g_pᵀ(I−QQᵀ)A(I−QQᵀ)g_p. The returned standard error is that Hutchinson part's sample standard
  error, conditional on the sketch (the deflated term is the estimator's only randomness given Q).
  """
  s = num_probes // 3
  g = num_probes - 2 * s
  key_s, key_g = jax.random.split(key)
  batch = lambda count: min(probe_batch, count)
  as_sxn = map_probes(op.flat_matvec, _signs(key_s, s, n, dtype), batch(s))
  q_nxs, _ = jnp.linalg.qr(as_sxn.T)
  g_gxn = _signs(key_g, g, n, dtype)
  g_gxn = g_gxn - (g_gxn @ q_nxs) @ q_nxs.T  # (I − QQᵀ) g
  exact = jnp.vdot(q_nxs.T, map_probes(op.flat_matvec, q_nxs.T, batch(s)))  # tr(QᵀAQ)
  # A symmetric, so g_pᵀ(I−QQᵀ)A(I−QQᵀ)g_p = (Pg_p)ᵀA(Pg_p).
  mean, sem = _mean_and_sem(_quadratic_forms(op, g_gxn, batch(g)))
  return exact + mean, sem


def _xtrace(op, n, dtype, num_probes, key, probe_batch):
  """XTrace (Epperly, Tropp & Webber 2024) by matfree with s = num_probes // 2 probes: (mean, standard error) of
  its leave-one-out estimates."""
  from matfree import stochtrace  # optional dependency, imported where used (checked before compute in `trace`)

  del probe_batch  # matfree applies the operator to all s probes at once (one vmapped matvec)
  sampler = stochtrace.sampler_sphere(jnp.zeros((n,), dtype), num=num_probes // 2)
  estimate = stochtrace.estimator_leave_one_out_mean_and_sem(stochtrace.leave_one_out_xtrace(), sampler)
  return estimate(op.flat_matvec, key)


TRACE_METHODS = {"hutchinson": _hutchinson, "hutch++": _hutchpp, "xtrace": _xtrace}
# The standard error needs 2 samples; Hutch++: 1 sketch, 1 AQ, 2 residual; XTrace: 2 probes of 2 matvecs each.
MIN_PROBES = {"hutchinson": 2, "hutch++": 4, "xtrace": 4}


def _has_matfree() -> bool:
  return importlib.util.find_spec("matfree") is not None


def num_matvecs(method: str, num_probes: int, n: int) -> int:
  """Matvecs `trace` spends: `num_probes`, except XTrace: 2·(num_probes // 2), or n when it materializes."""
  if method != "xtrace":
    return num_probes
  s = num_probes // 2
  return n if 2 * s >= n else 2 * s


def get_trace_method(name: str):
  """Return the trace estimator registered under `name`."""
  if name not in TRACE_METHODS:
    raise ValueError(f"method={name!r} is not a valid trace method; valid choices: {sorted(TRACE_METHODS)}")
  return TRACE_METHODS[name]


def _trace_program(op, key, *, method, n, dtype, num_probes, probe_batch):
  return TRACE_METHODS[method](op, n, dtype, num_probes, key, probe_batch)


def trace(
    op: Any,
    *,
    num_probes: int,
    key: jax.Array,
    method: str = "hutchinson",
    probe_batch: Optional[int] = None,
) -> TraceEstimate:
  """Stochastic trace estimate of a symmetric operator with `num_probes` matvecs (XTrace: `num_matvecs`).

  One jitted program per (operator structure, n, dtype, method, num_probes, probe_batch): a second call with
  another operator of the same structure compiles nothing (`curvax.operators`).

  Args:
    op: a symmetric `LinearOperator` (its size n and dtype set the problem).
    num_probes: matvec budget (≥ 2 for "hutchinson", ≥ 4 for "hutch++" and "xtrace"; XTrace: num_probes // 2 ≤ n).
    key: PRNG key.
    method: "hutchinson" (Rademacher probes), "hutch++" (low-rank sketch plus Hutchinson on the rest) or "xtrace"
      (matfree's XTrace: needs matfree installed).
    probe_batch: probes in lockstep through one vmapped matvec (memory × probe_batch); None: the backend's
      default (`curvax.probes.PROBE_BATCH_DEFAULTS`). The estimate does not depend on it (to rounding).

  Returns:
    A `TraceEstimate` (estimate, standard error as documented on each method).
  """
  get_trace_method(method)
  check_positive_int("num_probes", num_probes)
  if num_probes < MIN_PROBES[method]:
    raise ValueError(f"num_probes={num_probes} must be ≥ {MIN_PROBES[method]} for method={method!r}")
  op, n, dtype = operator_info(op)
  if method == "xtrace":
    if not _has_matfree():
      raise ValueError("method='xtrace' needs matfree (pip install matfree); 'hutchinson' and 'hutch++' do not")
    if num_probes // 2 > n:
      raise ValueError(f"num_probes={num_probes}: XTrace uses num_probes // 2 probes, at most n={n}")
  probe_batch = check_probe_batch(probe_batch, num_probes)
  estimate, std_error = run_program(
      _trace_program,
      ("method", "n", "dtype", "num_probes", "probe_batch"),
      op,
      key,
      method=method,
      n=n,
      dtype=jnp.dtype(dtype),
      num_probes=int(num_probes),
      probe_batch=probe_batch,
  )
  check_finite("trace", op, dict(estimate=estimate))
  return TraceEstimate(
      estimate=estimate, std_error=std_error, num_matvecs=num_matvecs(method, num_probes, n), method=method
  )


@dataclasses.dataclass(frozen=True)
class DiagonalEstimate:
  """Output of `diagonal`.

  Attributes:
    estimate: diag(A) as a pytree shaped like the operator's input.
    std_error: the standard error of every entry, same pytree.
    num_matvecs: matvecs used (static).
  """

  estimate: Any
  std_error: Any
  num_matvecs: int

  def __repr__(self):
    return summary.diagonal(self)


jax.tree_util.register_dataclass(DiagonalEstimate, data_fields=["estimate", "std_error"], meta_fields=["num_matvecs"])


def _diagonal_program(op, key, *, n, dtype, num_probes, probe_batch):
  z_pxn = _signs(key, num_probes, n, dtype)
  d_pxn = z_pxn * map_probes(op.flat_matvec, z_pxn, probe_batch)
  return jnp.mean(d_pxn, axis=0), jnp.std(d_pxn, axis=0, ddof=1) / jnp.sqrt(num_probes)


def diagonal(op: Any, *, num_probes: int, key: jax.Array, probe_batch: Optional[int] = None) -> DiagonalEstimate:
  """diag(A) ≈ mean_p z_p ⊙ A z_p with Rademacher z_p (Bekas, Kokiopoulou & Saad 2007), with standard errors.

  Args:
    op: a symmetric `LinearOperator`.
    num_probes: matvecs (≥ 2 for a standard error).
    key: PRNG key.
    probe_batch: probes in lockstep (as in `trace`).

  Returns:
    A `DiagonalEstimate` whose `estimate` and `std_error` are pytrees shaped like the operator's input.
  """
  check_positive_int("num_probes", num_probes, minimum=2)
  op, n, dtype = operator_info(op)
  probe_batch = check_probe_batch(probe_batch, num_probes)
  mean, sem = run_program(
      _diagonal_program,
      ("n", "dtype", "num_probes", "probe_batch"),
      op,
      key,
      n=n,
      dtype=jnp.dtype(dtype),
      num_probes=int(num_probes),
      probe_batch=probe_batch,
  )
  check_finite("diagonal", op, dict(estimate=mean))
  return DiagonalEstimate(estimate=op.spec.unravel(mean), std_error=op.spec.unravel(sem), num_matvecs=num_probes)
