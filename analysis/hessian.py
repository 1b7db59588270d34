"""Curvature operators of a loss as data: Hessian and Gauss–Newton on the parameter pytree.

Contract: every operator is built from `(loss_fn, params, batch)` with `loss_fn(params, batch) -> scalar` (e.g.
`train.make_loss_fn(model)`, dropout off) and returned as a `curvax.LinearOperator`: a pytree whose leaves are what
its products need (linearization residuals, batch weights), so curvax's programs taking it compile once per operator
structure (a second checkpoint, batch, seed or same-shaped block compiles nothing). Nothing here materializes an n×n
matrix except `dense_hessian` (tiny models, tests).

  * `hvp_fn`: Hessian-vector products, forward-over-reverse (Pearlmutter 1994, "Fast exact multiplication by the
    Hessian"): the gradient is linearized ONCE with `jax.linearize(jax.grad(f), params)`, so each product only runs
    the tangent (JVP) pass over stored residuals. Several batches give the Hessian of the token-mean loss over their
    union: with mean-reduced per-batch losses and n_b non-padding target tokens, H = Σ_b n_b H_b / Σ_b n_b.
    Memory: the residuals of one training step's forward and backward pass PER BATCH; `linearize=False` keeps
    nothing and recomputes `jvp(grad f_b)` per product (slower per product, O(one batch) memory).
  * `ggn_vp_fn`: generalized Gauss–Newton products G v = Jᵀ H_out J v for the token cross-entropy (Schraudolph
    2002; Martens 2020 "New insights and perspectives on the natural gradient method", §8), J the Jacobian of the
    logits, H_out = (diag(p) − p pᵀ)/N per non-padding token (N tokens, mean loss): G is PSD by construction. The
    logits are linearized once; a product is one tangent pass and its transpose over the stored residuals.

The generic code is `curvax` (`curvax.hessian`, `curvax.ggn`): this module is its client for the project's
convention, a batch dict whose `targets` give the token weights (0 = padding), passed to curvax as `weights=`
(per batch: `token_weights`, the project's one token weighting, which curvax normalizes) and `output_weights=` (per
token). An operator restricted to one block of parameters (the diagonal block ∂²L/∂θ_B²) is `analysis.blocks`.
"""

from typing import Any, Callable, Optional, Sequence, Union

import jax

import curvax
from train.loss import num_tokens

Batch = dict


def as_batches(batch) -> list:
  """The project's batches: one batch dict or a list (or tuple) of them, each with a `targets` array (0 = padding)."""
  batches = list(batch) if isinstance(batch, (list, tuple)) else [batch]
  if not batches:
    raise ValueError("batch: an empty list of batches was given; pass one batch dict or a non-empty list")
  for i, b in enumerate(batches):
    if not isinstance(b, dict) or "targets" not in b:
      raise ValueError(f"batch[{i}] must be a dict with a 'targets' array (0 = padding), got {type(b).__name__}")
  return batches


def token_weights(batches: Sequence[Batch], weights: Optional[Sequence[float]] = None) -> Sequence[float]:
  """The per-batch weights of the project's curvature and gradients: the non-padding target tokens n_b of each batch
  (`train.loss.num_tokens`), or `weights` when given. curvax normalizes them, w_b = n_b / Σ n_b
  (`curvax.normalized_weights`), so H = Σ_b w_b H_b is the Hessian of the token-mean loss over the batches' union."""
  return [float(num_tokens(b)) for b in batches] if weights is None else weights


def _padding_mask(batch):
  return batch["targets"] > 0


def hvp_fn(
    loss_fn: Callable[[Any, Batch], jax.Array],
    params: Any,
    batch: Union[Batch, Sequence[Batch]],
    *,
    weights: Optional[Sequence[float]] = None,
    linearize: bool = True,
) -> curvax.LinearOperator:
  """Hessian-vector product v ↦ Hv of `loss_fn` at `params` (forward-over-reverse), as an operator that is data.

  Args:
    loss_fn: `loss_fn(params, batch) -> scalar`, mean-reduced over the batch's tokens for token weighting. A
      pytree callable (`train.make_loss_fn`'s `LossFn`, a `jax.tree_util.Partial`) shares compilations across
      calls of `make_loss_fn`; a plain function shares them across calls with the same function object.
    params: the point θ (pytree).
    batch: one batch, or a list of batches: then H = Σ_b w_b H_b with w_b = n_b / Σ n_b (n_b the non-padding
      target tokens, `train.loss.num_tokens`), the Hessian of the token-mean loss over the union of the batches.
    weights: per-batch weights replacing the token counts (normalized to sum 1).
    linearize: True: `jax.linearize` the gradient once per batch (each product = one tangent pass; stores the
      residuals of every batch). False: `jax.jvp` of the gradient per product (no stored residuals).

  Returns:
    A `HessianOperator` (or `JvpHessianOperator`): call it on pytrees shaped like `params`, or pass it to
    `lanczos` / `top_eigenvalues` / `spectral_density` / `trace`, which compile once per its structure.
  """
  batches = as_batches(batch)
  return curvax.hessian(loss_fn, params, batches, weights=token_weights(batches, weights), linearize=linearize)


def ggn_vp_fn(
    logits_fn: Callable[[Any, Batch], jax.Array],
    params: Any,
    batch: Union[Batch, Sequence[Batch]],
    *,
    weights: Optional[Sequence[float]] = None,
) -> curvax.LinearOperator:
  """Generalized Gauss–Newton products G v = Jᵀ H_out J v for the mean token cross-entropy (Schraudolph 2002).

  The logits are linearized once per batch (`jax.linearize`, residuals of the forward pass stored); a product is
  then J v (the tangent pass), H_out in closed form from the stored softmax, and Jᵀ u (`jax.linear_transpose` of
  the same linear map, a VJP over the same residuals): no forward pass per product, no dense Jacobian. Several
  batches are token-weighted as in `hvp_fn`.

  Args:
    logits_fn: `logits_fn(params, batch) -> logits [B, L, V]` (dropout off).
    params: the point θ.
    batch: one batch or a list; the mask is `batch["targets"] > 0`.
    weights: optional per-batch weights replacing the token counts.

  Returns:
    A `GaussNewtonOperator` on pytrees shaped like `params`; symmetric positive semidefinite.
  """
  batches = as_batches(batch)
  return curvax.ggn(
      logits_fn,
      params,
      batches,
      loss="softmax_cross_entropy",
      weights=token_weights(batches, weights),
      output_weights=_padding_mask,
  )
