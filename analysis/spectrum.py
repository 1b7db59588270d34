"""Extreme eigenvalues of a symmetric operator given as a matvec on a pytree.

Contract: every function takes `matvec` (pytree -> pytree, symmetric) and `example` (a pytree with the operator's
input structure and dtype; only its structure, shapes and dtype are used) plus an explicit PRNG `key`, and imports
nothing of the project, so it runs on plain matrices as well as on Hessian-vector products.

  * `top_eigenvalues` / `bottom_eigenvalues`: extreme Ritz values of `lanczos` from a random Gaussian start, with
    residual bounds |β_k s_{k,i}| (an eigenvalue of A lies in [θ_i ± bound_i]; Parlett 1998, Thm 13.1.1), their
    gap-theorem refinement (an estimate; `analysis.ritz`) and a flag
    `separated`, False when the two most extreme intervals overlap (the top eigenvalue is then not resolved).
    "bottom" is the smallest algebraic eigenvalue, i.e. the most negative curvature of a Hessian.
  * The spectral density (SLQ) lives in `analysis.density`, the trace estimators (Hutchinson, Hutch++) in
    `analysis.trace`; both draw their probes from `analysis.probes`.

Every routine is a jitted program taking the operator as an argument (`analysis.operators`): compiled once per
(operator structure, n, dtype, static options).
"""

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from analysis.lanczos import LanczosResult, lanczos_core
from analysis.lanczos_options import STOP_BOUNDS, check_stop, lanczos_options
from analysis.operators import as_operator, run_program, with_callback
from analysis.probes import check_positive_int, flat_info


@dataclasses.dataclass(frozen=True)
class ExtremeEigenvalues:
  """Output of `top_eigenvalues` / `bottom_eigenvalues`.

  Attributes:
    values: [k] Ritz values, most extreme first (descending for top, ascending for bottom).
    bounds: [k] residual bounds: an eigenvalue of A lies in [values ± bounds].
    gap_bounds: [k] gap-theorem refinement min(r, r²/gap) of `bounds`, the gap estimated from the other Ritz
      values (Parlett 1998, Thm 11.7.1; an estimate, see `analysis.ritz`).
    valid: [k] False for entries that do not exist because Lanczos broke down with fewer than k steps (zeros there).
    separated: bool, False when the two most extreme intervals [θ ± bound] overlap or fewer than 2 are valid.
      True proves two distinct eigenvalues in two disjoint intervals, not that θ_1 is the extreme eigenvalue of
      A (a start vector nearly orthogonal to it would miss it).
    lanczos: the full `LanczosResult` (alphas, betas, diagnostics).
  """

  values: jax.Array
  bounds: jax.Array
  gap_bounds: jax.Array
  valid: jax.Array
  separated: jax.Array
  lanczos: LanczosResult


jax.tree_util.register_dataclass(
    ExtremeEigenvalues, data_fields=["values", "bounds", "gap_bounds", "valid", "separated", "lanczos"], meta_fields=[]
)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _select_extreme(ritz_values, ritz_bounds, gap_bounds, steps, k, largest):
  """Pick the k most extreme of the `steps` valid (ascending) Ritz values; flag overlap of the top two intervals."""
  m = ritz_values.shape[0]
  order = jnp.arange(k)
  idx = steps - 1 - order if largest else order
  valid = (idx >= 0) & (idx < steps)
  idx = jnp.clip(idx, 0, m - 1)
  values = jnp.where(valid, ritz_values[idx], 0.0)
  bounds = jnp.where(valid, ritz_bounds[idx], 0.0)
  refined = jnp.where(valid, gap_bounds[idx], 0.0)
  i1, i2 = (steps - 1, jnp.clip(steps - 2, 0, m - 1)) if largest else (0, jnp.minimum(1, m - 1))
  gap = jnp.abs(ritz_values[i1] - ritz_values[i2])
  separated = (steps >= 2) & (gap > ritz_bounds[i1] + ritz_bounds[i2])
  return values, bounds, refined, valid, separated


_EXTREME_STATIC = (
    "k",
    "largest",
    "n",
    "dtype",
    "num_steps",
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "return_basis",
    "stop",
    "callback_every",
    "basis_sharding",
)


def _extreme_program(op, key, callback_id, *, k, largest, n, dtype, **lanczos_static):
  v0 = jax.random.normal(key, (n,), dtype)
  res = lanczos_core(op, v0, callback_id=callback_id, **lanczos_static)
  values, bounds, refined, valid, separated = _select_extreme(
      res.ritz_values, res.ritz_bounds, res.gap_bounds, res.num_steps_taken, k, largest
  )
  return ExtremeEigenvalues(
      values=values, bounds=bounds, gap_bounds=refined, valid=valid, separated=separated, lanczos=res
  )


def _extreme(matvec, example, k, num_steps, key, largest, tol, bound, lanczos_kwargs):
  n, dtype, _ = flat_info(example)
  check_positive_int("k", k)
  check_positive_int("num_steps", num_steps)
  if num_steps > n:
    raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator")
  if k > num_steps:
    raise ValueError(f"k={k} exceeds num_steps={num_steps}: Lanczos gives at most num_steps Ritz values")
  if tol is not None and not (isinstance(tol, (int, float)) and tol > 0):
    raise ValueError(f"tol={tol!r} must be None or a positive relative residual bound (e.g. 0.01)")
  if bound not in STOP_BOUNDS:
    raise ValueError(f"bound={bound!r} is not valid; valid choices: {list(STOP_BOUNDS)}")
  stop = check_stop(None if tol is None else (largest, int(k), float(tol), bound), num_steps)
  static, callback = lanczos_options(lanczos_kwargs, num_steps, n, dtype)
  op = as_operator(matvec, example)
  return with_callback(
      callback,
      lambda cid: run_program(
          _extreme_program,
          _EXTREME_STATIC,
          op,
          key,
          cid,
          k=int(k),
          largest=largest,
          n=n,
          dtype=jnp.dtype(dtype),
          stop=stop,
          **static,
      ),
  )


def top_eigenvalues(
    matvec: Callable[[Any], Any],
    example: Any,
    k: int,
    *,
    num_steps: int,
    key: jax.Array,
    tol: Optional[float] = None,
    bound: str = "residual",
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Largest-algebraic k eigenvalues of a symmetric operator by Lanczos from a random Gaussian start.

  One jitted program per (operator structure, n, dtype, options): a second call with another operator of the
  same structure (`analysis.operators`) compiles nothing.

  Args:
    matvec: symmetric linear map on pytrees shaped like `example` (a `LinearOperator` or a callable).
    example: pytree giving the structure, size n and dtype.
    k: number of eigenvalues, 1 ≤ k ≤ num_steps.
    num_steps: Lanczos steps (matvecs), ≤ n; with `tol`, the most that are taken.
    key: PRNG key for the start vector.
    tol: None (run `num_steps` steps), or stop as soon as each of the k values has its bound ≤ tol·|θ|
      (e.g. 0.01: every reported eigenvalue to 1%).
    bound: which bound `tol` applies to: "residual" (rigorous: an eigenvalue within it) or "gap" (the
      gap-theorem refinement, an estimate that needs fewer steps once the gap to the next Ritz value is large;
      on the `small` preset's Hessian `bench/hessian.py` measures both).
    **lanczos_kwargs: forwarded to Lanczos (reorthogonalize, reorth_passes, breakdown_tol, max_basis_bytes,
      callback, callback_every, return_basis, basis_sharding).

  Returns:
    `ExtremeEigenvalues`, descending.
  """
  return _extreme(matvec, example, k, num_steps, key, True, tol, bound, lanczos_kwargs)


def bottom_eigenvalues(
    matvec: Callable[[Any], Any],
    example: Any,
    k: int,
    *,
    num_steps: int,
    key: jax.Array,
    tol: Optional[float] = None,
    bound: str = "residual",
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Smallest-algebraic k eigenvalues (most negative curvature first); arguments as in `top_eigenvalues`.

  Returns:
    `ExtremeEigenvalues`, ascending.
  """
  return _extreme(matvec, example, k, num_steps, key, False, tol, bound, lanczos_kwargs)
