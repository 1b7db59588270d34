"""Step-0 stability predictors: the largest learning rates a quadratic model of the loss at init allows.

Contract: the predictors take the curvature operators of `analysis.hessian` (operators are data, `curvax`) and the
gradient at step 0, and return numbers; nothing here trains. On the quadratic model
L(θ) ≈ L(θ₀) + gᵀ(θ − θ₀) + ½(θ − θ₀)ᵀH(θ − θ₀) around the init θ₀ (docs/science.md §9 derives each bound):

  * `max_stable_lr_gd(λ)` = 2/λ_max(H): gradient descent diverges iff η > 2/λ_max (Cohen et al. 2021, the "edge of
    stability" 2/η).
  * `max_stable_lr_adam(λ_P, β₁)` = (2 + 2β₁)/((1 − β₁)·λ_max(P⁻¹H)), 38/λ at β₁ = 0.9: Adam with a frozen
    preconditioner P is EMA-momentum gradient descent on P⁻¹H, stable iff both roots of z² − (1 + β₁ − a)z + β₁,
    a = ηλ(1 − β₁), lie inside the unit circle (Jury's criterion; Cohen et al. 2022, "Adaptive gradient methods at
    the edge of stability").
  * `adam_preconditioned_operator(op, g, eps)`: v ↦ P^{-1/2} H P^{-1/2} v with P = diag(|g| + ε), Adam's
    preconditioner after its first update (Kingma & Ba 2015, Alg. 1), symmetric and similar to P⁻¹H, so symmetric
    Lanczos applies; it is `curvax.diagonal_preconditioned(op, d)`, a pytree that compiles once per structure.
  * `update_sharpness(op, u)` = uᵀHu/‖u‖², one HVP along Adam's first update u = `adam_first_update(g, η, eps)`
    (Kalra et al. 2026, "A scalable measure of loss landscape curvature", arXiv:2601.16979).
  * `first_step_critical_lr(gᵀd, dᵀHd)` = 2·gᵀd/(dᵀHd): a first step along d larger than this raises the quadratic
    model's loss (cf. Kalra et al. 2026's critical learning rate).
With per-layer lr multipliers m (µP's, `lr_multipliers=`; `lr_multiplier_scale` gives √m) the bounds read on
λ_max(M·P⁻¹H), M = diag(m): the learning-rate-scaled preconditioned sharpness of Noci et al. 2024. Assumed: no
gradient clipping, and the preconditioner frozen at its step-1 value (Cohen et al. 2022's "frozen Adam"), so the
bounds predict the first steps' stability, not the whole run's.
"""

import math
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import curvax
from analysis import hessian
from analysis.preconditioner import adam_preconditioned_operator, check_eps
from configs.schema import invalid


def _check_curvature(name: str, value) -> float:
  value = float(value)
  if math.isnan(value):
    raise ValueError(f"{name}={value!r} must be a number (the top eigenvalue), not NaN")
  return value


def max_stable_lr_gd(lambda_max) -> float:
  """2/λ_max: gradient descent on ½θᵀHθ diverges iff η > 2/λ_max(H) (Cohen et al. 2021).

  Args:
    lambda_max: the largest eigenvalue of the Hessian H.

  Returns:
    2/λ_max, or inf when λ_max ≤ 0 (no positive curvature bounds the step; negative curvature is unstable at any
    η, which this bound does not measure).
  """
  lam = _check_curvature("lambda_max", lambda_max)
  return 2.0 / lam if lam > 0 else math.inf


def momentum_stability_threshold(beta1: float) -> float:
  """(2 + 2β₁)/(1 − β₁): EMA-momentum gradient descent on a quadratic is stable iff η·λ_max below it
  (docs/science.md §9; 38 for β₁ = 0.9, 2 for β₁ = 0)."""
  if isinstance(beta1, bool) or not isinstance(beta1, (int, float, np.floating)) or not 0 <= beta1 < 1:
    raise ValueError(f"beta1={beta1!r} must be a number in [0, 1) (Adam's first-moment decay)")
  return (2.0 + 2.0 * beta1) / (1.0 - beta1)


def max_stable_lr_adam(lambda_max_preconditioned, beta1: float) -> float:
  """(2 + 2β₁)/((1 − β₁)·λ_max(P⁻¹H)): Adam's adaptive edge of stability (Cohen et al. 2022), 38/λ for β₁ = 0.9.

  From the stability region of EMA momentum on the quadratic with the frozen preconditioner P (docs/science.md §9):
  θ ← θ − ηP⁻¹m is momentum gradient descent on P⁻¹H.

  Args:
    lambda_max_preconditioned: λ_max(P⁻¹H) = λ_max(P^{-1/2}HP^{-1/2}) (`adam_preconditioned_operator`).
    beta1: Adam's β₁ in [0, 1).

  Returns:
    The largest stable η, or inf when λ_max ≤ 0.
  """
  lam = _check_curvature("lambda_max_preconditioned", lambda_max_preconditioned)
  threshold = momentum_stability_threshold(beta1)
  return threshold / lam if lam > 0 else math.inf


EPS_PROBE = 1e-8  # ε' = EPS_PROBE·RMS(g): the second ε of step0_predictors' λ_max(P⁻¹H) and update λ₀ (issue 28)
EPS_FACTOR = 2.0  # ε decides such a λ when its two readings differ by more than this factor


def eps_decides(lam: float, lam_alt: float, factor: float = EPS_FACTOR) -> bool:
  """Whether Adam's ε decides the preconditioned λ_max: its readings at two ε differ by more than `factor` (or one
  is not positive). Such a predictor says what ε is, not what the model is: it is flagged, not scored."""
  if lam <= 0 or lam_alt <= 0:
    return True
  return max(lam, lam_alt) / min(lam, lam_alt) > factor


@jax.jit
def _adam_update(grads, learning_rate, eps):
  return jax.tree.map(lambda g: -learning_rate.astype(g.dtype) * g / (jnp.abs(g) + eps.astype(g.dtype)), grads)


def adam_first_update(grads: Any, learning_rate: float, eps: float) -> Any:
  """Adam's first update u = −η·m̂₁/(√v̂₁ + ε) = −η·g/(|g| + ε) (bias-corrected m̂₁ = g, v̂₁ = g²; Kingma & Ba
  2015, Alg. 1), as a pytree like `grads`; equals `optax.adam(η, b1, b2, eps)`'s first update for any β₁, β₂."""
  check_eps(eps)
  dtype = curvax.FlatSpec.of(grads).dtype
  return _adam_update(grads, jnp.asarray(learning_rate, dtype), jnp.asarray(eps, dtype))


def _directional(op, u):
  hu = op.flat_matvec(u)
  return jnp.vdot(u, hu), jnp.vdot(u, u)


_directional_program = jax.jit(_directional)


def directional_curvature(operator, u: Any) -> tuple:
  """(uᵀHu, uᵀu) with one product of `operator` (a jitted program compiled once per operator structure; a plain
  callable's in a fresh one, which no cache keeps)."""
  op = curvax.as_operator(operator, u)
  flat, u_flat = op.flat_operator(), curvax.ravel_leaves(u, op.dtype)
  if flat.cacheable:
    return _directional_program(flat, u_flat)
  return jax.jit(lambda x: _directional(flat, x))(u_flat)


def update_sharpness(operator, u: Any) -> jax.Array:
  """uᵀHu/‖u‖²: the curvature of the loss along the update direction u (Kalra et al. 2026), one HVP.

  Args:
    operator: H as a `LinearOperator` (`analysis.hessian.hvp_fn`) or a callable on pytrees shaped like `u`.
    u: the update (e.g. `adam_first_update`), a pytree; the ratio does not depend on its scale.

  Returns:
    A scalar (NaN for u = 0).
  """
  uhu, uu = directional_curvature(operator, u)
  return uhu / uu


def first_step_critical_lr(grad_dot_direction, direction_curvature) -> float:
  """2·gᵀd/(dᵀHd): on the quadratic model, the step θ ← θ − ηd lowers the loss iff η is below it (inf when
  dᵀHd ≤ 0: the model's loss falls for every η along d)."""
  gd, dhd = float(grad_dot_direction), float(direction_curvature)
  return 2.0 * gd / dhd if dhd > 0 else math.inf


@jax.jit
def _mean_gradient_program(loss_fn, params, batches, weights):
  grads = [jax.grad(loss_fn)(params, b) for b in batches]
  return jax.tree.map(lambda *gs: sum(w.astype(g.dtype) * g for w, g in zip(weights, gs)), *grads)


def mean_gradient(loss_fn: Callable, params: Any, batches: Any, *, weights: Optional[Sequence[float]] = None) -> Any:
  """∇L = Σ_b w_b ∇L_b, weighted as `analysis.hessian.hvp_fn` weights H (so g and H are of the same loss). One
  jitted program per model and shapes.

  Args:
    loss_fn, params: the loss and the point.
    batches: the project's batch dicts (one, or a list or tuple of them) when `weights` is None: then w_b = n_b/Σn_b,
      n_b the non-padding target tokens (`analysis.hessian.token_weights`). With `weights`, any batch pytree, as in
      `curvax.hessian`: a list is several batches, anything else one, and nothing is read from them.
    weights: per-batch weights (normalized to sum 1) replacing the token counts.
  """
  batches = hessian.as_batches(batches) if weights is None else curvax.as_batches(batches)
  w = curvax.normalized_weights(len(batches), hessian.token_weights(batches, weights))
  w = jnp.asarray(w, curvax.FlatSpec.of(params).dtype)
  return _mean_gradient_program(curvax.as_pytree_fn(loss_fn), params, tuple(batches), w)


def adam_constants(analysis_config, optim_config) -> dict:
  """The keyword arguments of `step0_predictors` from the analysis subtree and the run's `config.optim`, checked
  before any compute; {} when neither predictor is asked for (`analysis.preconditioned_top_k = 0`,
  `analysis.update_sharpness = False`).

  Raises:
    ValueError: a predictor is asked for but `optim_config` is None, or its `b1` / `eps` is out of range
      (`config.optim.<key>=<value> is invalid; valid: ...`).
  """
  top_k, sharpness = analysis_config.preconditioned_top_k, analysis_config.update_sharpness
  if not (top_k or sharpness):
    return {}
  if optim_config is None:
    raise ValueError(
        f"analysis.preconditioned_top_k={top_k} / analysis.update_sharpness={sharpness} need Adam's beta1 and eps: "
        "pass run_analysis(optim_config=config.optim), or turn both off"
    )
  b1, eps = optim_config["b1"], optim_config["eps"]
  if isinstance(b1, bool) or not isinstance(b1, (int, float)) or not 0 <= b1 < 1:
    raise invalid("optim.b1", b1, "a number in [0, 1) (Adam's beta1)")
  if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
    raise invalid("optim.eps", eps, "a number >= 0 (Adam's epsilon)")
  return dict(beta1=float(b1), eps=float(eps), preconditioned_top_k=top_k, with_update_sharpness=sharpness)


def step0_predictors(
    operator: curvax.LinearOperator,
    loss_fn: Callable,
    params: Any,
    batches: Sequence[dict],
    *,
    beta1: float,
    eps: float,
    preconditioned_top_k: int,
    with_update_sharpness: bool,
    num_steps: int,
    key: jax.Array,
    top: Optional[tuple] = None,
    lr_multipliers: Any = None,
    weights: Optional[Sequence[float]] = None,
    **lanczos_kwargs,
) -> dict:
  """The step-0 predictors of one model state, as a JSON-able record (`analysis.run` writes it to stability.json).

  Args:
    operator: the curvature operator H at `params` (`hvp_fn` or `ggn_vp_fn`).
    loss_fn, params, batches: the loss, the point and the batches H is of (the gradient is taken on the same).
    beta1, eps: Adam's β₁ and ε (the run's `optim.b1`, `optim.eps`).
    preconditioned_top_k: top eigenvalues of P^{-1/2}HP^{-1/2} (0: skip).
    with_update_sharpness: compute the sharpness along Adam's first update and the critical first step.
    num_steps: Lanczos steps for the eigenvalues.
    key: PRNG key of the Lanczos start vectors.
    top: (λ_max(H), its residual bound) when already computed; else one Lanczos run computes it.
    lr_multipliers: per-leaf learning-rate multipliers m (µP's; a pytree like `params`), or None (all 1): the
      preconditioned eigenvalues are then those of MP⁻¹H and Adam's first update is −η·M·g/(|g| + ε).
    weights: per-batch weights of the gradient, as given to `hvp_fn` (None: the batches' target tokens; given,
      the batches may be any pytrees: `mean_gradient`).
    **lanczos_kwargs: forwarded to `top_eigenvalues`.

  Returns:
    A dict of floats and lists: λ_max(H) with its bound and 2/λ_max, λ_max(P⁻¹H) with its bound and the Adam
    bound, the update sharpness and the critical first learning rate, each ε-dependent λ (λ_max(P⁻¹H), the
    update's dᵀHd/gᵀd) again at ε' = `EPS_PROBE`·RMS(g) with its flag, and the assumptions.
  """
  momentum_stability_threshold(beta1)
  check_eps(eps)
  k_hessian, k_preconditioned = jax.random.split(key)
  k = max(1, preconditioned_top_k)
  if top is None:
    # H as D H D with D = I: the same operator structure as the preconditioned run, so both share one compiled
    # Lanczos program (a Lanczos compile costs more than the products on small models).
    identity = curvax.diagonal_preconditioned(operator, jnp.ones((operator.size,), operator.dtype))
    e = curvax.top_eigenvalues(identity, k, num_steps=num_steps, key=k_hessian, **lanczos_kwargs)
    top = (float(e.values[0]), float(e.bounds[0]))
  lam, bound = float(top[0]), float(top[1])
  record = dict(
      beta1=float(beta1),
      eps=float(eps),
      momentum_threshold=momentum_stability_threshold(beta1),
      lambda_max=lam,
      lambda_max_bound=bound,
      max_stable_lr_gd=max_stable_lr_gd(lam),
      preconditioner="P = diag(|g| + eps): Adam's sqrt(v_hat_1) + eps after its first update (v_hat_1 = g^2)",
      assumptions="quadratic model at step 0; one learning rate for all parameters; no clipping; P frozen",
  )
  grads = mean_gradient(loss_fn, params, batches, weights=weights)
  g_flat = curvax.ravel_leaves(grads, operator.dtype)
  record["grad_norm"] = float(jnp.linalg.norm(g_flat))
  # ε' = EPS_PROBE·RMS(g), the second ε at which each ε-dependent λ is read (issue 28): ε relative to the gradient
  eps_alt = EPS_PROBE * float(jnp.sqrt(jnp.mean(g_flat**2)))
  scaled = lr_multipliers is not None and any(float(m) != 1.0 for m in jax.tree.leaves(lr_multipliers))
  if scaled:
    record["lr_multipliers"] = "in P: the eigenvalues are those of M P^-1 H, M = diag(the per-leaf lr multipliers)"
  if preconditioned_top_k:
    pre = adam_preconditioned_operator(operator, grads, eps, lr_multipliers if scaled else None)
    e = curvax.top_eigenvalues(pre, k, num_steps=num_steps, key=k_preconditioned, **lanczos_kwargs)
    record.update(
        preconditioned_values=e.values,
        preconditioned_bounds=e.bounds,
        preconditioned_separated=bool(e.separated),
        preconditioned_lambda_max=float(e.values[0]),
        preconditioned_lambda_max_bound=float(e.bounds[0]),
        max_stable_lr_adam=max_stable_lr_adam(float(e.values[0]), beta1),
    )
    # ε's influence (issue 28): the same λ at ε'. Where they differ by more than EPS_FACTOR, ε decides λ
    # (coordinates whose gradient is ~0 at init: P = ε there).
    if eps_alt > 0:
      alt = adam_preconditioned_operator(operator, grads, eps_alt, lr_multipliers if scaled else None)
      e_alt = curvax.top_eigenvalues(alt, k, num_steps=num_steps, key=k_preconditioned, **lanczos_kwargs)
      lam_alt = float(e_alt.values[0])
      record.update(
          eps_probe=eps_alt,
          preconditioned_lambda_max_at_eps_probe=lam_alt,
          eps_decides=eps_decides(float(e.values[0]), lam_alt),
      )
  if with_update_sharpness:

    def along_update(e):  # (dᵀHd, dᵀd, gᵀd) for Adam's first update at ε = e
      direction = adam_first_update(grads, -1.0, e)  # d = M·g/(|g| + ε); the update at η is −η·d
      if scaled:
        direction = jax.tree.map(lambda d, m: d * jnp.asarray(m, d.dtype), direction, lr_multipliers)
      dhd, dd = directional_curvature(operator, direction)
      return (
          dhd,
          dd,
          jnp.vdot(curvax.ravel_leaves(grads, operator.dtype), curvax.ravel_leaves(direction, operator.dtype)),
      )

    dhd, dd, gd = along_update(eps)
    record.update(
        update_sharpness=float(dhd / dd),
        update_norm_per_lr=float(jnp.sqrt(dd)),
        first_step_critical_lr=first_step_critical_lr(gd, dhd),
    )
    # ε's influence on the update predictor too: d = g/(|g| + ε) is ε's where |g| ≲ ε. Its λ₀ = 2/(critical first
    # step) = dᵀHd/gᵀd, read at ε' as λ_max(P⁻¹H) is, and flagged by the same factor, except that two non-positive
    # readings agree (below), where `eps_decides` would flag them.
    if eps_alt > 0:
      dhd_alt, _, gd_alt = along_update(eps_alt)
      lam, lam_alt = float(dhd / gd) if gd else 0.0, float(dhd_alt / gd_alt) if gd_alt else 0.0
      record.update(
          update_lambda=lam,
          update_lambda_at_eps_probe=lam_alt,
          # both ≤ 0 (dᵀHd ≤ 0 at either ε: every η is predicted stable) agree; one sign flip is ε's
          update_eps_decides=(lam > 0) != (lam_alt > 0) or (lam > 0 and eps_decides(lam, lam_alt)),
      )
  return record
