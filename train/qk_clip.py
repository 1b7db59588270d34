"""QK-clip (Kimi Team 2025, "Kimi K2: Open Agentic Intelligence", §2.1 MuonClip, Algorithm 1): after each update,
the query and key projections of every attention head h whose largest pre-softmax logit S_max^h exceeded τ
(`optim.qk_clip`, 100 in Kimi K2; 0 = off) are rescaled,

    γ_h = τ / S_max^h,   W_q^h ← √γ_h · W_q^h,   W_k^h ← √γ_h · W_k^h   (heads with S_max^h ≤ τ untouched),

so the same inputs give logits q·k scaled by γ_h, a largest logit of exactly τ. Here attention is plain multi-head
(one key per query head), so every head's W_k is its own and the paper's per-head rule applies as written; Kimi K2's
MLA needs its care (the shared rotary key is not scaled) only because keys are shared there. A projection's bias
(`model.use_bias`) is rescaled with its kernel so q and k scale exactly. S_max^h is the max over the batch and the
unmasked (query, key) pairs of the logit as the model scales it (`models.attention`, collection
`MAX_LOGIT_COLLECTION`), measured in the step's forward pass at the parameters before the update, as in the paper's
Algorithm 1; the rescale is applied to the updated parameters, a pure function of (params, S_max) inside the jitted
step. With QK-norm the logits do not depend on W_q, W_k's scale, so the config boundary refuses the two together.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import models
from models.roles import ParamRole, key_name

CLIPPED_ROLES = ("attn_q", "attn_k")


def _path(path) -> str:
  return "/".join(key_name(k) for k in path)


def targets(model: Any) -> dict[str, str]:
  """{parameter path: its attention module's path} for the W_q and W_k kernels (by declared role) and the other
  parameters of their projections (the biases)."""
  roles = jax.tree.leaves(models.param_roles(model), is_leaf=lambda r: isinstance(r, ParamRole))
  projections = {r.path.rsplit("/", 1)[0] for r in roles if r.role in CLIPPED_ROLES}
  return {r.path: r.path.rsplit("/", 1)[0].rsplit("/", 1)[0] for r in roles if r.path.rsplit("/", 1)[0] in projections}


def max_logits_by_module(collection: Any) -> dict[str, jax.Array]:
  """The `MAX_LOGIT_COLLECTION` collection of `model.apply` as {attention module path: S_max per head [H]}."""
  leaves = jax.tree_util.tree_leaves_with_path(collection)
  return {_path(path[:-2]): leaf for path, leaf in leaves}  # path: module…/max_logit/0 (sow keeps a tuple)


def clip(params: Any, max_logits: dict[str, jax.Array], tau: float, targets_: dict[str, str]) -> Any:
  """The parameters with QK-clip applied (module docstring).

  Args:
    params: the model's parameters (after the update).
    max_logits: {attention module path: S_max per head}, `max_logits_by_module`.
    tau: the threshold τ > 0.
    targets_: `targets(model)`.

  Returns:
    `params` with the head slices of W_q, W_k (and their biases) of heads with S_max > τ multiplied by √(τ/S_max);
    every other value is the input's, bit for bit.
  """

  def rescale(path, leaf):
    module = targets_.get(_path(path))
    if module is None:
      return leaf
    s_H = max_logits[module]
    over_H = s_H > tau
    factor_H = jnp.sqrt(tau / jnp.where(over_H, s_H, tau))  # Kimi Team 2025, Alg. 1: √γ_h, γ_h = τ/S_max^h
    shape = [1] * leaf.ndim
    shape[-2] = s_H.shape[0]  # [D, H, K] kernels and [H, K] biases: heads on the second-to-last axis
    over, factor = over_H.reshape(shape), factor_H.reshape(shape).astype(leaf.dtype)
    return jnp.where(over, leaf * factor, leaf)

  return jax.tree_util.tree_map_with_path(rescale, params)


def scalars(max_logits: dict[str, Any], tau: float) -> dict[str, float]:
  """The logged metrics: `max_logit` (over every head), `max_logit/<module>` (over its heads) and, with τ > 0,
  `qk_clipped_heads` (heads whose S_max exceeded τ at this step)."""
  values = {k: np.asarray(v, np.float64) for k, v in max_logits.items()}
  out = {"max_logit": max(float(v.max()) for v in values.values())}
  out.update({f"max_logit/{k}": float(v.max()) for k, v in sorted(values.items())})
  if tau:
    out["qk_clipped_heads"] = float(sum(int((v > tau).sum()) for v in values.values()))
  return out
