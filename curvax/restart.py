"""Thick-restart Lanczos: extreme eigenvalues with at most `max_vectors` stored vectors, the same certificates.

Contract: `restarted_core(op, v0_flat, num_steps=N, max_vectors=m, keep=l, largest=...)` spends at most N products
(`num_steps` stays the total, as in `curvax.lanczos`) while the basis holds m + 1 rows of n, never N + 1: the memory
of a run is (m + 1 + l)·n entries whatever N is. Thick restart (Wu & Simon 2000, "Thick-restart Lanczos method for
large symmetric eigenvalue problems", SIAM J. Matrix Anal. Appl. 22(2), §2): once the m rows are full, the l Ritz
vectors y_i = V s_i nearest the wanted end are kept together with the residual vector q_{m+1}, and Lanczos goes on
from q_{m+1}. The projected matrix is then no longer tridiagonal but an arrow followed by a tridiagonal:

    T = [ diag(θ_1..θ_l)   c            ]      c_i = β_m s_{m,i}  (Wu & Simon 2000, eq. 2.3: A y_i = θ_i y_i + c_i q_{l+1})
        [ cᵀ               α_{l+1}  β   ]
        [                  β        ... ]

and A V_j = V_j T_j + β_j q_{j+1} e_jᵀ still holds, so the residual of a Ritz pair of T_j is |β_j s_{j,i}|, the
certificate of `curvax.lanczos` (Parlett 1998, Thm 13.1.1), with the same rounding floor and the measured norm of
the Ritz vector (`curvax.ritz.certified_bounds`). The floor takes √N with N the products of the whole run: the kept
Ritz vectors carry the rounding of every cycle before. Every new vector is orthogonalized against all stored ones
(full reorthogonalization, `curvax.orthogonality.cgs_reorthogonalize`): the kept Ritz vectors are not in a
three-term recurrence, so nothing else keeps the basis orthogonal.

One jitted program: a single `lax.while_loop` over products with fixed shapes ([m + 1, n] basis, [m, m] projected
matrix); a restart is a `lax.cond` inside it, so neither `num_steps` nor the number of restarts changes the program.
"""

import jax
import jax.numpy as jnp
import numpy as np

from curvax.lanczos import LanczosResult
from curvax.lanczos_options import sharding_constraints
from curvax.operators import report
from curvax.orthogonality import cgs_reorthogonalize, gram_deviation
from curvax.ritz import certified_bounds, default_matvec_rtol, gap_refined_bounds, ritz_converged

RESTART_POLICY = (
    "thick restart (Wu & Simon 2000): the kept Ritz vectors and the residual vector start the next cycle; "
    "values, bounds and vectors are those of the final cycle's projected matrix"
)


# The static options of `restarted_core` besides max_vectors, keep and largest (`curvax.spectrum` forwards them).
RESTART_STATIC = (
    "num_steps",
    "reorth_passes",
    "breakdown_tol",
    "return_basis",
    "stop",
    "callback_every",
    "basis_sharding",
    "matvec_rtol",
)


def check_max_vectors(max_vectors, k: int, num_steps: int, n: int, reorthogonalize: str):
  """Validate `max_vectors` before any compute: None, or an int with k + 2 ≤ max_vectors ≤ n (a cycle keeps k Ritz
  vectors and adds at least two), with full reorthogonalization. Returns the stored vectors of a restarted run, or
  None when no restart can happen (None, or max_vectors ≥ num_steps: plain Lanczos stores no more than that)."""
  if max_vectors is None:
    return None
  if isinstance(max_vectors, bool) or not isinstance(max_vectors, (int, np.integer)) or not k + 2 <= max_vectors <= n:
    raise ValueError(
        f"max_vectors={max_vectors!r} is not valid for k={k}, n={n}; valid: None (no restart) or an int in "
        f"[k + 2, n] = [{k + 2}, {n}] (a restart keeps the k wanted Ritz vectors and adds at least two)"
    )
  if max_vectors >= num_steps:
    return None
  if reorthogonalize != "full":
    raise ValueError(
        f"max_vectors={max_vectors} (thick restart) needs reorthogonalize='full', got {reorthogonalize!r}: the kept "
        "Ritz vectors are not in a three-term recurrence, so only full reorthogonalization keeps the basis orthogonal"
    )
  return int(max_vectors)


def kept_vectors(k: int, max_vectors: int) -> int:
  """Ritz vectors a restart keeps: halfway between the k wanted and the m stored, so a cycle adds at least two new
  Lanczos vectors (m ≥ k + 2) and keeps the unwanted neighbours that speed up the wanted ones' convergence."""
  return max(k, min(max_vectors - 2, (max_vectors + k) // 2))


def projected_eigh(t_mxm, k, beta):
  """Eigen-decomposition of the leading k×k block of the symmetric [m, m] projected matrix (k traced), with the
  residuals |β s_{k,i}|; the padding is decoupled above a Gershgorin bound as in `curvax.ritz.tridiagonal_eigh`, so
  the first k eigenvalues (ascending) are T_k's. Returns (θ, residuals, s_{1,i}, valid, S) like it."""
  m = t_mxm.shape[0]
  valid = jnp.arange(m) < k
  block = valid[:, None] & valid[None, :]
  t = jnp.where(block, t_mxm, 0.0)
  gersh = jnp.max(jnp.sum(jnp.abs(t), axis=1))
  theta, s_mxm = jnp.linalg.eigh(t + jnp.diag(jnp.where(valid, 0.0, 2.0 * gersh + 1.0)))
  s_mxm = jnp.where(block, s_mxm, 0.0)
  residuals = jnp.abs(beta * s_mxm[k - 1, :])
  return jnp.where(valid, theta, 0.0), jnp.where(valid, residuals, 0.0), s_mxm[0, :], valid, s_mxm


def _changed(t_mxm, k, beta, stop):
  """Bound "change" (`curvax.spectrum`): the `count` most extreme Ritz values of the k block moved by ≤ rel_tol
  relative to those of the leading k − 1 block, i.e. since the previous product (no floor: nothing certified)."""
  largest, count, rel_tol, _ = stop
  theta = projected_eigh(t_mxm, k, beta)[0]
  previous = projected_eigh(t_mxm, k - 1, beta)[0]
  order = jnp.arange(count)
  last = t_mxm.shape[0] - 1
  idx = jnp.clip(k - 1 - order if largest else order, 0, last)
  prev = previous[jnp.clip(k - 2 - order if largest else order, 0, last)]
  return (k > count) & jnp.all(jnp.abs(theta[idx] - prev) <= rel_tol * jnp.abs(theta[idx]))


def restarted_core(
    op,
    v0_flat,
    *,
    num_steps,
    max_vectors,
    keep,
    largest,
    reorth_passes="auto",
    breakdown_tol=None,
    return_basis=False,
    stop=None,
    callback_id=None,
    callback_every=10,
    basis_sharding=None,
    matvec_rtol=None,
) -> LanczosResult:
  """Thick-restart Lanczos on a flat operator, traceable (the module docstring has the method and its certificate).

  Returns a `LanczosResult` of the final cycle: `num_steps_taken` is the products of the whole run (≤ num_steps),
  `ritz_mask` marks the final cycle's valid Ritz values (≤ max_vectors), `alphas` / `betas` are the projected
  matrix's diagonal and super-diagonal (betas[k − 1] the final β; the arrow is in the eigen-decomposition),
  `first_components` are relative to the cycle's first vector (no quadrature weights), `basis` is the final
  cycle's [max_vectors + 1, n] basis if `return_basis`, so `curvax.ritz.ritz_vectors` gives its Ritz vectors.
  """
  n, dtype = v0_flat.shape[0], v0_flat.dtype
  m, l, total = int(max_vectors), int(keep), int(num_steps)
  eps = float(jnp.finfo(dtype).eps)
  tol = float(np.sqrt(eps)) if breakdown_tol is None else float(breakdown_tol)
  rtol = default_matvec_rtol(n, dtype) if matvec_rtol is None else float(matvec_rtol)
  on_vec, on_basis = sharding_constraints(basis_sharding)
  norm0 = jnp.linalg.norm(v0_flat)
  q0 = on_vec(v0_flat / jnp.where(norm0 > 0, norm0, 1.0))
  state = dict(
      products=jnp.int32(0),
      j=jnp.int32(0),  # the row of the vector multiplied next
      start=jnp.int32(0),  # the cycle's first Lanczos row: 0, then l after every restart
      basis=on_basis(jnp.zeros((m + 1, n), dtype).at[0].set(q0)),
      t=jnp.zeros((m, m), dtype),
      beta=jnp.zeros((), dtype),
      anorm=jnp.zeros((), dtype),
      active=jnp.bool_(True),
      breakdown_step=jnp.int32(-1),
      converged=jnp.bool_(False),
  )
  rows = jnp.arange(m)

  def restart(s):
    """Keep the l wanted Ritz vectors as rows 0..l−1 and the residual vector q_{m+1} as row l (Wu & Simon, §2)."""
    theta, _, _, _, s_mxm = projected_eigh(s["t"], m, s["beta"])
    cols = slice(m - l, m) if largest else slice(0, l)
    kept_mxl = s_mxm[:, cols]
    # Rows 0..l: the kept Ritz vectors V s_i and q_{m+1} (column e_m) by one product over the whole buffer, written
    # by one update: with two updates (or a sliced operand) XLA:CPU's buffer assignment holds a second copy of the
    # basis. The only extra buffer: l + 1 rows of n.
    new_rxl = jnp.zeros((m + 1, l + 1), dtype).at[:m, :l].set(kept_mxl).at[m, l].set(1.0)
    y_lxn = new_rxl.T @ s["basis"]
    basis = s["basis"].at[: l + 1].set(y_lxn)
    coupling = s["beta"] * kept_mxl[m - 1]
    t = jnp.zeros((m, m), dtype).at[rows[:l], rows[:l]].set(theta[cols])
    t = t.at[:l, l].set(coupling).at[l, :l].set(coupling)
    return dict(s, basis=on_basis(basis), t=t, j=jnp.int32(l), start=jnp.int32(l))

  def step(s):
    j, basis = s["j"], s["basis"]
    q = jax.lax.dynamic_index_in_dim(basis, j, keepdims=False)
    w = on_vec(op.flat_matvec(q).astype(dtype))
    anorm = jnp.maximum(s["anorm"], jnp.linalg.norm(w))
    # The known couplings T[:j, j]: the arrow c at the cycle's first row after a restart, else β_{j−1} q_{j−1}.
    coupling = jnp.where((rows < j) & ((j == s["start"]) | (rows == j - 1)), s["t"][:, jnp.minimum(j, m - 1)], 0.0)
    w = w - jnp.pad(coupling, (0, 1)) @ basis
    alpha = jnp.vdot(q, w)
    w, beta = cgs_reorthogonalize(basis, w - alpha * q, j, reorth_passes)
    broke = beta <= tol * anorm
    q_next = jnp.where(broke, 0.0, w / jnp.where(broke, 1.0, beta))
    t = s["t"].at[j, j].set(alpha).at[j, j + 1].set(beta, mode="drop").at[j + 1, j].set(beta, mode="drop")
    products = s["products"] + 1
    if stop is not None and stop[3] == "change":
      converged = _changed(t, j + 1, beta, stop) & ~broke
    elif stop is not None:  # on the bounds the run would report at this step, the floor with the run's products
      theta, residuals, _, valid, s_mxm = projected_eigh(t, j + 1, beta)
      gram = lambda: gram_deviation(basis, j + 1)
      converged = ritz_converged(stop, theta, residuals, valid, s_mxm, j + 1, anorm, rtol, products=products, gram=gram)
      converged = converged & ~broke
    else:
      converged = jnp.bool_(False)
    out = dict(
        s,
        products=products,
        j=j + 1,
        basis=on_basis(basis.at[j + 1].set(q_next)),
        t=t,
        beta=beta,
        anorm=anorm,
        active=~broke & ~converged,
        breakdown_step=jnp.where(broke, s["products"], s["breakdown_step"]),
        converged=converged,
    )
    if callback_id is not None:
      due = (products % callback_every == 0) | (products == total) | ~out["active"]
      jax.lax.cond(due, lambda: report(callback_id, products, total), lambda: None)
    return out

  running = lambda s: (s["products"] < total) & s["active"]
  cycle = lambda s: jax.lax.while_loop(lambda s: running(s) & (s["j"] < m), step, s)
  # The first cycle, then restart-and-cycle while products are left: a restart sits in a loop body of its own, not
  # in a lax.cond, which would hold a second copy of the basis (measured by XLA's buffer assignment).
  s = jax.lax.while_loop(running, lambda s: cycle(restart(s)), cycle(state))
  k = s["j"]  # valid rows of the final cycle
  theta, residuals, first, mask, s_mxm = projected_eigh(s["t"], k, s["beta"])
  gram_dev = gram_deviation(s["basis"], k)
  certify = lambda r: certified_bounds(r, theta, mask, s["products"], s["anorm"], rtol, gram_dev=gram_dev, s_mxm=s_mxm)
  betas = jnp.concatenate([jnp.diagonal(s["t"], 1), jnp.zeros((1,), dtype)])
  return LanczosResult(
      alphas=jnp.where(mask, jnp.diagonal(s["t"]), 0.0),
      betas=jnp.where(rows < k - 1, betas, 0.0).at[k - 1].set(s["beta"]),
      num_steps_taken=s["products"],
      ritz_values=theta,
      ritz_bounds=certify(residuals),
      residual_norms=residuals,
      gap_bounds=certify(gap_refined_bounds(theta, residuals, mask)),
      norm_estimate=s["anorm"],
      first_components=first,
      ritz_mask=mask,
      eigenvectors=s_mxm,
      orthogonality_loss=jnp.max(jnp.abs(gram_dev)),
      breakdown=s["breakdown_step"] >= 0,
      breakdown_step=s["breakdown_step"],
      num_reorthogonalizations=s["products"],
      converged=s["converged"],
      basis=s["basis"] if return_basis else None,
      reorthogonalize="full",
      orthogonality=f"measured: max|V^T V - I| over the final cycle's vectors (at most {m} stored)",
      breakdown_policy=RESTART_POLICY,
  )
