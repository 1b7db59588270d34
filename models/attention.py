"""Multi-head dot-product attention with a configurable logit scale and optional recorded statistics.

Logit scale (`attention_logit_scale`, docs/science.md §4): `sqrt_dk`, q·k/√d_k (Vaswani et al. 2017, eq. 1: for q, k
with iid unit-variance entries E[(q·k)²] = d_k, so unscaled logits have std √d_k and softmax is nearly one-hot at
init); `none`, q·k (T5, Raffel et al. 2020: the compensation sits in the query init, `init/`); `dk`, q·k/d_k (µP,
Yang et al. 2022, Tensor Programs V, §C).

QK-norm (`model.qk_norm`, docs/science.md §4): the model's norm applied to every query and key over the head
dimension before the logits, one gain (and bias) of width d_k per projection shared by the heads (Dehghani et al.
2023, §2.1; Wortsman et al. 2023, §3.1, the fix for attention-logit growth): with the 1/√d_k scale and no bias
|logit| ≤ √d_k·max|g_q|·max|g_k| whatever the weights (Cauchy–Schwarz). HybridNorm normalizes the values too
(`models.placement.qkv_norms`).

Decoder-LM options (`models.blocks`, docs/science.md §4):
- RoPE (`model.position='rope'`; Su et al. 2021, Eq. 34; `models.rope`): self-attention's queries and keys rotated by
  their positions after QK-norm (as OLMo 2 orders them); cross-attention's positions index different sequences.
- Grouped-query attention (`model.num_kv_heads` = G; Ainslie et al. 2023, §2.2): W_k, W_v are [D, G, K]; query head j
  reads key/value head ⌊j·G/H⌋ (Hugging Face LLaMA's `repeat_kv`): G = H is multi-head, G = 1 multi-query attention.
- Logit soft-capping (`model.attn_logit_softcap` = c > 0; Gemma Team 2024, §2): the scaled logits z become
  c·tanh(z/c) before the mask, so |logit| < c whatever the weights.
- Gated attention (`model.attention_gate`; Qiu et al. 2025, §2.2, their variant G1): every head's output, before
  W_o, is multiplied elementwise by σ(X·W_θ + b), X the sublayer's query-side input after the input norm, W_θ
  [D, H, K] (role `attn_gate`, bias 0): at init centred on σ(0) = 1/2, each head's output about halved.
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from models.dense import Dense
from models.norms import make_norm
from models.parameterization import default_kernel_init, hidden_multiplier
from models.placement import qkv_norms
from models.rope import apply_rope

MAX_LOGIT_COLLECTION = "max_logits"  # QK-clip's per-head S_max (module docstring)


def logit_scale(kind: str, head_dim: int) -> float:
  """The constant multiplying q·k (see module docstring)."""
  return {"sqrt_dk": head_dim**-0.5, "none": 1.0, "dk": 1.0 / head_dim}[kind]


def softcap(z: jax.Array, cap: float) -> jax.Array:
  """c·tanh(z/c) (Gemma Team 2024, §2): ≈ z for |z| ≪ c, and |·| < c; `cap` 0 returns z unchanged."""
  return cap * jnp.tanh(z / cap) if cap > 0 else z


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
  """Attention from `x_q_BxQxD` to `x_kv_BxKxD` under a boolean mask [B, 1, Q, K]; with `rope_positions`
  ([B, Q] = [B, K], self-attention under `model.position='rope'`) queries and keys are rotated by them.

  With the `intermediates` collection mutable (analysis only) it records per head the std and the largest |logit|
  over unmasked (query, key) pairs, the entropy of the attention distribution and its max probability, both averaged
  over queries that attend to at least one key, and the entropy of uniform attention over the same keys (log #valid
  keys, same average): the entropy's ceiling under the mask. With `MAX_LOGIT_COLLECTION` mutable (the train step
  under `optim.qk_clip > 0`) it records per head S_max = the largest logit (signed, as scaled) over the batch and the
  unmasked pairs: the statistic QK-clip rescales W_q and W_k by (Kimi Team 2025; train/qk_clip.py).

  Attributes:
    config: the frozen ModelConfig.
    sublayer: which attention it is (`self_attn` / `cross_attn`), declared by its parameters (`models.roles`).
  """

  config: Any
  sublayer: str

  @nn.compact
  def __call__(self, x_q_BxQxD, x_kv_BxKxD, mask_Bx1xQxK, *, rope_positions=None, deterministic: bool = True):
    c = self.config
    h, k, d = c.num_heads, c.qkv_head_dim, x_q_BxQxD.shape[-1]
    g = c.num_kv_heads or h  # key/value heads (Ainslie et al. 2023)
    proj = lambda name, role, heads=h: Dense(
        (heads, k),
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
    k_BxKxHxK = proj("key", "attn_k", g)(x_kv_BxKxD)  # [B, K, G, K] under GQA
    v_BxKxHxK = proj("value", "attn_v", g)(x_kv_BxKxD)
    qk_norm, v_norm = qkv_norms(c)
    if qk_norm:  # Dehghani et al. 2023 §2.1; Wortsman et al. 2023 §3.1 (module docstring)
      q_BxQxHxK = make_norm(c, "query_norm", self.sublayer, axes=("kv",))(q_BxQxHxK)
      k_BxKxHxK = make_norm(c, "key_norm", self.sublayer, axes=("kv",))(k_BxKxHxK)
    if v_norm:  # HybridNorm's QKV-norm (Zhuo et al. 2025 §3; models.placement)
      v_BxKxHxK = make_norm(c, "value_norm", self.sublayer, axes=("kv",))(v_BxKxHxK)
    if rope_positions is not None:  # Su et al. 2021, Eq. 34 (models.rope)
      q_BxQxHxK = apply_rope(q_BxQxHxK, rope_positions, c.rope_base)
      k_BxKxHxK = apply_rope(k_BxKxHxK, rope_positions, c.rope_base)
    if g != h:  # GQA: query head j reads key/value head ⌊j·G/H⌋ (module docstring)
      k_BxKxHxK, v_BxKxHxK = (jnp.repeat(t, h // g, axis=2) for t in (k_BxKxHxK, v_BxKxHxK))

    # Softmax in at least float32 (bfloat16 compute), in float64 when the model computes in float64 (analysis).
    softmax_dtype = jnp.promote_types(c.dtype, jnp.float32)
    logits_BxHxQxK = jnp.einsum("bqhd,bkhd->bhqk", q_BxQxHxK, k_BxKxHxK).astype(softmax_dtype)
    logits_BxHxQxK = logits_BxHxQxK * logit_scale(c.attention_logit_scale, k)
    logits_BxHxQxK = softcap(logits_BxHxQxK, c.attn_logit_softcap)  # Gemma Team 2024, §2
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
    if c.attention_gate:  # Qiu et al. 2025 §2.2: Y ⊙ σ(X·W_θ), head-wise and elementwise (module docstring)
      out_BxQxHxK = out_BxQxHxK * jax.nn.sigmoid(proj("gate", "attn_gate")(x_q_BxQxD))
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
