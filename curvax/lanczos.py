"""Lanczos tridiagonalization of a symmetric operator given only as a matvec on a pytree.

Contract: `lanczos(op, num_steps=m, key=key)` (or `v0=`) runs m steps of the symmetric Lanczos recurrence (Lanczos
1950; Paige 1972's stable ordering) on the `curvax.operators.LinearOperator` `op`, started at v0/‖v0‖, never forming
the matrix. It returns a `LanczosResult`: T_k (alphas, betas), its Ritz values θ_i with certified bounds, first
components s_{1,i} for Gauss quadrature, and diagnostics (orthogonality loss, breakdown step).

One jitted program per (operator structure, n, dtype, static options): a `lax.while_loop` over a preallocated
[num_steps + 1, n] basis, so compile time does not grow with num_steps and a new operator of the same structure
reuses it. `stop=(largest, count, rel_tol[, bound])` ends the loop once the extreme Ritz values' reported bounds
(`curvax.ritz.ritz_converged`, the same bounds the result carries) are within rel_tol. Options are checked before
any compute (`curvax.lanczos_options`, the basis against `max_basis_bytes` included). `basis_memory="host"` keeps
the basis in the host memory kind and streams it to the device a block at a time (`curvax.host_basis`).

Reorthogonalization ("full", "partial": Simon 1984, "none"): one step builder each in
`curvax.reorthogonalization.STRATEGIES`, called by the one loop body; the initial state and finalization are shared.
Certificates hold in floating point: the residual |β_k s_{k,i}| plus the rounding floor √k·ε_1·‖A‖ (Paige 1976,
1980; Parlett 1998 §13.4), divided by the measured norm of the Ritz vector (`curvax.ritz.certified_bounds`).
Breakdown (β_i ≤ tol·max_j‖A q_j‖: an invariant subspace) stops the run with the k = i + 1 completed steps, no
division by the small β, so no NaN; arrays beyond k are zero and `ritz_mask` False.

Our own code rather than `matfree.decomp.tridiag_sym`: matfree divides by β without a guard (NaN at a breakdown),
has no memory guard for its full reorthogonalization, and returns no Ritz bounds, orthogonality diagnostics or
progress hook; tests/test_lanczos.py cross-checks the two tridiagonals.
"""

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from curvax import summary
from curvax.finite import check_finite
from curvax.host_basis import basis_access, check_basis_placement
from curvax.lanczos_options import (
    DEFAULT_MAX_BASIS_BYTES,
    check_basis_memory,
    check_basis_sharding,
    check_matvec_rtol,
    check_stop,
    sharding_constraints,
    validate_options,
)
from curvax.operators import FlatSpec, as_operator, report, run_program, with_callback
from curvax.orthogonality import gram_deviation
from curvax.reorthogonalization import get_strategy
from curvax.ritz import certified_bounds, default_matvec_rtol, gap_refined_bounds, ritz_converged, tridiagonal_eigh

BREAKDOWN_POLICY = (
    "stop early: the k steps before breakdown are kept, later entries are zero and masked; "
    "Ritz values are those of the leading k x k block T_k"
)


@dataclasses.dataclass(frozen=True)
class LanczosResult:
  """Output of `lanczos`. m = num_steps requested, k = num_steps_taken ≤ m.

  Attributes:
    alphas: [m] diagonal of T; zero beyond k.
    betas: [m] betas[i] = ‖r_i‖ couples q_i and q_{i+1}; betas[:k-1] is T_k's off-diagonal, betas[k-1] the final
      residual norm β_k (tiny after a breakdown); zero beyond k.
    num_steps_taken: int32 scalar k.
    ritz_values: [m] eigenvalues of T_k ascending in the first k entries; zero beyond.
    ritz_bounds: [m] certified bounds: an eigenvalue of A lies within this distance of θ_i in floating point, the
      residual |β_k s_{k,i}| plus the rounding floor √k·ε_1·‖A‖, divided by the measured ‖y_i‖ (`curvax.ritz.
      certified_bounds`: Paige 1976; Parlett 1998, §13.4 and Thm 4.5.1); the dtype's largest finite number
      when orthogonality is lost (nothing certified).
    residual_norms: [m] |β_k s_{k,i}|, the exact-arithmetic bound (Parlett 1998, Thm 13.1.1), without the floor.
    gap_bounds: [m] gap-theorem refinement min(r, r²/gap) of the residuals with the same floor (`curvax.ritz`; an
      estimate).
    norm_estimate: scalar max_j ‖A q_j‖ (≤ ‖A‖), the scale of the rounding floor.
    first_components: [m] s_{1,i}, first components of T_k's unit eigenvectors; Σ_i s_{1,i}² = 1 (quadrature weights).
    ritz_mask: [m] True for the k valid entries.
    eigenvectors: [m, m] eigenvectors S of T (column i ↔ ritz_values[i]); rows/columns beyond k are padding.
    orthogonality_loss: scalar max_{i,j<k} |q_iᵀq_j − δ_ij|, measured or estimated (see `orthogonality`).
    breakdown: bool scalar, True if β fell below the tolerance.
    breakdown_step: int32 scalar, 0-based step of the breakdown, -1 if none.
    basis: [m + 1, n] flat Lanczos vectors q_0..q_m (zero rows beyond k) if `return_basis`, else None.
    num_reorthogonalizations: int32 scalar, steps whose vector went through the CGS pass (all k with "full",
      the triggered ones with "partial", 0 with "none").
    converged: bool scalar, True if the iteration stopped early on the `stop` criterion.
    reorthogonalize: "full", "partial" or "none" (static).
    orthogonality: how `orthogonality_loss` was obtained (static text).
    breakdown_policy: the policy applied on breakdown (static text).
  """

  alphas: jax.Array
  betas: jax.Array
  num_steps_taken: jax.Array
  ritz_values: jax.Array
  ritz_bounds: jax.Array
  residual_norms: jax.Array
  gap_bounds: jax.Array
  norm_estimate: jax.Array
  first_components: jax.Array
  ritz_mask: jax.Array
  eigenvectors: jax.Array
  orthogonality_loss: jax.Array
  breakdown: jax.Array
  breakdown_step: jax.Array
  num_reorthogonalizations: jax.Array
  converged: jax.Array
  basis: Optional[jax.Array]
  reorthogonalize: str
  orthogonality: str
  breakdown_policy: str

  def __repr__(self):
    return summary.lanczos(self)

  def valid_ritz(self):
    """Host-side helper: (ritz_values, ritz_bounds) of the k valid entries as numpy arrays (unbatched only)."""
    k = int(self.num_steps_taken)
    return np.asarray(self.ritz_values)[:k], np.asarray(self.ritz_bounds)[:k]


_META_FIELDS = ("reorthogonalize", "orthogonality", "breakdown_policy")
jax.tree_util.register_dataclass(
    LanczosResult,
    data_fields=[f.name for f in dataclasses.fields(LanczosResult) if f.name not in _META_FIELDS],
    meta_fields=list(_META_FIELDS),
)


def _initial_state(v0_flat, m, store, on_vec, access):
  norm0 = jnp.linalg.norm(v0_flat)
  q0 = on_vec(v0_flat / jnp.where(norm0 > 0, norm0, 1.0))  # a zero v0 breaks down at step 0 instead of giving NaN
  dtype = v0_flat.dtype
  basis = access.set_row(access.place(jnp.zeros((m + 1, q0.shape[0]), dtype)), 0, q0) if store else None
  zeros_m = jnp.zeros((m,), dtype)
  om = jnp.zeros((m + 1,), dtype).at[0].set(1.0)
  return dict(
      i=jnp.int32(0),
      active=jnp.bool_(True),
      q_prev=jnp.zeros_like(q0),
      q_cur=q0,
      basis=basis,
      alphas=zeros_m,
      betas=zeros_m,
      anorm=jnp.zeros((), dtype),
      breakdown_step=jnp.int32(-1),
      om_prev=jnp.zeros_like(om),
      om_cur=om,
      om_max=jnp.zeros((), dtype),
      reorth_next=jnp.bool_(False),
      num_reorth=jnp.int32(0),
      converged=jnp.bool_(False),
  )


def _finalize(s, matvec_rtol, gram=gram_deviation):
  """The result's arrays from the final loop state `s`: T_k's Ritz pairs and their certified bounds."""
  alphas, betas, k, basis, anorm = s["alphas"], s["betas"], s["i"], s["basis"], s["anorm"]
  ritz_values, residuals, first, mask, s_mxm = tridiagonal_eigh(alphas, betas, k)
  valid = jnp.arange(alphas.shape[0]) < k
  gram_dev = None if basis is None else gram(basis, k)
  loss = s["om_max"] if basis is None else jnp.max(jnp.abs(gram_dev))
  certify = lambda r: certified_bounds(
      r, ritz_values, mask, k, anorm, matvec_rtol, gram_dev=gram_dev, omega=loss, s_mxm=s_mxm
  )
  return dict(
      alphas=jnp.where(valid, alphas, 0.0),
      betas=jnp.where(valid, betas, 0.0),
      num_steps_taken=k,
      ritz_values=ritz_values,
      ritz_bounds=certify(residuals),
      residual_norms=residuals,
      gap_bounds=certify(gap_refined_bounds(ritz_values, residuals, mask)),
      norm_estimate=anorm,
      first_components=first,
      ritz_mask=mask,
      eigenvectors=s_mxm,
      orthogonality_loss=loss,
      breakdown=s["breakdown_step"] >= 0,
      breakdown_step=s["breakdown_step"],
      num_reorthogonalizations=s["num_reorth"],
      converged=s["converged"],
  )


def lanczos_core(
    op,
    v0_flat,
    *,
    num_steps,
    reorthogonalize="full",
    reorth_passes="auto",
    breakdown_tol=None,
    return_basis=False,
    stop=None,
    callback_id=None,
    callback_every=10,
    progress_offset=0,
    progress_total=None,
    basis_sharding=None,
    matvec_rtol=None,
    basis_memory="device",
) -> LanczosResult:
  """The Lanczos recurrence on a flat operator (`op.flat_matvec`), traceable; `lanczos` validates and compiles it.

  `stop = (largest, count, rel_tol, bound)` ends the iteration once the `count` largest (or smallest) Ritz values
  are converged to `rel_tol` relative bound of kind `bound` ("residual" or "gap"). Progress goes to the host
  callback registered under `callback_id` as (progress_offset + step, progress_total) every `callback_every` steps.
  """
  n, dtype = v0_flat.shape[0], v0_flat.dtype
  store = reorthogonalize != "none" or return_basis
  m = int(num_steps)
  eps = float(jnp.finfo(dtype).eps)
  tol = float(np.sqrt(eps)) if breakdown_tol is None else float(breakdown_tol)
  total = m if progress_total is None else progress_total
  rtol = default_matvec_rtol(n, dtype) if matvec_rtol is None else float(matvec_rtol)

  on_vec, on_basis = sharding_constraints(basis_sharding)
  access = basis_access(basis_memory, on_basis)  # where the basis lives: every touch of it goes through this

  def matvec_flat(x):
    return on_vec(op.flat_matvec(x).astype(dtype))

  strategy = get_strategy(reorthogonalize)(m, n, eps, reorth_passes, store, access.cgs)
  state = _initial_state(v0_flat, m, store, on_vec, access)

  def body(s):
    i = s["i"]
    beta_prev = jnp.where(i > 0, s["betas"][jnp.maximum(i - 1, 0)], 0.0)
    w = matvec_flat(s["q_cur"])
    anorm = jnp.maximum(s["anorm"], jnp.linalg.norm(w))
    w = w - beta_prev * s["q_prev"]
    alpha = jnp.vdot(s["q_cur"], w)
    w, beta, reorthed, aux = strategy.orthogonalize(s, w - alpha * s["q_cur"], alpha)
    broke = beta <= tol * anorm
    q_next = jnp.where(broke, 0.0, w / jnp.where(broke, 1.0, beta))
    alphas, betas = s["alphas"].at[i].set(alpha), s["betas"].at[i].set(beta)
    if stop is not None:  # on the bounds `_finalize` would report at this step (`curvax.ritz.certified_bounds`)
      theta, residuals, _, mask, s_mxm = tridiagonal_eigh(alphas, betas, i + 1)
      gram = None if s["basis"] is None else lambda: access.gram(s["basis"], i + 1)
      converged = ritz_converged(stop, theta, residuals, mask, s_mxm, i + 1, anorm, rtol, gram=gram, omega=s["om_max"])
    else:
      converged = jnp.bool_(False)
    out = dict(
        s,
        i=i + 1,
        active=~broke & ~converged,
        q_prev=s["q_cur"],
        q_cur=q_next,
        anorm=anorm,
        alphas=alphas,
        betas=betas,
        breakdown_step=jnp.where(broke, i, s["breakdown_step"]),
        num_reorth=s["num_reorth"] + reorthed.astype(jnp.int32),
        converged=converged & ~broke,
        **strategy.carry(s, aux, broke, converged),
    )
    if store:
      out["basis"] = access.set_row(s["basis"], i + 1, q_next)
    if callback_id is not None:
      due = ((i + 1) % callback_every == 0) | (i + 1 == m) | broke | converged
      jax.lax.cond(due, lambda: report(callback_id, progress_offset + i + 1, total), lambda: None)
    return out

  s = jax.lax.while_loop(lambda s: (s["i"] < m) & s["active"], body, state)
  how = (
      "measured: max|V_k^T V_k - I| over the k Lanczos vectors"
      if store
      else "estimated: Simon (1984) omega recurrence (reorthogonalize='none', basis not stored)"
  )
  return LanczosResult(
      **_finalize(s, rtol, access.gram),
      basis=s["basis"] if return_basis else None,
      reorthogonalize=reorthogonalize,
      orthogonality=how,
      breakdown_policy=BREAKDOWN_POLICY,
  )


LANCZOS_STATIC = (
    "num_steps",
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "return_basis",
    "stop",
    "callback_every",
    "progress_total",
    "basis_sharding",
    "matvec_rtol",
    "basis_memory",
)


def _lanczos_program(op, start, callback_id, *, gaussian=None, **static):
  """The whole `lanczos` call as one program: `start` is the start vector (any pytree of its size, raveled here) or,
  with `gaussian = (n, dtype)`, the PRNG key of a Gaussian one drawn here (no separate program for either)."""
  if gaussian is None:
    v0_flat = FlatSpec.of(start).ravel(start)
  else:
    v0_flat = jax.random.normal(start, (gaussian[0],), jnp.dtype(gaussian[1]))
  return lanczos_core(op, v0_flat, callback_id=callback_id, **static)


def lanczos(
    op: Any,
    *,
    num_steps: int,
    key: Optional[jax.Array] = None,
    v0: Any = None,
    reorthogonalize: str = "full",
    reorth_passes: Any = "auto",
    breakdown_tol: Optional[float] = None,
    return_basis: bool = False,
    max_basis_bytes: int = DEFAULT_MAX_BASIS_BYTES,
    stop: Optional[tuple] = None,
    callback: Optional[Callable[[int, int], None]] = None,
    callback_every: int = 10,
    basis_sharding: Optional[jax.sharding.NamedSharding] = None,
    matvec_rtol: Optional[float] = None,
    basis_memory: str = "device",
) -> LanczosResult:
  """Run `num_steps` Lanczos steps on a symmetric operator (see the module docstring for the contract).

  A jitted program compiled once per (operator structure, size, dtype, static options): a `LinearOperator`
  (`curvax.hessian`'s, say) or a `jax.tree_util.Partial` reuses it across calls; a plain callable wrapped by
  `curvax.as_operator` is compiled for each call (`curvax.operators`).

  Args:
    op: a symmetric `LinearOperator` (its size n and dtype set the problem).
    num_steps: m, the maximal number of matvecs; 1 ≤ m ≤ n.
    key: PRNG key of the Gaussian start vector; exactly one of `key` and `v0`.
    v0: start vector (pytree shaped like the operator's input, or a flat [n] array; its dtype sets the computation
      dtype); normalized here.
    reorthogonalize: "full" (CGS against all previous vectors every step), "partial" (Simon's PRO: the CGS pass
      only when the ω estimate exceeds √ε) or "none" (three-term recurrence, O(n) memory).
    reorth_passes: for the CGS pass: "auto" (a second pass only when the first cancelled, Kahan–Parlett) or 2
      (always two passes, CGS2). Ignored with "none".
    breakdown_tol: stop when β_i ≤ breakdown_tol · max_j ‖A q_j‖. Default √ε of the dtype (1.5e-8 in float64,
      3.5e-4 in float32): Ritz values of T_k then have residual ≤ √ε‖A‖, i.e. they are converged.
    return_basis: also return the [m + 1, n] flat basis (for Ritz vectors V S: `curvax.ritz.ritz_vectors`); with
      "none" this makes the memory O(m·n) again and the orthogonality loss measured rather than estimated.
    max_basis_bytes: raise ValueError before any compute if the basis needs more bytes than this.
    stop: None, or (largest, count, rel_tol[, bound]): stop as soon as the `count` largest (largest=True) or
      smallest Ritz values have a bound ≤ rel_tol·|θ| (`converged` is then True and k < m steps are kept);
      bound "residual" (default, |β_k s_{k,i}|) or "gap" (`gap_bounds`, the gap-theorem estimate).
    callback: optional host function `callback(step, num_steps)` called through `jax.debug.callback` every
      `callback_every` steps; a runtime operand, not part of the program.
    callback_every: reporting period in steps.
    basis_sharding: None (the vectors live where XLA puts them) or a `NamedSharding` of the flat n-vector, e.g.
      `NamedSharding(mesh, PartitionSpec(("data",)))`: every Lanczos vector and the basis' n columns are split
      over those devices, so the basis takes (m + 1)·n/D entries per device (the memory guard counts per device)
      and the reorthogonalization's products run where the columns are, with one all-reduce of m + 1 numbers.
      The operator's own inputs (parameters, batch) keep their shardings: a batch sharded over the mesh gives a
      data-parallel HVP.
    matvec_rtol: the relative rounding error of one product, ‖fl(Av) − Av‖ ≤ matvec_rtol·‖A‖‖v‖, in the
      certified bounds' floor (`curvax.ritz.certified_bounds`); None: √n·ε of the dtype.
    basis_memory: "device" or "host": the stored basis in the device's 'pinned_host' memory kind, each read a block
      moved to the device (`curvax.host_basis`); the memory guard then counts it against the host's memory.

  Returns:
    A `LanczosResult`.
  """
  check_basis_sharding(basis_sharding)
  check_matvec_rtol(matvec_rtol)
  check_basis_placement(basis_memory, sharded=basis_sharding is not None)
  op = as_operator(op)
  if (key is None) == (v0 is None):
    raise ValueError("lanczos needs exactly one of key= (a Gaussian start vector) and v0= (a given start vector)")
  if v0 is None:
    n, dtype = op.size, op.dtype
  else:
    spec = FlatSpec.of(v0)
    n, dtype = spec.size, spec.dtype
    if n != op.size:
      raise ValueError(f"v0 has {n} entries but the operator acts on vectors of {op.size}")
  validate_options(num_steps, n, dtype, reorthogonalize, reorth_passes, breakdown_tol, callback_every)
  stop = check_stop(stop, num_steps)
  if reorthogonalize != "none" or return_basis:
    check_basis_memory(num_steps, n, dtype, max_basis_bytes, basis_sharding=basis_sharding, basis_memory=basis_memory)
  static = dict(
      gaussian=None if v0 is not None else (int(n), jnp.dtype(dtype).name),
      num_steps=int(num_steps),
      reorthogonalize=reorthogonalize,
      reorth_passes=reorth_passes,
      breakdown_tol=breakdown_tol,
      return_basis=return_basis,
      stop=stop,
      callback_every=int(callback_every),
      progress_total=None,
      basis_sharding=basis_sharding,
      matvec_rtol=None if matvec_rtol is None else float(matvec_rtol),
      basis_memory=basis_memory,
  )
  start = key if v0 is None else v0
  res = with_callback(
      callback, lambda cid: run_program(_lanczos_program, ("gaussian", *LANCZOS_STATIC), op, start, cid, **static)
  )
  check_finite("lanczos", op, dict(alphas=res.alphas, betas=res.betas))
  return res
