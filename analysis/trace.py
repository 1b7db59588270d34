"""Stochastic trace estimates of a symmetric operator given as a matvec on a pytree.

Contract: `trace(matvec, example, num_probes, key, method)` spends exactly `num_probes` matvecs and returns the
estimate with a standard error; like `analysis.spectrum` it imports nothing of the project but its probes
(`analysis.probes`), so it runs on plain matrices as well as on Hessian-vector products.

  * "hutchinson": Hutchinson (1989), mean of z_pᵀ A z_p over Rademacher probes z_p.
  * "hutch++": Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1): a low-rank sketch's trace exactly, Hutchinson
    on the deflated rest; smaller error than Hutchinson at equal matvecs when the spectrum decays.

Own code rather than `matfree.stochtrace`: matfree has no Hutch++; tests/test_trace.py checks Hutchinson against
`matfree.stochtrace` on the same probes.
"""

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from analysis.operators import as_operator, run_program
from analysis.probes import PROBES, check_positive_int, check_probe_batch, flat_info, map_probes


@dataclasses.dataclass(frozen=True)
class TraceEstimate:
  """Output of `trace`.

  Attributes:
    estimate: scalar trace estimate.
    std_error: scalar standard error (for Hutch++: of its stochastic part, conditional on the sketch; see `trace`).
    num_matvecs: matvecs used (static).
    method: "hutchinson" or "hutch++" (static).
  """

  estimate: jax.Array
  std_error: jax.Array
  num_matvecs: int
  method: str


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


TRACE_METHODS = {"hutchinson": _hutchinson, "hutch++": _hutchpp}
MIN_PROBES = {"hutchinson": 2, "hutch++": 4}  # the standard error needs 2; Hutch++: 1 sketch, 1 AQ, 2 residual


def get_trace_method(name: str):
  """Return the trace estimator registered under `name`."""
  if name not in TRACE_METHODS:
    raise ValueError(f"method={name!r} is not a valid trace method; valid choices: {sorted(TRACE_METHODS)}")
  return TRACE_METHODS[name]


def _trace_program(op, key, *, method, n, dtype, num_probes, probe_batch):
  return TRACE_METHODS[method](op, n, dtype, num_probes, key, probe_batch)


def trace(
    matvec: Callable[[Any], Any],
    example: Any,
    num_probes: int,
    key: jax.Array,
    method: str = "hutchinson",
    probe_batch: Optional[int] = None,
) -> TraceEstimate:
  """Stochastic trace estimate of a symmetric operator with exactly `num_probes` matvecs.

  One jitted program per (operator structure, n, dtype, method, num_probes, probe_batch): a second call with
  another operator of the same structure compiles nothing (`analysis.operators`).

  Args:
    matvec: symmetric linear map on pytrees shaped like `example` (a `LinearOperator` or a callable).
    example: pytree giving the structure, size n and dtype.
    num_probes: matvec budget (≥ 2 for "hutchinson", ≥ 4 for "hutch++").
    key: PRNG key.
    method: "hutchinson" (Rademacher probes) or "hutch++" (low-rank sketch plus Hutchinson on the rest).
    probe_batch: probes in lockstep through one vmapped matvec (memory × probe_batch); None: the backend's
      default (`analysis.probes.PROBE_BATCH_DEFAULTS`). The estimate does not depend on it (to rounding).

  Returns:
    A `TraceEstimate` (estimate, standard error as documented on each method).
  """
  get_trace_method(method)
  check_positive_int("num_probes", num_probes)
  if num_probes < MIN_PROBES[method]:
    raise ValueError(f"num_probes={num_probes} must be ≥ {MIN_PROBES[method]} for method={method!r}")
  n, dtype, _ = flat_info(example)
  probe_batch = check_probe_batch(probe_batch, num_probes)
  op = as_operator(matvec, example)
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
  return TraceEstimate(estimate=estimate, std_error=std_error, num_matvecs=num_probes, method=method)
