"""models/attention.py: the logit scale (std √d_k unscaled, 1 with 1/√d_k) and the per-head statistics the model
records (logit std, entropy, max probability), against a hand computation with padding; QK-norm's bound on the
logits."""

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from tests import tiny


def _attention_stats(scale):
  """Logit std of one head, d_k = 64, queries and keys = unit-variance inputs (identity projections)."""
  from models.attention import MultiHeadAttention

  c = tiny.model_config(d_model=64, num_heads=1, attention_logit_scale=scale, use_bias=False)
  attn = MultiHeadAttention(c, "self_attn")
  # Independent queries and keys (as cross-attention): self-attention would put |x|² on the diagonal.
  xq, xk = jax.random.normal(jax.random.key(0), (2, 4, 64, 64))
  mask = jnp.ones((4, 1, 64, 64), bool)
  params = attn.init(jax.random.key(1), xq, xk, mask)["params"]
  eye = jnp.eye(64).reshape(64, 1, 64)
  params = {**params, "query": {"kernel": eye}, "key": {"kernel": eye}}
  _, state = attn.apply({"params": params}, xq, xk, mask, mutable=["intermediates"])
  return float(state["intermediates"]["logit_std"][0][0]), float(state["intermediates"]["entropy"][0][0])


def test_attention_logit_scale():
  """Unscaled logits of unit-variance q, k with d_k = 64 have std √64 = 8; /√d_k gives 1 (Su 2021a §5;
  docs/science.md §4)."""
  std_none, ent_none = _attention_stats("none")
  std_sqrt, ent_sqrt = _attention_stats("sqrt_dk")
  std_dk, _ = _attention_stats("dk")
  assert abs(std_none - 8.0) < 0.4
  assert abs(std_sqrt - 1.0) < 0.05
  assert abs(std_dk - 1.0 / 8.0) < 0.01
  # Entropy collapses without the scale: uniform over 64 keys is ln 64 = 4.16.
  assert ent_none < 2.0 < ent_sqrt < np.log(64)


def test_attention_head_stats_equal_a_hand_computation_with_padding():
  """Per-head logit std, entropy and max probability over valid (query, key) pairs; a query with no valid key
  (padding) is left out of the averages."""
  from models.attention import _masked_head_stats

  rng = np.random.default_rng(3)
  b, h, q, k = 2, 3, 4, 5
  logits = rng.standard_normal((b, h, q, k)) * 2.0
  mask = np.tril(np.ones((q, k), bool), 1)[None, None].repeat(b, 0).repeat(h, 1)
  mask[0, :, :, 3:] = False  # batch 0: keys 3, 4 are padding
  mask[1, :, 2, :] = False  # batch 1: query 2 is padding (no valid key)
  probs = jax.nn.softmax(jnp.where(mask, logits, jnp.finfo(jnp.float32).min), axis=-1)
  std, entropy, max_prob = (
      np.asarray(x) for x in _masked_head_stats(jnp.asarray(logits, jnp.float32), probs, jnp.asarray(mask))
  )
  for head in range(h):
    valid = logits[:, head][mask[:, head]]
    ents, maxes = [], []
    for bi, qi in itertools.product(range(b), range(q)):
      keys = mask[bi, head, qi]
      if keys.any():
        p = np.exp(logits[bi, head, qi, keys] - logits[bi, head, qi, keys].max())
        p /= p.sum()
        ents.append(-(p * np.log(p)).sum())
        maxes.append(p.max())
    assert len(ents) == b * q - 1
    np.testing.assert_allclose(std[head], valid.std(), rtol=1e-5)
    np.testing.assert_allclose(entropy[head], np.mean(ents), rtol=1e-5)
    np.testing.assert_allclose(max_prob[head], np.mean(maxes), rtol=1e-5)


def _max_logit(qk_norm, norm_type, gains, weight_scale, d_k=16, tied=False):
  """Largest |logit| of one head over random inputs, with the projections scaled by `weight_scale` and (QK-norm)
  the query and key norms' gains set to `gains` = (g_q, g_k) vectors; `tied`: keys = queries (same inputs, same
  kernel), so each query meets itself."""
  from models.attention import MultiHeadAttention

  c = tiny.model_config(d_model=d_k, num_heads=1, qk_norm=qk_norm, norm_type=norm_type, use_bias=False)
  attn = MultiHeadAttention(c, "self_attn")
  xq, xk = jax.random.normal(jax.random.key(2), (2, 3, 9, d_k))
  mask = jnp.ones((3, 1, 9, 9), bool)
  params = nn.unbox(attn.init(jax.random.key(3), xq, xk, mask)["params"])
  if tied:
    xk, params = xq, {**params, "key": params["query"]}
  params = {**params, **{n: {"kernel": params[n]["kernel"] * weight_scale} for n in ("query", "key")}}
  if qk_norm:
    params = {**params, "query_norm": {"scale": gains[0]}, "key_norm": {"scale": gains[1]}}
  _, state = attn.apply({"params": params}, xq, xk, mask, mutable=["intermediates"])
  return float(state["intermediates"]["max_logit"][0][0]), params


@pytest.mark.slow
def test_qk_norm_bounds_the_logits_by_sqrt_dk_times_the_gains():
  """QK-norm (Dehghani et al. 2023 §2.1; Wortsman et al. 2023 §3.1): with q̂ = g_q ⊙ q/rms(q) (RMSNorm) or the
  centred LayerNorm, ‖q̂‖ ≤ √d_k·max|g_q|, so |q̂·k̂|/√d_k ≤ √d_k·max|g_q|·max|g_k| whatever the weights. With
  weights ×100 the bound holds under QK-norm and is exceeded a hundredfold without it; the gains are parameters of
  width d_k declared with the logical axis 'kv' and the role norm_scale."""
  d_k = 16
  g_q = jnp.linspace(0.5, 1.5, d_k)
  g_k = jnp.linspace(2.0, 0.2, d_k)
  bound = np.sqrt(d_k) * 1.5 * 2.0
  for norm_type in ("rmsnorm", "layernorm"):
    largest, _ = _max_logit(True, norm_type, (g_q, g_k), 100.0, d_k)
    assert largest <= bound * (1 + 1e-5), (norm_type, largest, bound)
  # Gains 1: the bound is √d_k = 4, reached where a query meets itself (q̂ = k̂, ‖q̂‖² = d_k).
  ones = (jnp.ones(d_k), jnp.ones(d_k))
  assert _max_logit(True, "rmsnorm", ones, 100.0, d_k, tied=True)[0] == pytest.approx(np.sqrt(d_k), rel=1e-5)
  unbounded, _ = _max_logit(False, "rmsnorm", None, 100.0, d_k)
  assert unbounded > 100 * bound
  c = tiny.model_config(d_model=d_k, num_heads=1, qk_norm=True, norm_type="rmsnorm")
  params = models.get_model(c).init(jax.random.key(0), tiny.batch())["params"]
  roles, axes = models.param_roles(c, params), models.logical_axes(c)
  q_norm = roles["encoder"]["layer_0"]["self_attn"]["query_norm"]["scale"]
  assert (q_norm.role, q_norm.sublayer) == ("norm_scale", "self_attn")
  assert tuple(axes["decoder"]["layer_0"]["cross_attn"]["key_norm"]["scale"]) == ("kv",)


def test_qk_norm_needs_a_norm():
  with pytest.raises(ValueError, match=r"config.model.qk_norm=True contradicts config.model.norm_type='none'"):
    tiny.model_config(qk_norm=True, norm_type="none", norm_position="none")
