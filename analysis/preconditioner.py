"""Adam's preconditioner as a flat diagonal scale, and the curvature operator it preconditions.

Contract: the scales are flat [n] vectors in `jax.flatten_util.ravel_pytree` order, from the step-0 gradient
(`adam_preconditioner_scale`: P = diag(|g| + ε), Adam's preconditioner after its first update, Kingma & Ba 2015,
Alg. 1) or from Adam's state at any step t ≥ 1 (`adam_state_preconditioner_scale`: P_t = diag(√v̂_t + ε)), and
per-layer lr multipliers m give √m (`lr_multiplier_scale`). `adam_preconditioned_operator(op, g, eps)` is
v ↦ P^{-1/2} H P^{-1/2} v (with multipliers, M^{1/2}P^{-1/2}HP^{-1/2}M^{1/2}: Noci et al. 2024's learning-rate-scaled
preconditioned sharpness), symmetric and similar to P⁻¹H, so symmetric Lanczos applies; it is
`curvax.diagonal_preconditioned(op, d)`, a pytree that compiles once per structure. Bad β₂, ε or multipliers raise
ValueError naming the value. The stability bounds that read these operators: analysis/stability.py.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import curvax


def check_eps(eps) -> None:
  if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0:
    raise ValueError(f"eps={eps!r} must be a number >= 0 (Adam's ε, optim.eps)")


@jax.jit
def _inverse_sqrt_preconditioner(g, eps):
  return jax.lax.rsqrt(jnp.abs(g) + eps.astype(g.dtype))


def adam_preconditioner_scale(grads: Any, eps: float, dtype=None) -> jax.Array:
  """The flat vector (|g| + ε)^{-1/2} = diag(P)^{-1/2} of Adam's preconditioner after its first update.

  Adam's (bias-corrected) second moment after one update is v̂₁ = g² whatever β₂, and its update divides by
  √v̂₁ + ε with ε outside the root (optax `scale_by_adam`, eps_root = 0), so P = diag(|g| + ε).

  Args:
    grads: the gradient g at step 0, a pytree like the parameters (or a flat [n] vector).
    eps: Adam's ε (the run's `optim.eps`); with ε = 0 a zero gradient entry gives an infinite scale.
    dtype: the vector's dtype (default: the gradient's).

  Returns:
    [n] in `jax.flatten_util.ravel_pytree` order.
  """
  check_eps(eps)
  dtype = curvax.FlatSpec.of(grads).dtype if dtype is None else jnp.dtype(dtype)
  return _inverse_sqrt_preconditioner(curvax.ravel_leaves(grads, dtype), jnp.asarray(eps, dtype))


def lr_multiplier_scale(lr_multipliers: Any, params: Any, dtype=None) -> jax.Array:
  """√m per coordinate, [n] in `jax.flatten_util.ravel_pytree` order: the M^{1/2} of M^{1/2}P^{-1/2}HP^{-1/2}M^{1/2}
  (module docstring). `lr_multipliers` is a pytree of numbers ≥ 0 with the structure of `params` (one per leaf,
  `models.lr_multipliers`); ValueError on another structure or a negative or non-finite entry."""
  if jax.tree.structure(lr_multipliers) != jax.tree.structure(params):
    raise ValueError(
        f"lr_multipliers must have the structure of the params; got {jax.tree.structure(lr_multipliers)} for "
        f"{jax.tree.structure(params)}"
    )
  values = [float(m) for m in jax.tree.leaves(lr_multipliers)]
  if not all(math.isfinite(m) and m >= 0 for m in values):
    raise ValueError(f"lr_multipliers must be finite numbers >= 0; got {sorted(set(values))}")
  dtype = curvax.FlatSpec.of(params).dtype if dtype is None else jnp.dtype(dtype)
  return jnp.concatenate(
      [jnp.full((x.size,), math.sqrt(m), dtype) for m, x in zip(values, jax.tree.leaves(params), strict=True)]
  )


def check_beta2_eps(beta2, eps) -> None:
  """ValueError unless 0 ≤ β₂ < 1 and ε ≥ 0 (Adam's `optim.b2`, `optim.eps`)."""
  check_eps(eps)
  if isinstance(beta2, bool) or not isinstance(beta2, (int, float, np.floating)) or not 0 <= beta2 < 1:
    raise ValueError(f"beta2={beta2!r} must be a number in [0, 1) (Adam's β₂, optim.b2)")


@jax.jit
def _adam_state_scale(nu, count, beta2, eps):
  correction = 1 - beta2.astype(nu.dtype) ** count.astype(nu.dtype)
  return jax.lax.rsqrt(jnp.sqrt(nu / correction) + eps.astype(nu.dtype))


def adam_state_preconditioner_scale(nu: Any, count, beta2: float, eps: float, dtype=None) -> jax.Array:
  """The flat vector (√v̂_t + ε)^{-1/2} = diag(P_t)^{-1/2} of Adam's preconditioner at any step t ≥ 1.

  P_t = diag(√v̂_t + ε) with v̂_t = ν_t/(1 − β₂ᵗ), ν_t the second-moment EMA after t updates (optax
  `ScaleByAdamState.nu`, `count` = t): the denominator of Adam's t-th update (Kingma & Ba 2015, Alg. 1; ε outside
  the root, optax `scale_by_adam` with eps_root = 0). At t = 1 it is `adam_preconditioner_scale`'s |g| + ε.

  Args:
    nu: ν_t, a pytree like the parameters.
    count: t, the number of updates applied (≥ 1; at t = 0 there is no second moment yet).
    beta2, eps: Adam's β₂ and ε (the run's `optim.b2`, `optim.eps`).
    dtype: the vector's dtype (default: ν's).

  Returns:
    [n] in `jax.flatten_util.ravel_pytree` order.
  """
  check_beta2_eps(beta2, eps)
  if int(count) < 1:
    raise ValueError(f"count={int(count)}: Adam's preconditioner exists after its first update (count >= 1)")
  dtype = curvax.FlatSpec.of(nu).dtype if dtype is None else jnp.dtype(dtype)
  return _adam_state_scale(
      curvax.ravel_leaves(nu, dtype), jnp.asarray(count, jnp.int32), jnp.asarray(beta2, dtype), jnp.asarray(eps, dtype)
  )


def adam_preconditioned_operator(
    operator: curvax.LinearOperator, grads: Any, eps: float, lr_multipliers: Any = None
) -> curvax.PreconditionedOperator:
  """P^{-1/2} H P^{-1/2} for Adam's step-1 preconditioner P = diag(√v̂₁ + ε) = diag(|g| + ε); with `lr_multipliers`
  m (a pytree like `grads`), M^{1/2}P^{-1/2}HP^{-1/2}M^{1/2} (module docstring).

  Same eigenvalues as P⁻¹H (similar matrices), symmetric, so `top_eigenvalues` (Lanczos) gives λ_max(P⁻¹H), the
  preconditioned sharpness of Cohen et al. 2022.

  Args:
    operator: a `LinearOperator` on pytrees shaped like the parameters (`analysis.hessian.hvp_fn`, `ggn_vp_fn`).
    grads: the gradient at step 0, shaped like the parameters (`mean_gradient`).
    eps: Adam's ε (the run's `optim.eps`).

  Returns:
    A `curvax.PreconditionedOperator` on the same pytrees as `operator`.
  """
  if not isinstance(operator, curvax.LinearOperator):
    raise ValueError(f"operator must be a LinearOperator (analysis.hessian.hvp_fn), got {type(operator).__name__}")
  size = curvax.FlatSpec.of(grads).size
  if size != operator.size:
    raise ValueError(f"grads has {size} entries but the operator acts on vectors of {operator.size}")
  scale = adam_preconditioner_scale(grads, eps, operator.dtype)
  if lr_multipliers is not None:
    scale = scale * lr_multiplier_scale(lr_multipliers, grads, operator.dtype)
  return curvax.diagonal_preconditioned(operator, scale)
