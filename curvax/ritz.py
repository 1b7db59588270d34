"""Ritz pairs of the Lanczos tridiagonal T_k: values, error bounds, vectors, and the convergence test.

Contract: pure, traceable array functions of the fixed-size [m] `alphas` / `betas` of `curvax.lanczos` with the
number k ≤ m of completed steps traced, so one program serves every k: `tridiagonal_eigh` gives the eigen-decomposition
of the leading k×k block T_k (Ritz values θ_i, residual bounds, first components s_{1,i} for Gauss quadrature),
`gap_refined_bounds` its gap-theorem bounds, `ritz_converged` the `stop` test of `curvax.lanczos.lanczos`, and
`ritz_vectors` the Ritz vectors of a result that kept its basis. No project imports: only jax.

Two error bounds per Ritz value θ_i with residual r_i = |β_k s_{k,i}|:
  * `ritz_bounds` = `certified_bounds`: r_i is the exact-arithmetic bound (Parlett 1998, Thm 13.1.1: some eigenvalue
    of A lies in [θ_i − r_i, θ_i + r_i] if Q_k is orthonormal and A Q_k = Q_k T_k + β_k q_{k+1} e_kᵀ exactly). In
    floating point neither holds, and r_i can fall far below what the arithmetic can resolve (1e-40 after k = n
    steps). The certified bound adds what rounding and the measured loss of orthogonality allow (see
    `certified_bounds`), so it never falls below ≈ √k·ε_1·‖A‖.
  * `gap_bounds` = min(r_i, r_i²/gap_i), the gap theorem (Parlett 1998, Thm 11.7.1: if λ is the only eigenvalue
    near θ and every other eigenvalue is at least `gap` away from θ, then |λ − θ| ≤ r²/gap), with gap_i estimated
    from the other Ritz values as min_{j≠i} (|θ_i − θ_j| − r_j), and used only where gap_i > r_i (otherwise r_i).
    This is the refinement PROPACK applies to its Lanczos bounds (Larsen 1998, `refinebounds`). It is an
    estimate, not a proof: the gap is measured on Ritz values, and an eigenvalue the Krylov space has not yet seen
    could sit inside it. Once a Ritz value has converged its residual decays like r² / gap, so this bound reaches
    a given tolerance in fewer steps than the residual bound (measured by `bench/hessian.py`).
"""

import jax
import jax.numpy as jnp
import numpy as np


def tridiagonal_eigh(alphas, betas, k):
  """Eigen-decomposition of the leading k×k block of T with fixed [m] shapes (k traced).

  The trailing diagonal is set to c = 2·G + 1 (G a Gershgorin bound of T_k) and decoupled, so the k smallest
  eigenvalues of the padded matrix are exactly those of T_k and their eigenvectors live on the first k rows.
  """
  m = alphas.shape[0]
  idx = jnp.arange(m)
  valid = idx < k
  a = jnp.where(valid, alphas, 0.0)
  off = jnp.where(idx[:-1] < k - 1, betas[:-1], 0.0)
  off_abs = jnp.abs(off)
  gersh = jnp.max(jnp.abs(a) + jnp.pad(off_abs, (1, 0)) + jnp.pad(off_abs, (0, 1)))
  diag = jnp.where(valid, a, 2.0 * gersh + 1.0)
  t_mxm = jnp.diag(diag) + jnp.diag(off, 1) + jnp.diag(off, -1)
  theta, s_mxm = jnp.linalg.eigh(t_mxm)
  s_mxm = jnp.where(valid[:, None] & valid[None, :], s_mxm, 0.0)
  beta_k = betas[k - 1]
  bounds = jnp.abs(beta_k * s_mxm[k - 1, :])
  return (jnp.where(valid, theta, 0.0), jnp.where(valid, bounds, 0.0), s_mxm[0, :], valid, s_mxm)


def certified_bounds(residuals, theta, valid, k, norm_estimate, matvec_rtol, gram_dev=None, omega=None, s_mxm=None):
  """Residual bounds that hold in floating point: an eigenvalue of A lies within the returned distance of θ_i.

  Paige's analysis of the computed Lanczos quantities (Paige 1976, 1980; Parlett 1998, §13.4) gives
  A Q_k = Q_k T_k + β_k q_{k+1} e_kᵀ + F_k with every column ‖f_j‖ ≤ ε_1‖A‖, ε_1 = `matvec_rtol` + 4ε: the
  matvec's own relative rounding error plus the recurrence's inner product and three axpys (first-order counts).
  With full or partial reorthogonalization the basis is (semi-)orthogonal, and T_k is then the projection of A on an
  orthonormal basis of the Krylov space to O(ε‖A‖) (Simon 1984, Thm. 4), so the corrections of the CGS passes are
  not added to F_k. For the Ritz vector y_i = Q_k s_i:
      ‖A y_i − θ_i y_i‖ ≤ r_i + ‖F_k s_i‖ ≤ r_i + √k·ε_1·‖A‖,   ‖y_i‖² = s_iᵀ(Q_kᵀQ_k)s_i = 1 + δ_i,
  and for any vector y ≠ 0 and any scalar θ some eigenvalue λ of the symmetric A has |λ − θ| ≤ ‖Ay − θy‖/‖y‖
  (Parlett 1998, Thm 4.5.1). Hence the certificate (r_i + √k·ε_1·‖A‖)/√(1 + δ_i), with δ_i = s_iᵀ(Q_kᵀQ_k − I)s_i
  measured from the Gram matrix of the stored basis (`gram_dev`), or, without a basis, bounded by −δ_i ≤ k·ω from
  the orthogonality estimate ω. Where ‖y_i‖ has no positive lower bound (k·ω ≥ 1: orthogonality is lost; or a
  zero start vector) nothing is certified and the bound is the dtype's largest finite number.
  ‖A‖ is estimated by max(max_j ‖A q_j‖, max_i |θ_i|), a lower bound of ‖A‖ that reaches it as the extreme Ritz
  values converge. Invalid entries: 0.

  Args:
    residuals: [m] r_i = |β_k s_{k,i}|.
    theta: [m] Ritz values; valid: [m] mask; k: steps taken (traced).
    norm_estimate: max_j ‖A q_j‖ of the run.
    matvec_rtol: the matvec's relative rounding error (static float).
    gram_dev: [rows, rows] Q_kᵀQ_k − I over the valid rows (zero elsewhere), or None.
    omega: scalar orthogonality-loss estimate when `gram_dev` is None.
    s_mxm: [m, m] eigenvectors of T_k (needed with `gram_dev`).

  Returns:
    [m] certified bounds.
  """
  dtype = residuals.dtype
  eps = float(jnp.finfo(dtype).eps)
  kf = jnp.asarray(k, dtype)
  anorm = jnp.maximum(norm_estimate, jnp.max(jnp.where(valid, jnp.abs(theta), 0.0)))
  floor = jnp.sqrt(kf) * (matvec_rtol + 4.0 * eps) * anorm
  if gram_dev is not None:
    m = s_mxm.shape[0]
    g = gram_dev[:m, :m]
    delta = jnp.einsum("ji,jl,li->i", s_mxm, g, s_mxm)
    norm_sq = 1.0 + delta
  else:
    norm_sq = 1.0 - kf * omega * jnp.ones_like(residuals)
  nothing = jnp.finfo(dtype).max  # finite, so records stay strict JSON, and larger than any meaningful bound
  bound = jnp.where(norm_sq > 0, (residuals + floor) / jnp.sqrt(jnp.where(norm_sq > 0, norm_sq, 1.0)), nothing)
  return jnp.where(valid, bound, 0.0)


def default_matvec_rtol(n: int, dtype) -> float:
  """√n·ε: the typical relative error of an n-term inner product (Higham & Mary 2019, probabilistic rounding error
  analysis), the default model of one matvec's rounding; pass `matvec_rtol` for an operator known to be worse."""
  return float(np.sqrt(n) * np.finfo(dtype).eps)


def gap_refined_bounds(theta, bounds, valid):
  """min(r_i, r_i²/gap_i) with gap_i = min_{j≠i valid} (|θ_i − θ_j| − r_j), where gap_i > r_i; else r_i (Parlett
  1998, Thm 11.7.1, with the gap estimated from the Ritz values as in Larsen's PROPACK). Invalid entries: 0."""
  m = theta.shape[0]
  others = valid[None, :] & valid[:, None] & ~jnp.eye(m, dtype=bool)
  dist = jnp.abs(theta[:, None] - theta[None, :]) - bounds[None, :]
  gap = jnp.min(jnp.where(others, dist, jnp.inf), axis=1)
  refine = jnp.isfinite(gap) & (gap > bounds)
  refined = jnp.where(refine, jnp.minimum(bounds, bounds**2 / jnp.where(refine, gap, 1.0)), bounds)
  return jnp.where(valid, refined, 0.0)


def ritz_converged(
    stop, theta, residuals, valid, s_mxm, k, norm_estimate, matvec_rtol, *, products=None, gram=None, omega=None
):
  """True when the `stop = (largest, count, rel_tol, bound)` most extreme of the k Ritz values have their reported
  bound ≤ rel_tol·|θ_i|: `certified_bounds` of the residuals ("residual") or of their gap refinement ("gap"), as
  the run would report them had it ended here, so a run that stops reports bounds within its tolerance.

  `products` (default k) is the matvec count of the rounding floor; the norm of the Ritz vector comes from `omega`
  (no basis) or from `gram()`, the measured Q_kᵀQ_k − I: a thunk, since the Gram costs O(m²n), evaluated (in a
  `lax.cond`) only at steps where the bounds of an orthonormal basis (‖y_i‖ = 1) already pass: where the measured
  ‖y_i‖ exceeds 1 a run may stop a step later than its certified bound alone allows, never earlier.
  """
  largest, count, rel_tol, kind = stop
  r = gap_refined_bounds(theta, residuals, valid) if kind == "gap" else residuals
  order = jnp.arange(count)
  idx = jnp.clip(k - 1 - order if largest else order, 0, theta.shape[0] - 1)
  steps = k if products is None else products

  def within(**orthogonality):
    bounds = certified_bounds(r, theta, valid, steps, norm_estimate, matvec_rtol, s_mxm=s_mxm, **orthogonality)
    return (k >= count) & jnp.all(bounds[idx] <= rel_tol * jnp.abs(theta[idx]))

  if gram is None:
    return within(omega=omega)
  return jax.lax.cond(within(omega=0.0), lambda: within(gram_dev=gram()), lambda: jnp.bool_(False))


def ritz_vectors(result) -> jax.Array:
  """Ritz vectors y_i = V_k s_i as rows of a flat [m, n] array (zero rows beyond k; unravel to get pytrees).

  `result`: an `curvax.lanczos.LanczosResult` of a run with `return_basis=True`. With full reorthogonalization
  A y_i = θ_i y_i + β_k s_{k,i} q_k, so ‖A y_i − θ_i y_i‖ = ritz_bounds[i].
  """
  if result.basis is None:
    raise ValueError("ritz_vectors needs the basis: call lanczos(..., return_basis=True)")
  m = result.eigenvectors.shape[-1]
  return jnp.einsum("...jn,...ji->...in", result.basis[..., :m, :], result.eigenvectors)
