"""Stochastic trace estimates of a symmetric operator given as a matvec on a pytree.

Contract: `trace(matvec, example, num_probes, key, method)` spends exactly `num_probes` matvecs and returns the
estimate with a standard error; like `analysis.spectrum` it imports nothing of the project but that module's probes,
so it runs on plain matrices as well as on Hessian-vector products.

  * "hutchinson": Hutchinson (1989), mean of z_pᵀ A z_p over Rademacher probes z_p.
  * "hutch++": Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1): a low-rank sketch's trace exactly, Hutchinson
    on the deflated rest; smaller error than Hutchinson at equal matvecs when the spectrum decays.

Own code rather than `matfree.stochtrace`: matfree has no Hutch++; tests/test_trace.py checks Hutchinson against
`matfree.stochtrace` on the same probes.
"""
import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from analysis.spectrum import PROBES, check_positive_int, flat_info, flat_matvec


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


jax.tree_util.register_dataclass(TraceEstimate, data_fields=["estimate", "std_error"],
                                 meta_fields=["num_matvecs", "method"])


def _quadratic_forms(mv_flat, z_pxn):
    """z_pᵀ A z_p for each row, sequentially (memory of one matvec)."""
    return jax.lax.map(lambda z: jnp.vdot(z, mv_flat(z)), z_pxn)


# The pure array steps below are jitted (one compilation each instead of op-by-op); the matvec steps are not, so
# arrays the matvec closes over (model parameters) stay operands rather than constants of a compiled program.
@jax.jit
def _mean_and_sem(q_p):
    return jnp.mean(q_p), jnp.std(q_p, ddof=1) / jnp.sqrt(q_p.shape[0])


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _signs(key, num, n, dtype):
    return PROBES["rademacher"](key, (num, n), dtype)


@jax.jit
def _orthonormalize_and_deflate(as_sxn, g_gxn):
    q_nxs, _ = jnp.linalg.qr(as_sxn.T)
    return q_nxs, g_gxn - (g_gxn @ q_nxs) @ q_nxs.T  # (I − QQᵀ) g


def _hutchinson(mv_flat, n, dtype, num_probes, key):
    """Hutchinson (1989): tr(A) ≈ mean_p z_pᵀ A z_p with Rademacher z; variance 2(‖A‖_F² − Σ a_ii²)/P."""
    if num_probes < 2:
        raise ValueError(f"num_probes={num_probes} must be ≥ 2 for method='hutchinson' (standard error needs 2)")
    return _mean_and_sem(_quadratic_forms(mv_flat, _signs(key, num_probes, n, dtype)))


def _hutchpp(mv_flat, n, dtype, num_probes, key):
    """Hutch++ (Meyer, Musco, Musco & Woodruff 2021, Alg. 1) with `num_probes` matvecs in total.

    s = num_probes // 3 sketch vectors S give Q = orth(A S); tr(A) = tr(QᵀAQ) + tr((I−QQᵀ)A(I−QQᵀ)), the first
    term exact with s more matvecs (AQ), the second by Hutchinson with the remaining g = num_probes − 2s probes
    G: (1/g) Σ_p g_pᵀ(I−QQᵀ)A(I−QQᵀ)g_p. The returned standard error is that Hutchinson part's sample standard
    error, conditional on the sketch (the deflated term is the estimator's only randomness given Q).
    """
    s = num_probes // 3
    g = num_probes - 2 * s
    if s < 1 or g < 2:
        raise ValueError(f"num_probes={num_probes} must be ≥ 4 for method='hutch++' "
                         "(1 sketch, 1 AQ, 2 residual probes)")
    key_s, key_g = jax.random.split(key)
    as_sxn = jax.lax.map(mv_flat, _signs(key_s, s, n, dtype))
    q_nxs, g_gxn = _orthonormalize_and_deflate(as_sxn, _signs(key_g, g, n, dtype))
    exact = jnp.vdot(q_nxs.T, jax.lax.map(mv_flat, q_nxs.T))  # tr(QᵀAQ)
    # A symmetric, so g_pᵀ(I−QQᵀ)A(I−QQᵀ)g_p = (Pg_p)ᵀA(Pg_p).
    mean, sem = _mean_and_sem(_quadratic_forms(mv_flat, g_gxn))
    return exact + mean, sem


TRACE_METHODS = {"hutchinson": _hutchinson, "hutch++": _hutchpp}


def get_trace_method(name: str):
    """Return the trace estimator registered under `name`."""
    if name not in TRACE_METHODS:
        raise ValueError(f"method={name!r} is not a valid trace method; valid choices: {sorted(TRACE_METHODS)}")
    return TRACE_METHODS[name]


def trace(matvec: Callable[[Any], Any], example: Any, num_probes: int, key: jax.Array,
          method: str = "hutchinson") -> TraceEstimate:
    """Stochastic trace estimate of a symmetric operator with exactly `num_probes` matvecs.

    Args:
      matvec: symmetric linear map on pytrees shaped like `example`.
      example: pytree giving the structure, size n and dtype.
      num_probes: matvec budget (≥ 2 for "hutchinson", ≥ 4 for "hutch++").
      key: PRNG key.
      method: "hutchinson" (Rademacher probes) or "hutch++" (low-rank sketch plus Hutchinson on the rest).

    Returns:
      A `TraceEstimate` (estimate, standard error as documented on each method).
    """
    estimator = get_trace_method(method)
    check_positive_int("num_probes", num_probes)
    n, dtype, unravel = flat_info(example)
    estimate, std_error = estimator(flat_matvec(matvec, unravel, dtype), n, dtype, num_probes, key)
    return TraceEstimate(estimate=estimate, std_error=std_error, num_matvecs=num_probes, method=method)
