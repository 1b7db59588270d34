"""models/attention.py: the logit scale (std √d_k unscaled, 1 with 1/√d_k) and the per-head statistics the model
records (logit std, entropy, max probability), against a hand computation with padding."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from tests.test_models import tiny


def _attention_stats(scale):
  """Logit std of one head, d_k = 64, queries and keys = unit-variance inputs (identity projections)."""
  from models.attention import MultiHeadAttention

  c = tiny(d_model=64, num_heads=1, attention_logit_scale=scale, use_bias=False)
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
