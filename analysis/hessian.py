"""Curvature operators of a loss as matvecs on the parameter pytree: Hessian, Gauss–Newton, per-block Hessians.

Contract: every operator is built from `(loss_fn, params, batch)` with `loss_fn(params, batch) -> scalar` (e.g.
`train.loss.make_loss_fn(model)`, dropout off) and returned as `matvec(v) -> Hv`, a map between pytrees shaped
like `params` (or like the selected sub-pytree for blocks), ready for `analysis.lanczos` / `analysis.spectrum`.
Nothing here materializes an n×n matrix except `dense_hessian` (tiny models, tests).

  * `hvp_fn`: Hessian-vector products, forward-over-reverse (Pearlmutter 1994; SCIENCE §9): the gradient is
    linearized ONCE with `jax.linearize(jax.grad(f), params)`, so each product only runs the tangent (JVP) pass
    of the gradient computation over stored residuals, instead of re-running the forward and backward passes.
    Several batches give the Hessian of the token-mean loss over their union: with mean-reduced per-batch losses
    and n_b non-padding target tokens, H = Σ_b n_b H_b / Σ_b n_b.
    Memory: linearization stores the residuals of the forward and backward pass (about the activations of one
    training step) PER BATCH, so k batches keep k sets. `linearize=False` keeps nothing and recomputes
    `jvp(grad f_b)` per product (about 1.5–2× slower per product, O(one batch) memory).
  * `ggn_vp_fn`: generalized Gauss–Newton products G v = Jᵀ H_out J v for the token cross-entropy (Schraudolph
    2002; Martens 2020 "New insights and perspectives on the natural gradient method", §8), J the Jacobian of the
    logits, H_out = (diag(p) − p pᵀ)/N per non-padding token (N tokens, mean loss): G is PSD by construction.
  * `block_hvp_fn` / `model_blocks`: the Hessian restricted to one block of parameters chosen by `ParamRole`
    (`models.param_roles`), i.e. the diagonal block ∂²L/∂θ_B² with the other parameters held fixed.
"""
import functools
from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from models import ParamRole, param_roles
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


def _float_dtype(params):
    return ravel_pytree(params)[0].dtype


# The loss / logits function is a static argument: operators built from the same function (and shapes) share one
# compilation instead of recompiling a fresh closure per call.
@functools.partial(jax.jit, static_argnums=0)
def _linearized_grad(loss_fn, params, batch):
    """The linear map v ↦ Hv of one batch, linearized once under jit. It is a `jax.tree_util.Partial` whose stored
    residuals are pytree leaves, so it is returned from jit and passed back in as an operand, not a constant."""
    return jax.linearize(lambda q: jax.grad(loss_fn)(q, batch), params)[1]


@functools.partial(jax.jit, static_argnums=0)
def _hvp_jvp(loss_fn, params, batch, v):
    """Hv = d/dε ∇L(θ + εv) by one jvp of the gradient (nothing stored between calls)."""
    return jax.jvp(lambda q: jax.grad(loss_fn)(q, batch), (params,), (v,))[1]


@functools.partial(jax.jit, static_argnums=0)
def _ggn_one(logits_fn, params, batch, v):
    """Jᵀ H_out J v for one batch: J v by linearizing the logits, Jᵀ by transposing that same linear map."""
    logits, jvp_lin = jax.linearize(lambda q: logits_fn(q, batch), params)
    hu = token_ce_output_hessian_vp(logits, batch["targets"] > 0, jvp_lin(v))
    (out,) = jax.linear_transpose(jvp_lin, params)(hu)
    return out


@jax.jit
def _apply_linearized(lins, ws, v):
    """Σ_b w_b lin_b(v): the linearized gradients (jax.tree_util.Partial pytrees) enter as operands, not constants."""
    return _weighted_sum(lins, ws, lambda lin: lin(v))


def hvp_fn(loss_fn: Callable[[Any, Batch], jax.Array], params: Any, batch: Union[Batch, Sequence[Batch]], *,
           weights: Optional[Sequence[float]] = None, linearize: bool = True) -> Callable[[Any], Any]:
    """Hessian-vector product v ↦ Hv of `loss_fn` at `params` (forward-over-reverse).

    Args:
      loss_fn: `loss_fn(params, batch) -> scalar`, mean-reduced over the batch's tokens for token weighting.
      params: the point θ (pytree).
      batch: one batch, or a list of batches: then H = Σ_b w_b H_b with w_b = n_b / Σ n_b (n_b the non-padding
        target tokens, `train.loss.num_tokens`), the Hessian of the token-mean loss over the union of the batches.
      weights: per-batch weights replacing the token counts (normalized to sum 1).
      linearize: True: `jax.linearize` the gradient once per batch (each product = one tangent pass; stores the
        residuals of every batch). False: `jax.jvp` of the gradient per product (no stored residuals).

    Returns:
      `matvec(v) -> Hv` on pytrees shaped like `params`; jitted, traceable (usable inside `lanczos`).
    """
    batches = _as_batches(batch)
    dtype = _float_dtype(params)
    ws = [jnp.asarray(w, dtype) for w in batch_weights(batches, weights)]
    if linearize:
        lins = [_linearized_grad(loss_fn, params, b) for b in batches]
        return lambda v: _apply_linearized(lins, ws, v)

    return lambda v: _weighted_sum(batches, ws, lambda b: _hvp_jvp(loss_fn, params, b, v))


def _weighted_sum(items, ws, product):
    """Σ_b w_b · product(item_b) over pytrees (the token-weighted average of per-batch operators)."""
    out = None
    for b, w in zip(items, ws):
        term = jax.tree.map(lambda x: w.astype(x.dtype) * x, product(b))
        out = term if out is None else jax.tree.map(jnp.add, out, term)
    return out


def token_ce_output_hessian_vp(logits_BxLxV: jax.Array, mask_BxL: jax.Array, u_BxLxV: jax.Array) -> jax.Array:
    """H_out u for the mean token cross-entropy: per token (diag(p) − p pᵀ) u / N, zero at padding.

    ∂²/∂z² of −log softmax(z)_y is diag(p) − p pᵀ (p = softmax(z)), independent of the label y.
    """
    p = jax.nn.softmax(logits_BxLxV, axis=-1)
    count = jnp.maximum(jnp.sum(mask_BxL), 1).astype(logits_BxLxV.dtype)
    hu = p * u_BxLxV - p * jnp.sum(p * u_BxLxV, axis=-1, keepdims=True)
    return hu * (mask_BxL[..., None].astype(hu.dtype) / count)


def ggn_vp_fn(logits_fn: Callable[[Any, Batch], jax.Array], params: Any, batch: Union[Batch, Sequence[Batch]], *,
              weights: Optional[Sequence[float]] = None) -> Callable[[Any], Any]:
    """Generalized Gauss–Newton products G v = Jᵀ H_out J v for the mean token cross-entropy (Schraudolph 2002).

    J v is one JVP of the logits (forward), Jᵀ w its transpose (`jax.linear_transpose` of the same linearization,
    i.e. a VJP); no dense Jacobian. Several batches are token-weighted as in `hvp_fn`.

    Args:
      logits_fn: `logits_fn(params, batch) -> logits [B, L, V]` (dropout off).
      params: the point θ.
      batch: one batch or a list; the mask is `batch["targets"] > 0`.
      weights: optional per-batch weights replacing the token counts.

    Returns:
      `matvec(v) -> Gv` on pytrees shaped like `params`; symmetric positive semidefinite.
    """
    batches = _as_batches(batch)
    dtype = _float_dtype(params)
    ws = [jnp.asarray(w, dtype) for w in batch_weights(batches, weights)]

    return lambda v: _weighted_sum(batches, ws, lambda b: _ggn_one(logits_fn, params, b, v))


def dense_hessian(loss_fn: Callable[[Any, Batch], jax.Array], params: Any, batch: Batch) -> jax.Array:
    """The full [n, n] Hessian in `ravel_pytree(params)` order (`jax.hessian`); for tiny models and tests only."""
    flat, unravel = ravel_pytree(params)
    return jax.jit(jax.hessian(lambda x: loss_fn(unravel(x), batch)))(flat)


def _selected_leaves(params: Any, select) -> tuple:
    """(leaves, treedef, selected leaf indices, their paths) for a ParamRole predicate or a block name."""
    roles = param_roles(params)
    if isinstance(select, str):
        blocks = model_blocks(params)
        if select not in blocks:
            raise ValueError(f"select={select!r} is not a block of this model; valid blocks: {sorted(blocks)}")
        select = blocks[select]
    if not callable(select):
        raise ValueError(f"select must be a ParamRole predicate or a block name, got {type(select).__name__}")
    leaves, treedef = jax.tree.flatten(params)
    role_leaves = jax.tree.leaves(roles, is_leaf=lambda r: isinstance(r, ParamRole))
    idx = [i for i, r in enumerate(role_leaves) if select(r)]
    if not idx:
        raise ValueError("select matches no parameter; see model_blocks(params) for the available blocks")
    return leaves, treedef, idx, [role_leaves[i].path for i in idx]


def block_params(params: Any, select) -> dict:
    """The selected sub-pytree {path: leaf} (the example pytree of the block operator)."""
    leaves, _, idx, paths = _selected_leaves(params, select)
    return {p: leaves[i] for p, i in zip(paths, idx)}


def block_indices(params: Any, select) -> np.ndarray:
    """Flat indices (in `ravel_pytree(params)` order) of the block, in the ravel order of `block_params`."""
    leaves, _, idx, paths = _selected_leaves(params, select)
    offsets = np.cumsum([0] + [int(np.size(x)) for x in leaves])
    by_path = {p: np.arange(offsets[i], offsets[i + 1]) for p, i in zip(paths, idx)}
    return np.concatenate([by_path[p] for p in sorted(by_path)])  # dict pytrees ravel in sorted-key order


def block_hvp_fn(loss_fn: Callable[[Any, Batch], jax.Array], params: Any, batch: Union[Batch, Sequence[Batch]],
                 select: Union[str, Callable[[ParamRole], bool]], **hvp_kwargs) -> tuple:
    """Hessian of `loss_fn` restricted to a block of parameters (the others held fixed at `params`).

    Args:
      loss_fn, params, batch: as in `hvp_fn`.
      select: a predicate on `models.ParamRole` or a name from `model_blocks(params)`.
      **hvp_kwargs: forwarded to `hvp_fn` (weights, linearize).

    Returns:
      (matvec, example): the block Hessian's matvec on {path: leaf} dicts and that example dict.
    """
    leaves, treedef, idx, paths = _selected_leaves(params, select)
    example = {p: leaves[i] for p, i in zip(paths, idx)}

    def sub_loss(sub, b):
        full = list(leaves)
        for p, i in zip(paths, idx):
            full[i] = sub[p]
        return loss_fn(jax.tree.unflatten(treedef, full), b)

    return hvp_fn(sub_loss, example, batch, **hvp_kwargs), example


# Per-layer blocks (kernels only: a projection's bias is a separate, far smaller direction).
_LAYER_BLOCKS = ("attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out")


def _role_is(role, stack, layer, sublayer):
    return lambda r: r.role == role and r.stack == stack and r.layer == layer and r.sublayer == sublayer


def _layer_norms(stack, layer):
    return lambda r: r.role in ("norm_scale", "norm_bias") and r.stack == stack and r.layer == layer


def model_blocks(params: Any) -> dict:
    """Named parameter blocks of a model: name -> ParamRole predicate (only blocks that select a parameter).

    Per stack and layer: "<stack>/layer_<l>/attn_q|attn_k|attn_v|attn_out" (self-attention),
    "<stack>/layer_<l>/cross_attn_q|..." (cross-attention), "<stack>/layer_<l>/mlp_in|mlp_out" (kernels) and
    "<stack>/layer_<l>/norms" (the layer's norm gains and biases); "<stack>/final_norm", "<stack>/position",
    "embedding" (token embedding) and "head" (untied readout kernel) when present.
    """
    roles = jax.tree.leaves(param_roles(params), is_leaf=lambda r: isinstance(r, ParamRole))
    blocks = {}
    for r in roles:
        if r.layer is not None and r.role in _LAYER_BLOCKS:
            prefix = "cross_" if r.sublayer == "cross_attn" else ""
            blocks[f"{r.stack}/layer_{r.layer}/{prefix}{r.role}"] = _role_is(r.role, r.stack, r.layer, r.sublayer)
        elif r.layer is not None and r.role in ("norm_scale", "norm_bias"):
            blocks[f"{r.stack}/layer_{r.layer}/norms"] = _layer_norms(r.stack, r.layer)
        elif r.sublayer == "final_norm":
            blocks[f"{r.stack}/final_norm"] = (lambda s: lambda q: q.sublayer == "final_norm" and q.stack == s)(r.stack)
        elif r.role == "position":
            blocks[f"{r.stack}/position"] = (lambda s: lambda q: q.role == "position" and q.stack == s)(r.stack)
        elif r.role == "embedding":
            blocks["embedding"] = lambda q: q.role == "embedding"
        elif r.role == "head":
            blocks["head"] = lambda q: q.role == "head"
    return blocks
