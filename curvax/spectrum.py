"""Extreme eigenvalues of a symmetric operator given as a matvec on a pytree.

Contract: every function takes the symmetric operator first (a `curvax.operators.LinearOperator`: its size and
dtype come from it) plus an explicit PRNG `key`, and imports nothing of the project, so it runs on plain matrices
(`curvax.matrix_operator`) as well as on Hessian-vector products (`curvax.hessian`).

  * `top_eigenvalues` / `bottom_eigenvalues`: extreme Ritz values of `lanczos` from a random Gaussian start, with
    certified bounds (an eigenvalue of A lies in [θ_i ± bound_i] in floating point: the residual |β_k s_{k,i}| of
    Parlett 1998, Thm 13.1.1, plus the rounding floor of `curvax.ritz.certified_bounds`), their
    gap-theorem refinement (an estimate; `curvax.ritz`) and a flag
    `separated`, False when the two most extreme intervals overlap (the top eigenvalue is then not resolved).
    "bottom" is the smallest algebraic eigenvalue, i.e. the most negative curvature of a Hessian.
  * The spectral density (SLQ) lives in `curvax.density`, the trace and diagonal estimators in `curvax.trace`;
    both draw their probes from `curvax.probes`.

Every routine is a jitted program taking the operator as an argument (`curvax.operators`): compiled once per
(operator structure, n, dtype, static options).
"""

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from curvax import summary
from curvax.blocks import leaf_paths
from curvax.finite import check_finite
from curvax.host_basis import combine_rows
from curvax.lanczos import LANCZOS_STATIC, LanczosResult, lanczos_core
from curvax.lanczos_options import STOP_BOUNDS, check_stop, lanczos_options
from curvax.operators import ravel_leaves, run_program, with_callback
from curvax.probes import check_positive_int, operator_info
from curvax.restart import RESTART_STATIC, check_max_vectors, kept_vectors, restarted_core


@dataclasses.dataclass(frozen=True)
class ExtremeEigenvalues:
  """Output of `top_eigenvalues` / `bottom_eigenvalues`.

  Attributes:
    values: [k] Ritz values, most extreme first (descending for top, ascending for bottom).
    bounds: [k] certified bounds: an eigenvalue of A lies in [values ± bounds] in floating point (the residual
      |β_k s_{k,i}| plus the rounding floor, over the measured norm of the Ritz vector: `curvax.ritz.certified_bounds`).
    gap_bounds: [k] gap-theorem refinement min(r, r²/gap) of `bounds`, the gap estimated from the other Ritz
      values (Parlett 1998, Thm 11.7.1; an estimate, see `curvax.ritz`).
    valid: [k] False for entries that do not exist because Lanczos broke down with fewer than k steps (zeros there).
    separated: bool, False when the two most extreme intervals [θ ± bound] overlap or fewer than 2 are valid.
      True proves two distinct eigenvalues in two disjoint intervals, not that θ_1 is the extreme eigenvalue of
      A (a start vector nearly orthogonal to it would miss it).
    lanczos: the full `LanczosResult` (alphas, betas, diagnostics).
    largest: True for `top_eigenvalues`, False for `bottom_eigenvalues` (static).
  """

  values: jax.Array
  bounds: jax.Array
  gap_bounds: jax.Array
  valid: jax.Array
  separated: jax.Array
  lanczos: LanczosResult
  largest: bool = True

  def __repr__(self):
    return summary.extreme(self)


jax.tree_util.register_dataclass(
    ExtremeEigenvalues,
    data_fields=["values", "bounds", "gap_bounds", "valid", "separated", "lanczos"],
    meta_fields=["largest"],
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


# The stop rules of `top_eigenvalues` / `bottom_eigenvalues`: Lanczos's certified ones and "change", the Ritz
# values' relative change between two products, |θ_k − θ_{k−1}| ≤ tol·|θ_k| (the test of PyHessian's power
# iteration, Yao et al. 2020, Alg. 1, on Lanczos's values instead of the power iterate's).
EXTREME_BOUNDS = (*STOP_BOUNDS, "change")

# Lanczos's static arguments (its progress bar's total excepted: these programs take no progress callback) and the
# start vector's.
_EXTREME_STATIC = ("k", "largest", "n", "dtype", "warm", *(a for a in LANCZOS_STATIC if a != "progress_total"))
_RESTART_STATIC = ("k", "largest", "n", "dtype", "warm", "max_vectors", "keep", *RESTART_STATIC)


def _extreme_program(op, start, callback_id, *, k, largest, n, dtype, warm, max_vectors=None, keep=None, **static):
  v0 = start.astype(dtype) if warm else jax.random.normal(start, (n,), dtype)
  if max_vectors is None:
    res = lanczos_core(op, v0, callback_id=callback_id, **static)
    steps = res.num_steps_taken
  else:  # thick restart (`curvax.restart`): the final cycle's Ritz values are the valid ones
    res = restarted_core(op, v0, max_vectors=max_vectors, keep=keep, largest=largest, callback_id=callback_id, **static)
    steps = jnp.sum(res.ritz_mask.astype(jnp.int32))
  values, bounds, refined, valid, separated = _select_extreme(
      res.ritz_values, res.ritz_bounds, res.gap_bounds, steps, k, largest
  )
  return ExtremeEigenvalues(
      values=values, bounds=bounds, gap_bounds=refined, valid=valid, separated=separated, lanczos=res, largest=largest
  )


def _extreme(op, k, num_steps, key, largest, tol, bound, lanczos_kwargs, v0=None, max_vectors=None):
  op, n, dtype = operator_info(op)
  if (key is None) == (v0 is None):
    raise ValueError("needs exactly one of key= (a Gaussian start vector) and v0= (a given start vector)")
  if v0 is not None:
    v0 = ravel_leaves(v0, dtype)
    if v0.shape != (n,):
      raise ValueError(f"v0 has {v0.size} entries but the operator acts on vectors of {n}")
  check_positive_int("k", k)
  check_positive_int("num_steps", num_steps)
  if num_steps > n:
    raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator; valid: 1 ≤ num_steps ≤ {n}")
  if k > num_steps:
    raise ValueError(
        f"k={k} exceeds num_steps={num_steps}: Lanczos gives at most num_steps Ritz values; valid: 1 ≤ k ≤ {num_steps}"
    )
  if tol is not None and not (isinstance(tol, (int, float)) and tol > 0):
    raise ValueError(f"tol={tol!r} must be None or a positive relative residual bound (e.g. 0.01)")
  if bound not in EXTREME_BOUNDS:
    raise ValueError(f"bound={bound!r} is not valid; valid choices: {list(EXTREME_BOUNDS)}")
  reorth = lanczos_kwargs.get("reorthogonalize", "full")
  stop = check_stop(None if tol is None else (largest, int(k), float(tol), "residual"), num_steps)
  stop = None if stop is None else (*stop[:3], bound)
  stored = check_max_vectors(max_vectors, k, num_steps, n, reorth)
  keep = 0 if stored is None else kept_vectors(int(k), stored)
  if bound == "change" and stop is not None and stored is None:
    # The change rule is tested by the thick-restart loop (`curvax.restart`), here with room for all num_steps
    # vectors, so it never restarts: plain Lanczos with full reorthogonalization, the same certified bounds.
    if reorth != "full":
      raise ValueError(f"bound='change' needs reorthogonalize='full', got {reorth!r}")
    stored, keep = int(num_steps), int(k)
  static, callback = lanczos_options(lanczos_kwargs, num_steps, n, dtype, max_vectors=stored, keep=keep)
  names, restart = _EXTREME_STATIC, {}
  if stored is not None:  # thick restart: Lanczos's options less reorthogonalize ('full' is checked above)
    names, restart = _RESTART_STATIC, dict(max_vectors=stored, keep=keep)
    static = {a: static[a] for a in RESTART_STATIC if a in static}
  res = with_callback(
      callback,
      lambda cid: run_program(
          _extreme_program,
          names,
          op,
          key if v0 is None else v0,
          cid,
          k=int(k),
          largest=largest,
          n=n,
          dtype=jnp.dtype(dtype),
          warm=v0 is not None,
          stop=stop,
          **restart,
          **static,
      ),
  )
  check_finite(
      "top_eigenvalues" if largest else "bottom_eigenvalues",
      op,
      dict(alphas=res.lanczos.alphas, betas=res.lanczos.betas),
  )
  return res


def top_eigenvalues(
    op: Any,
    k: int,
    *,
    num_steps: int,
    key: Optional[jax.Array] = None,
    tol: Optional[float] = None,
    bound: str = "residual",
    v0: Any = None,
    max_vectors: Optional[int] = None,
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Largest-algebraic k eigenvalues of a symmetric operator by Lanczos from a random Gaussian start (or `v0`).

  One jitted program per (operator structure, n, dtype, options): a second call with another operator of the
  same structure (`curvax.operators`) compiles nothing.

  Args:
    op: a symmetric `LinearOperator` (its size n and dtype set the problem).
    k: number of eigenvalues, 1 ≤ k ≤ num_steps.
    num_steps: Lanczos steps (matvecs), ≤ n; with `tol`, the most that are taken.
    key: PRNG key for the start vector; exactly one of `key` and `v0`.
    tol: None (run `num_steps` steps), or stop as soon as each of the k values has its bound ≤ tol·|θ|
      (e.g. 0.01: every reported eigenvalue to 1%).
    bound: which test `tol` applies to: "residual" (rigorous: an eigenvalue within it), "gap" (the
      gap-theorem refinement, an estimate that needs fewer steps once the gap to the next Ritz value is large;
      on the `small` preset's Hessian `bench/hessian.py` measures both) or "change" (each value's relative change
      since the previous product ≤ tol, PyHessian's test: no certificate, so `bounds` are still reported and say
      what was reached; needs reorthogonalize='full').
    **lanczos_kwargs: forwarded to Lanczos (reorthogonalize, reorth_passes, breakdown_tol, max_basis_bytes,
      callback, callback_every, return_basis, basis_sharding, matvec_rtol, basis_memory).

    v0: a given start vector (a pytree shaped like the operator's input, or flat [n]) instead of a random one: a
      warm start, e.g. the top Ritz vector of a nearby operator (`ritz_vector`; the previous checkpoint's), with
      `tol` to stop as soon as the bound is met. The bounds certify as for a random start that an eigenvalue lies
      within them; that it is the largest rests, as there, on the start vector not being orthogonal to its
      eigenvector (mix in a random part: `warm_start`). Compiled once per structure, like a random start.
    max_vectors: None (store all num_steps + 1 Lanczos vectors), or m with k + 2 ≤ m: thick-restart Lanczos
      (Wu & Simon 2000; `curvax.restart`) stores m + 1 vectors (plus the kept Ritz vectors while it restarts),
      whatever `num_steps`, which stays the total of products; the bounds certify as without restart. Needs
      reorthogonalize='full'; m ≥ num_steps never restarts and is plain Lanczos.

  Returns:
    `ExtremeEigenvalues`, descending.
  """
  return _extreme(op, k, num_steps, key, True, tol, bound, lanczos_kwargs, v0, max_vectors)


def warm_start(previous: Any, key: jax.Array, mix: float = 0.1) -> jax.Array:
  """The start vector (y + mix·z/‖z‖)/‖·‖, flat [n]: the unit Ritz vector `previous` (a pytree or flat) of a nearby
  operator plus a random Gaussian part z of relative size `mix`, so that Lanczos can still find a top eigenvector
  that has rotated away from y (a start orthogonal to it never finds it)."""
  y = ravel_leaves(previous, jax.tree.leaves(previous)[0].dtype)
  z = jax.random.normal(key, y.shape, y.dtype)
  v = y / jnp.linalg.norm(y) + mix * z / jnp.linalg.norm(z)
  return v / jnp.linalg.norm(v)


def bottom_eigenvalues(
    op: Any,
    k: int,
    *,
    num_steps: int,
    key: jax.Array,
    tol: Optional[float] = None,
    bound: str = "residual",
    max_vectors: Optional[int] = None,
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Smallest-algebraic k eigenvalues (most negative curvature first); arguments as in `top_eigenvalues`.

  Returns:
    `ExtremeEigenvalues`, ascending.
  """
  return _extreme(op, k, num_steps, key, False, tol, bound, lanczos_kwargs, max_vectors=max_vectors)


def ritz_vector(op: Any, result: ExtremeEigenvalues, index: int = 0) -> Any:
  """The unit Ritz vector y = V_k s of `result.values[index]`, as a pytree shaped like the operator's input.

  Args:
    op: the operator `result` was computed on.
    result: `top_eigenvalues` / `bottom_eigenvalues` run with `return_basis=True`.
    index: which of the k reported values (0: the most extreme).
  """
  res = result.lanczos
  if res.basis is None:
    raise ValueError("ritz_vector needs the Lanczos basis: call top_eigenvalues(..., return_basis=True)")
  steps = int(np.sum(np.asarray(res.ritz_mask)))  # valid Ritz values: the steps, or a restarted run's last cycle
  if not 0 <= index < min(steps, int(result.values.shape[0])):
    raise ValueError(f"index={index} must be in [0, {min(steps, int(result.values.shape[0]))})")
  col = steps - 1 - index if result.largest else index
  return op.spec.unravel(_ritz_column(res.basis, res.eigenvectors, col))


@jax.jit
def _ritz_column(basis, s_mxm, col):
  """The unit Ritz vector V s_col, one [n] vector: forming all m Ritz vectors (`curvax.ritz.ritz_vectors`) would
  allocate a second basis-sized buffer."""
  y = combine_rows(basis, s_mxm[:, col])  # a host basis (`basis_memory="host"`) a block of rows at a time
  return y / jnp.linalg.norm(y)


def ritz_mass(op: Any, result: ExtremeEigenvalues, index: int = 0) -> dict:
  """{leaf path: ‖y_leaf‖²} of the unit Ritz vector `ritz_vector(op, result, index)` (the fractions sum to 1):
  which parameters (layers) the sharpest (or most negative) direction lives in. Paths as in `curvax.leaf_paths`."""
  y = ritz_vector(op, result, index)
  leaves = jax.tree.leaves(y)
  paths = leaf_paths(op.spec)
  return {p: float(jnp.sum(jnp.square(x))) for p, x in zip(paths, leaves)}
