"""Batch sharpness: the curvature of each batch's loss along that batch's own gradient, averaged over batches.

    batch_sharpness(loss_fn, params, batches, *, weights=None) -> BatchSharpness

  S = Σ_b w_b · g_bᵀ H_b g_b / ‖g_b‖²,   g_b = ∇L_b(θ),  H_b = ∇²L_b(θ),

the expected Rayleigh quotient of the mini-batch Hessians along their own mini-batch gradients: the "Batch
Sharpness" of Andreyev & Beneventano 2024 ("Edge of Stochastic Stability: Revisiting the Edge of Stability for SGD",
arXiv:2412.20553), which mini-batch SGD at step size η holds at 2/η as full-batch gradient descent holds λ_max(H)
(Cohen et al. 2021). The ratio of the means, Σ_b w_b g_bᵀH_bg_b / Σ_b w_b ‖g_b‖², is returned beside it
(`ratio_of_means`: the same quantity weighted by each batch's ‖g_b‖²). The batches are the draws of that
expectation: `std_error` is the standard error of the weighted mean over them (0 with one batch).

One compiled program per batch structure: the gradient and its Hessian-vector product (forward-over-reverse,
`jax.jvp` of `jax.grad`, Pearlmutter 1994) of each batch; another set of batches or parameters of the same shapes
compiles nothing. Only jax and numpy.
"""

import dataclasses
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from curvax import summary
from curvax.inputs import as_batches, check_params, normalized_weights, scalar_loss
from curvax.operators import as_pytree_fn


@dataclasses.dataclass(frozen=True)
class BatchSharpness:
  """`value` Σ_b w_b q_b with q_b = g_bᵀH_bg_b/‖g_b‖² (`per_batch`), its `std_error` over the batches, and
  `ratio_of_means` Σ_b w_b g_bᵀH_bg_b / Σ_b w_b ‖g_b‖²."""

  value: float
  std_error: float
  ratio_of_means: float
  per_batch: tuple[float, ...]

  def __repr__(self):
    return summary.sharpness(self)


@jax.jit
def _curvature_along_gradient(loss_fn, params, batch):
  """(gᵀHg, gᵀg) of one batch's loss at `params`, g its gradient: one gradient and one HVP along it."""
  grad = jax.grad(lambda q: scalar_loss(loss_fn, q, batch))
  g, hg = jax.jvp(grad, (params,), (grad(params),))
  dot = lambda a, b: sum(jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
  return dot(g, hg), dot(g, g)


def batch_sharpness(
    loss_fn: Callable[[Any, Any], jax.Array],
    params: Any,
    batches: Any,
    *,
    weights: Optional[Sequence[float]] = None,
) -> BatchSharpness:
  """The batch sharpness of `loss_fn` at `params` over `batches` (module docstring).

  Args:
    loss_fn: `loss_fn(params, batch) -> scalar`, the loss of one mini-batch.
    params: the point θ (pytree of real floating arrays).
    batches: a list of mini-batches (any pytrees `loss_fn` reads), the draws of the expectation; one batch alone is
      a list of one.
    weights: per-batch weights (normalized to sum 1); None: equal weights.

  Raises:
    ValueError: a batch whose gradient is exactly zero (its Rayleigh quotient is undefined).
    FloatingPointError: a batch whose gradient or curvature along it is not finite (named).
  """
  if not callable(loss_fn):
    raise ValueError(f"loss_fn must be a callable (params, batch) -> scalar, got {type(loss_fn).__name__}")
  check_params(params)
  batches = as_batches(batches)
  w = normalized_weights(len(batches), weights)
  fn = as_pytree_fn(loss_fn)
  pairs = np.asarray([jax.device_get(_curvature_along_gradient(fn, params, b)) for b in batches], np.float64)
  ghg, gg = pairs[:, 0], pairs[:, 1]
  if not np.all(np.isfinite(pairs)):
    bad = np.flatnonzero(~np.all(np.isfinite(pairs), axis=1)).tolist()
    raise FloatingPointError(
        f"batch_sharpness: the gradient or its Hessian product is not finite for batch(es) {bad} (gᵀHg, gᵀg = "
        f"{pairs[bad[0]].tolist()}): check loss_fn(params, batch) there"
    )
  if np.any(gg == 0):
    raise ValueError(f"batches {np.flatnonzero(gg == 0).tolist()} have a zero gradient: no direction to read")
  q = ghg / gg
  value = float(np.sum(w * q))
  # The weighted mean's standard error: √(Σ w_b² (q_b − S)² · B/(B − 1)), s/√B for equal weights.
  n = len(q)
  std_error = float(np.sqrt(np.sum(w**2 * (q - value) ** 2) * n / (n - 1))) if n > 1 else 0.0
  return BatchSharpness(value, std_error, float(np.sum(w * ghg) / np.sum(w * gg)), tuple(float(x) for x in q))
