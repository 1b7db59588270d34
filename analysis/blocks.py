"""Per-block curvature operators: a full-model operator restricted to one block of parameters.

Contract: `block_operator(operator, params, select, model=...)` takes a `curvax.LinearOperator` on
pytrees shaped like `params` (`analysis.hessian.hvp_fn`'s or `ggn_vp_fn`'s) and a block chosen by `ParamRole`
(`models.param_roles`): a predicate on roles or a name from `model_blocks(model)`. It returns the diagonal block
∂²L/∂θ_B² with the other parameters held fixed, as an operator on {path: leaf} dicts, with that example dict.
The generic block is `curvax.block` (leaves chosen by path): this module is its client for blocks chosen by the
roles `models.roles` declares. All blocks share the full model's linearization; a block product is one full product
with the block's vector placed at its offsets (offsets are data, so blocks of equal leaf sizes share one compiled
program).
`block_hvp_fn` builds the Hessian and takes its block in one call; `block_params` / `block_indices` give a block's
leaves and its flat indices in `ravel_pytree(params)` order (dense references in tests).
"""

from typing import Any, Callable, Sequence, Union

import jax
import numpy as np

import curvax
from analysis.hessian import Batch, hvp_fn
from models import ParamRole, param_roles
from models.roles import NORM_ROLES


def _selected_leaves(params: Any, select, model: Any) -> tuple:
  """(leaves, treedef, selected leaf indices, their paths) for a ParamRole predicate or a block name."""
  roles = param_roles(model, params)
  if isinstance(select, str):
    blocks = model_blocks(model)
    if select not in blocks:
      raise ValueError(f"select={select!r} is not a block of this model; valid blocks: {sorted(blocks)}")
    select = blocks[select]
  if not callable(select):
    raise ValueError(f"select must be a ParamRole predicate or a block name, got {type(select).__name__}")
  leaves, treedef = jax.tree.flatten(params)
  role_leaves = jax.tree.leaves(roles, is_leaf=lambda r: isinstance(r, ParamRole))
  idx = [i for i, r in enumerate(role_leaves) if select(r)]
  if not idx:
    raise ValueError("select matches no parameter; see model_blocks(model) for the available blocks")
  return leaves, treedef, idx, [role_leaves[i].path for i in idx]


def block_params(params: Any, select, *, model: Any) -> dict:
  """The selected sub-pytree {path: leaf} (the example pytree of the block operator); `model` (the Transformer or
  its ModelConfig) declares the roles `select` reads."""
  leaves, _, idx, paths = _selected_leaves(params, select, model)
  return {p: leaves[i] for p, i in zip(paths, idx)}


def block_indices(params: Any, select, *, model: Any) -> np.ndarray:
  """Flat indices (in `ravel_pytree(params)` order) of the block, in the ravel order of `block_params`."""
  leaves, _, idx, paths = _selected_leaves(params, select, model)
  offsets = np.cumsum([0] + [int(np.size(x)) for x in leaves])
  by_path = {p: np.arange(offsets[i], offsets[i + 1]) for p, i in zip(paths, idx)}
  return np.concatenate([by_path[p] for p in sorted(by_path)])  # dict pytrees ravel in sorted-key order


def block_operator(
    operator: curvax.LinearOperator, params: Any, select: Union[str, Callable[[ParamRole], bool]], *, model: Any
) -> tuple:
  """The diagonal block of a full-model operator (e.g. `hvp_fn`'s) on a block of parameters.

  One linearization serves every block: a block product costs one full product (plus O(n) copies), and blocks of
  equal leaf sizes share one compiled Lanczos program.

  Args:
    operator: a `LinearOperator` on pytrees shaped like `params`.
    params: the full parameter pytree (for the block's leaves and offsets).
    select: a predicate on `models.ParamRole` or a name from `model_blocks(model)`.
    model: the Transformer (or its ModelConfig) whose declared roles (`models.param_roles`) `select` reads.

  Returns:
    (block operator on {path: leaf} dicts, that example dict).
  """
  leaves, _, idx, paths = _selected_leaves(params, select, model)
  chosen = set(paths)
  return curvax.block(operator, lambda path: path in chosen), {p: leaves[i] for p, i in zip(paths, idx)}


def block_hvp_fn(
    loss_fn: Callable[[Any, Batch], jax.Array],
    params: Any,
    batch: Union[Batch, Sequence[Batch]],
    select: Union[str, Callable[[ParamRole], bool]],
    *,
    model: Any,
    **hvp_kwargs,
) -> tuple:
  """Hessian of `loss_fn` restricted to a block of parameters (the others held fixed at `params`).

  Builds `hvp_fn(loss_fn, params, batch)` and takes its block (`block_operator`); to analyze several blocks,
  build the full operator once and call `block_operator` per block.

  Args:
    loss_fn, params, batch: as in `hvp_fn`.
    select: a predicate on `models.ParamRole` or a name from `model_blocks(model)`.
    model: the Transformer (or its ModelConfig) declaring the roles.
    **hvp_kwargs: forwarded to `hvp_fn` (weights, linearize).

  Returns:
    (matvec, example): the block Hessian's operator on {path: leaf} dicts and that example dict.
  """
  return block_operator(hvp_fn(loss_fn, params, batch, **hvp_kwargs), params, select, model=model)


# Per-layer blocks (kernels only: a projection's bias is a separate, far smaller direction).
_LAYER_BLOCKS = ("attn_q", "attn_k", "attn_v", "attn_out", "attn_gate", "mlp_in", "mlp_gate", "mlp_out")


def _role_is(role, stack, layer, sublayer):
  return lambda r: r.role == role and r.stack == stack and r.layer == layer and r.sublayer == sublayer


def _layer_norms(stack, layer):
  return lambda r: r.role in NORM_ROLES and r.stack == stack and r.layer == layer


def model_blocks(model: Any) -> dict:
  """Named parameter blocks of a model (the Transformer or its ModelConfig): name -> ParamRole predicate (only blocks
  that select a parameter), from the roles its parameters declare (`models.param_roles`).

  Per stack and layer: "<stack>/layer_<l>/attn_q|attn_k|attn_v|attn_out" (self-attention),
  "<stack>/layer_<l>/cross_attn_q|..." (cross-attention; "attn_gate" with model.attention_gate),
  "<stack>/layer_<l>/mlp_in|mlp_gate|mlp_out" (kernels; mlp_gate in a gated MLP) and
  "<stack>/layer_<l>/norms" (the layer's norm gains and biases); "<stack>/final_norm", "<stack>/embedding_norm"
  (`model.embedding_norm`), "<stack>/position",
  "embedding" (token embedding) and "head" (untied readout kernel) when present.
  """
  roles = jax.tree.leaves(param_roles(model), is_leaf=lambda r: isinstance(r, ParamRole))
  blocks = {}
  for r in roles:
    if r.layer is not None and r.role in _LAYER_BLOCKS:
      prefix = "cross_" if r.sublayer == "cross_attn" else ""
      blocks[f"{r.stack}/layer_{r.layer}/{prefix}{r.role}"] = _role_is(r.role, r.stack, r.layer, r.sublayer)
    elif r.layer is not None and r.role in NORM_ROLES:
      blocks[f"{r.stack}/layer_{r.layer}/norms"] = _layer_norms(r.stack, r.layer)
    elif r.sublayer in ("final_norm", "embedding_norm"):
      blocks[f"{r.stack}/{r.sublayer}"] = (lambda s, n: lambda q: q.sublayer == n and q.stack == s)(r.stack, r.sublayer)
    elif r.role == "position":
      blocks[f"{r.stack}/position"] = (lambda s: lambda q: q.role == "position" and q.stack == s)(r.stack)
    elif r.role == "embedding":
      blocks["embedding"] = lambda q: q.role == "embedding"
    elif r.role == "head":
      blocks["head"] = lambda q: q.role == "head"
  return blocks
