"""Curvature operators of a loss as data: Hessian and Gauss–Newton on the parameter pytree.

Contract: every operator is built from `(loss_fn, params, batch)` with `loss_fn(params, batch) -> scalar` (e.g.
`train.make_loss_fn(model)`, dropout off) and returned as a `analysis.operators.LinearOperator`: a pytree whose
leaves are what its products need (linearization residuals, batch weights) and whose static part is only
structure. Call it on pytrees shaped like `params`, or pass it to `analysis.lanczos` / `analysis.spectrum` /
`analysis.density` / `analysis.trace`, whose programs compile once per operator structure: a second checkpoint,
batch or seed (same shapes), or a second block of the same leaf sizes (`analysis.blocks`), compiles nothing. The
loss enters the linearization as a pytree argument (`train.loss.LossFn`), so `make_loss_fn` called again for a new
checkpoint shares the compiled linearization too. Nothing here materializes an n×n matrix except `dense_hessian`
(tiny models, tests).

  * `hvp_fn`: Hessian-vector products, forward-over-reverse (Pearlmutter 1994, "Fast exact multiplication by the
    Hessian"): the gradient is linearized ONCE with `jax.linearize(jax.grad(f), params)`, so each product only runs
    the tangent (JVP) pass of the gradient computation over stored residuals, instead of re-running the forward
    and backward passes. Several batches give the Hessian of the token-mean loss over their union: with
    mean-reduced per-batch losses and n_b non-padding target tokens, H = Σ_b n_b H_b / Σ_b n_b.
    Memory: linearization stores the residuals of the forward and backward pass (about the activations of one
    training step) PER BATCH, so k batches keep k sets. `linearize=False` keeps nothing and recomputes
    `jvp(grad f_b)` per product (about 1.5–2× slower per product, O(one batch) memory).
  * `ggn_vp_fn`: generalized Gauss–Newton products G v = Jᵀ H_out J v for the token cross-entropy (Schraudolph
    2002; Martens 2020 "New insights and perspectives on the natural gradient method", §8), J the Jacobian of the
    logits, H_out = (diag(p) − p pᵀ)/N per non-padding token (N tokens, mean loss): G is PSD by construction. The
    logits are linearized once; a product is one tangent pass and its transpose over the stored residuals.

An operator restricted to one block of parameters (the diagonal block ∂²L/∂θ_B²) is `analysis.blocks`.
"""

from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from analysis.operators import FlatSpec, LinearOperator, as_pytree_fn
from train.loss import num_tokens

Batch = dict


def _as_batches(batch) -> list:
  batches = list(batch) if isinstance(batch, (list, tuple)) else [batch]
  if not batches:
    raise ValueError("batch: an empty list of batches was given; pass one batch dict or a non-empty list")
  for i, b in enumerate(batches):
    if not isinstance(b, dict) or "targets" not in b:
      raise ValueError(f"batch[{i}] must be a dict with a 'targets' array (0 = padding), got {type(b).__name__}")
  return batches


def batch_weights(batches: Sequence[Batch], weights: Optional[Sequence[float]] = None) -> np.ndarray:
  """Normalized weights w_b = n_b / Σ n_b of the batches (n_b non-padding target tokens unless `weights` given)."""
  raw = np.asarray([float(num_tokens(b)) for b in batches] if weights is None else weights, np.float64)
  if raw.shape != (len(batches),):
    raise ValueError(f"weights must have one entry per batch ({len(batches)}), got shape {raw.shape}")
  if np.any(raw < 0) or raw.sum() <= 0:
    raise ValueError(f"weights={raw.tolist()} must be non-negative with a positive sum (token counts)")
  return raw / raw.sum()


def _weights(batches, weights, spec):
  return jnp.asarray(batch_weights(batches, weights), spec.dtype)


# The loss enters as a pytree argument: the same model (and shapes) shares one compilation of the linearization, and
# the linearized map it returns has the same tree structure each time, so programs taking it are reused too.
@jax.jit
def _linearized_grad(loss_fn, params, batch):
  """The linear map v ↦ Hv of one batch, linearized once under jit: a `jax.tree_util.Partial` whose stored
  residuals are pytree leaves (an operand of later programs, not a constant)."""
  return jax.linearize(lambda q: jax.grad(loss_fn)(q, batch), params)[1]


@jax.jit
def _linearized_logits(logits_fn, params, batch):
  """(softmax probabilities, the linear map v ↦ J v) of one batch's logits, linearized once under jit."""
  logits, jvp_lin = jax.linearize(lambda q: logits_fn(q, batch), params)
  return jax.nn.softmax(logits, axis=-1), jvp_lin


def _weighted_sum(items, ws, product):
  """Σ_b w_b · product(item_b) over pytrees (the token-weighted average of per-batch operators).

  With one batch the normalized weight is exactly 1 (`batch_weights`), so the product is returned as is (no extra
  pass over n entries)."""
  items = list(items)
  if len(items) == 1:
    return product(items[0])
  out = None
  for b, item in enumerate(items):
    term = jax.tree.map(lambda x: ws[b].astype(x.dtype) * x, product(item))
    out = term if out is None else jax.tree.map(jnp.add, out, term)
  return out


@jax.tree_util.register_pytree_node_class
class HessianOperator(LinearOperator):
  """v ↦ Σ_b w_b H_b v from each batch's linearized gradient (residuals and weights are leaves)."""

  def __init__(self, lins, weights, spec):
    self.lins, self.weights, self.spec = tuple(lins), weights, spec

  def apply(self, v):
    return _weighted_sum(self.lins, self.weights, lambda lin: lin(v))

  def tree_flatten(self):
    return (self.lins, self.weights), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], children[1], aux[0])


@jax.tree_util.register_pytree_node_class
class JvpHessianOperator(LinearOperator):
  """v ↦ Σ_b w_b d/dε ∇L_b(θ + εv): one jvp of the gradient per product, nothing stored between products."""

  def __init__(self, loss_fn, params, batches, weights, spec):
    self.loss_fn, self.params, self.batches, self.weights, self.spec = loss_fn, params, tuple(batches), weights, spec

  def apply(self, v):
    grad = jax.grad(self.loss_fn)
    return _weighted_sum(self.batches, self.weights, lambda b: jax.jvp(lambda q: grad(q, b), (self.params,), (v,))[1])

  def tree_flatten(self):
    return (self.loss_fn, self.params, self.batches, self.weights), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(*children, aux[0])


def _output_hessian_vp_from_probs(p_BxLxV, mask_BxL, u_BxLxV):
  """(diag(p) − p pᵀ) u / N per non-padding token, from the stored probabilities p."""
  count = jnp.maximum(jnp.sum(mask_BxL), 1).astype(p_BxLxV.dtype)
  hu = p_BxLxV * u_BxLxV - p_BxLxV * jnp.sum(p_BxLxV * u_BxLxV, axis=-1, keepdims=True)
  return hu * (mask_BxL[..., None].astype(hu.dtype) / count)


@jax.tree_util.register_pytree_node_class
class GaussNewtonOperator(LinearOperator):
  """v ↦ Σ_b w_b J_bᵀ H_out,b J_b v from each batch's linearized logits: per product one tangent pass (J v) and
  its transpose (Jᵀ u, a VJP over the same residuals); H_out in closed form from the stored probabilities."""

  def __init__(self, probs, lins, masks, weights, spec):
    self.probs, self.lins, self.masks, self.weights, self.spec = tuple(probs), tuple(lins), tuple(masks), weights, spec

  def apply(self, v):
    primals = jax.tree.unflatten(
        self.spec.treedef, [jax.ShapeDtypeStruct(s, d) for s, d in zip(self.spec.shapes, self.spec.dtypes)]
    )

    def one(b):
      hu = _output_hessian_vp_from_probs(self.probs[b], self.masks[b], self.lins[b](v))
      return jax.linear_transpose(self.lins[b], primals)(hu)[0]

    return _weighted_sum(range(len(self.lins)), self.weights, one)

  def tree_flatten(self):
    return (self.probs, self.lins, self.masks, self.weights), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(*children, aux[0])


def hvp_fn(
    loss_fn: Callable[[Any, Batch], jax.Array],
    params: Any,
    batch: Union[Batch, Sequence[Batch]],
    *,
    weights: Optional[Sequence[float]] = None,
    linearize: bool = True,
) -> LinearOperator:
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
  batches = _as_batches(batch)
  spec = FlatSpec.of(params)
  ws = _weights(batches, weights, spec)
  fn = as_pytree_fn(loss_fn)
  if linearize:
    return HessianOperator([_linearized_grad(fn, params, b) for b in batches], ws, spec)
  return JvpHessianOperator(fn, params, batches, ws, spec)


def token_ce_output_hessian_vp(logits_BxLxV: jax.Array, mask_BxL: jax.Array, u_BxLxV: jax.Array) -> jax.Array:
  """H_out u for the mean token cross-entropy: per token (diag(p) − p pᵀ) u / N, zero at padding.

  ∂²/∂z² of −log softmax(z)_y is diag(p) − p pᵀ (p = softmax(z)), independent of the label y.
  """
  return _output_hessian_vp_from_probs(jax.nn.softmax(logits_BxLxV, axis=-1), mask_BxL, u_BxLxV)


def ggn_vp_fn(
    logits_fn: Callable[[Any, Batch], jax.Array],
    params: Any,
    batch: Union[Batch, Sequence[Batch]],
    *,
    weights: Optional[Sequence[float]] = None,
) -> LinearOperator:
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
  batches = _as_batches(batch)
  spec = FlatSpec.of(params)
  ws = _weights(batches, weights, spec)
  fn = as_pytree_fn(logits_fn)
  linearized = [_linearized_logits(fn, params, b) for b in batches]
  return GaussNewtonOperator(
      [p for p, _ in linearized], [lin for _, lin in linearized], [b["targets"] > 0 for b in batches], ws, spec
  )


def dense_hessian(loss_fn: Callable[[Any, Batch], jax.Array], params: Any, batch: Batch) -> jax.Array:
  """The full [n, n] Hessian in `ravel_pytree(params)` order (`jax.hessian`); for tiny models and tests only."""
  flat, unravel = ravel_pytree(params)
  return jax.jit(jax.hessian(lambda x: loss_fn(unravel(x), batch)))(flat)
