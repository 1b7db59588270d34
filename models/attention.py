"""Multi-head dot-product attention with a configurable logit scale and optional recorded statistics.

Logit scale (`attention_logit_scale`, docs/science.md §4):
- `sqrt_dk`: logits = q·k/√d_k (Vaswani et al. 2017, eq. 1). For q, k with iid unit-variance entries
  E[(q·k)²] = d_k, so unscaled logits have std √d_k and softmax is nearly one-hot at init.
- `none`: logits = q·k (T5, Raffel et al. 2020; the compensation sits in the query init, see `init/`).
- `dk`: logits = q·k/d_k (µP, Yang et al. 2022 "Tensor Programs V", §C).

QK-norm (`model.qk_norm`, docs/science.md §4): the model's norm (`model.norm_type`) applied to every query and key
over the head dimension before the logits, q̂ = Norm_q(q), k̂ = Norm_k(k), one gain (and bias) of width d_k per
projection shared by the heads (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters", §2.1;
Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training instabilities", §3.1, "qk-layernorm":
the fix for attention-logit growth). A normalized vector has norm ≤ √d_k, so with the 1/√d_k scale and no bias
|logit| ≤ √d_k·max|g_q|·max|g_k| whatever the weights (Cauchy–Schwarz). HybridNorm (`model.norm_position='hybrid'`)
normalizes the values too (`models.placement.qkv_norms`).

When the `intermediates` collection is mutable (analysis only; in the train step it is not, so nothing is computed)
the layer records per head: the std and the largest |logit| over unmasked (query, key) pairs, the entropy of the attention
distribution and its max probability, both averaged over queries that attend to at least one key, and the entropy of
uniform attention over the same keys (log #valid keys, same average): the entropy's ceiling under the mask.

When the `MAX_LOGIT_COLLECTION` collection is mutable (the train step under `optim.qk_clip > 0`; otherwise nothing is
computed) the layer records per head S_max = the largest logit (signed, as scaled above) over the batch and the
unmasked (query, key) pairs: the statistic QK-clip rescales W_q and W_k by (Kimi Team 2025; train/qk_clip.py).
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from models.dense import Dense
from models.norms import make_norm
from models.parameterization import default_kernel_init, hidden_multiplier
from models.placement import qkv_norms

MAX_LOGIT_COLLECTION = "max_logits"  # QK-clip's per-head S_max (module docstring)


def logit_scale(kind: str, head_dim: int) -> float:
  """The constant multiplying q·k (see module docstring)."""
  return {"sqrt_dk": head_dim**-0.5, "none": 1.0, "dk": 1.0 / head_dim}[kind]


def _masked_head_stats(logits_BxHxQxK, probs_BxHxQxK, mask_BxHxQxK):
  """Per-head logit std, attention entropy and max probability over valid positions."""
  m = mask_BxHxQxK.astype(logits_BxHxQxK.dtype)
  n = jnp.maximum(m.sum(axis=(0, 2, 3)), 1.0)
  mean_H = (logits_BxHxQxK * m).sum(axis=(0, 2, 3)) / n
  var_H = (jnp.square(logits_BxHxQxK - mean_H[None, :, None, None]) * m).sum(axis=(0, 2, 3)) / n
  p = probs_BxHxQxK * m
  entropy_BxHxQ = -jnp.sum(jnp.where(m > 0, p * jnp.log(jnp.maximum(p, 1e-30)), 0.0), axis=-1)
  max_BxHxQ = jnp.max(p, axis=-1)
  q_valid = (m.sum(-1) > 0).astype(m.dtype)
  nq = jnp.maximum(q_valid.sum(axis=(0, 2)), 1.0)
  return (jnp.sqrt(var_H), (entropy_BxHxQ * q_valid).sum(axis=(0, 2)) / nq, (max_BxHxQ * q_valid).sum(axis=(0, 2)) / nq)


def _uniform_entropy(mask_BxHxQxK):
  """Per head, the entropy of uniform attention over each query's valid keys, log(#keys), averaged over the queries that
  attend to at least one key (as `_masked_head_stats` averages the entropy): 1 − entropy/this measures collapse."""
  m = mask_BxHxQxK.astype(jnp.float32)
  keys_BxHxQ = m.sum(axis=-1)
  q_valid = (keys_BxHxQ > 0).astype(m.dtype)
  nq = jnp.maximum(q_valid.sum(axis=(0, 2)), 1.0)
  return (jnp.log(jnp.maximum(keys_BxHxQ, 1.0)) * q_valid).sum(axis=(0, 2)) / nq


class MultiHeadAttention(nn.Module):
  """Attention from `x_q_BxQxD` to `x_kv_BxKxD` under a boolean mask [B, 1, Q, K].

  Attributes:
    config: the frozen ModelConfig.
    sublayer: which attention it is (`self_attn` / `cross_attn`), declared by its parameters (`models.roles`).
  """

  config: Any
  sublayer: str

  @nn.compact
  def __call__(self, x_q_BxQxD, x_kv_BxKxD, mask_Bx1xQxK, *, deterministic: bool = True):
    c = self.config
    h, k, d = c.num_heads, c.qkv_head_dim, x_q_BxQxD.shape[-1]
    proj = lambda name, role: Dense(
        (h, k),
        axis=-1,
        use_bias=c.use_bias,
        multiplier=hidden_multiplier(c, d),
        kernel_init=default_kernel_init(c),
        axes=("embed", "heads", "kv"),
        role=role,
        sublayer=self.sublayer,
        dtype=c.dtype,
        param_dtype=c.param_dtype,
        name=name,
    )
    q_BxQxHxK = proj("query", "attn_q")(x_q_BxQxD)
    k_BxKxHxK = proj("key", "attn_k")(x_kv_BxKxD)
    v_BxKxHxK = proj("value", "attn_v")(x_kv_BxKxD)
    qk_norm, v_norm = qkv_norms(c)
    if qk_norm:  # Dehghani et al. 2023 §2.1; Wortsman et al. 2023 §3.1 (module docstring)
      q_BxQxHxK = make_norm(c, "query_norm", self.sublayer, axes=("kv",))(q_BxQxHxK)
      k_BxKxHxK = make_norm(c, "key_norm", self.sublayer, axes=("kv",))(k_BxKxHxK)
    if v_norm:  # HybridNorm's QKV-norm (Zhuo et al. 2025 §3; models.placement)
      v_BxKxHxK = make_norm(c, "value_norm", self.sublayer, axes=("kv",))(v_BxKxHxK)

    # Softmax in at least float32 (bfloat16 compute), in float64 when the model computes in float64 (analysis).
    softmax_dtype = jnp.promote_types(c.dtype, jnp.float32)
    logits_BxHxQxK = jnp.einsum("bqhd,bkhd->bhqk", q_BxQxHxK, k_BxKxHxK).astype(softmax_dtype)
    logits_BxHxQxK = logits_BxHxQxK * logit_scale(c.attention_logit_scale, k)
    mask_BxHxQxK = jnp.broadcast_to(mask_Bx1xQxK, logits_BxHxQxK.shape)
    masked = jnp.where(mask_BxHxQxK, logits_BxHxQxK, jnp.finfo(softmax_dtype).min)
    probs_BxHxQxK = jax.nn.softmax(masked, axis=-1)

    if self.is_mutable_collection("intermediates"):
      std_H, entropy_H, max_H = _masked_head_stats(logits_BxHxQxK, probs_BxHxQxK, mask_BxHxQxK)
      self.sow("intermediates", "logit_std", std_H)
      valid_logits = jnp.where(mask_BxHxQxK, jnp.abs(logits_BxHxQxK), 0.0)
      self.sow("intermediates", "max_logit", jnp.max(valid_logits, axis=(0, 2, 3)))
      self.sow("intermediates", "entropy", entropy_H)
      self.sow("intermediates", "max_prob", max_H)
      self.sow("intermediates", "uniform_entropy", _uniform_entropy(mask_BxHxQxK))

    if self.is_mutable_collection(MAX_LOGIT_COLLECTION) and not self.is_initializing():  # QK-clip's S_max, exact
      valid_logits = jnp.where(mask_BxHxQxK, logits_BxHxQxK, -jnp.inf)
      self.sow(MAX_LOGIT_COLLECTION, "max_logit", jnp.max(valid_logits, axis=(0, 2, 3)))

    if c.attention_dropout_rate > 0 and not deterministic:
      probs_BxHxQxK = nn.Dropout(c.attention_dropout_rate)(probs_BxHxQxK, deterministic=False)
    out_BxQxHxK = jnp.einsum("bhqk,bkhd->bqhd", probs_BxHxQxK.astype(c.dtype), v_BxKxHxK)
    return Dense(
        d,
        axis=(-2, -1),
        use_bias=c.use_bias,
        multiplier=hidden_multiplier(c, h * k),
        kernel_init=default_kernel_init(c),
        axes=("heads", "kv", "embed"),
        role="attn_out",
        sublayer=self.sublayer,
        dtype=c.dtype,
        param_dtype=c.param_dtype,
        name="out",
    )(out_BxQxHxK)
