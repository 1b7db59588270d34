"""train/qk_clip.py and the attention's S_max: the measured max logit against a hand computation, the clipped head's
next logit at τ and every other value bit-identical, the train step = update then clip, the metrics, the config."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import models
from configs import default
from models.attention import MAX_LOGIT_COLLECTION, MultiHeadAttention, logit_scale
from tests import tiny
from train import config as config_lib
from train import qk_clip, step
from train.state import TrainState

LAYER = "decoder/layer_0/self_attn"  # its input does not depend on its own W_q, W_k: the next logit is exactly τ·…


def _sown(model, params, b):
  _, sown = model.apply({"params": params}, b, mutable=[MAX_LOGIT_COLLECTION])
  return qk_clip.max_logits_by_module(sown[MAX_LOGIT_COLLECTION])


def test_attention_records_the_signed_max_logit_over_valid_pairs():
  """S_max per head = max over batch, queries and unmasked keys of (x·W_q + b_q)·(x·W_k + b_k)/√d_k, by hand."""
  c = tiny.model_config(d_model=8, num_heads=2, use_bias=True)
  attn = MultiHeadAttention(c, "self_attn")
  x = jax.random.normal(jax.random.key(0), (2, 5, 8))
  mask = jnp.tril(jnp.ones((5, 5), bool))[None, None].repeat(2, 0)
  params = nn.unbox(attn.init(jax.random.key(1), x, x, mask)["params"])
  params = jax.tree.map(lambda p: p + 0.3, params)  # non-zero biases
  _, sown = attn.apply({"params": params}, x, x, mask, mutable=[MAX_LOGIT_COLLECTION])
  got = np.asarray(sown[MAX_LOGIT_COLLECTION]["max_logit"][0])
  p = jax.tree.map(np.asarray, params)
  q = np.einsum("bld,dhk->bhlk", np.asarray(x), p["query"]["kernel"]) + p["query"]["bias"][None, :, None]
  k = np.einsum("bld,dhk->bhlk", np.asarray(x), p["key"]["kernel"]) + p["key"]["bias"][None, :, None]
  logits = np.einsum("bhqd,bhsd->bhqs", q, k) * logit_scale(c.attention_logit_scale, c.qkv_head_dim)
  want = np.where(np.asarray(mask), logits, -np.inf).max(axis=(0, 2, 3))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  assert MAX_LOGIT_COLLECTION not in attn.apply({"params": params}, x, x, mask, mutable=["intermediates"])[1]


def _hand_made():
  """The tiny encoder-decoder with biases, W_q of head 0 of `LAYER` multiplied by 20: that head's S_max is far above
  every other's; τ sits between them."""
  model = models.get_model(tiny.model_config(use_bias=True, dropout_rate=0.0))
  b = tiny.batch()
  params = model.init(jax.random.key(0), b)["params"]
  kernel = params["decoder"]["layer_0"]["self_attn"]["query"]["kernel"]
  params["decoder"]["layer_0"]["self_attn"]["query"]["kernel"] = kernel.at[:, 0].multiply(20.0)
  s = _sown(model, params, b)
  others = max(float(v.max()) for m, v in s.items() if m != LAYER)
  s0, s1 = float(s[LAYER][0]), float(s[LAYER][1])
  assert s0 > 2.0 * max(others, s1) > 0  # the hand-made case holds
  return model, params, b, s, 0.5 * (s0 + max(others, s1))


@pytest.mark.slow
def test_the_clipped_heads_next_logit_is_tau_and_everything_else_is_bit_identical():
  """Kimi Team 2025, Alg. 1: W_q^0, W_k^0 (and their biases) × √(τ/S_max^0): the same batch's S_max^0 is τ (to float32
  rounding, never above it by more); head 1's and every other layer's parameters are bit-identical."""
  model, params, b, s, tau = _hand_made()
  targets = qk_clip.targets(model)
  assert set(targets) >= {f"{LAYER}/query/kernel", f"{LAYER}/query/bias", f"{LAYER}/key/kernel", f"{LAYER}/key/bias"}
  assert all(r.endswith(("/query/kernel", "/query/bias", "/key/kernel", "/key/bias")) for r in targets)
  clipped = qk_clip.clip(params, s, tau, targets)
  after = _sown(model, clipped, b)
  assert float(after[LAYER][0]) <= tau * (1 + 1e-5)
  np.testing.assert_allclose(float(after[LAYER][0]), tau, rtol=1e-5)
  np.testing.assert_array_equal(after[LAYER][1], s[LAYER][1])
  factor = np.sqrt(tau / float(s[LAYER][0]))
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    name = "/".join(k.key for k in path)
    new = np.asarray(_get(clipped, path))
    if name.startswith((f"{LAYER}/query/", f"{LAYER}/key/")):
      head = (slice(None),) * (leaf.ndim - 2)
      np.testing.assert_allclose(new[head + (0,)], np.asarray(leaf)[head + (0,)] * factor, rtol=1e-6)
      np.testing.assert_array_equal(new[head + (1,)], np.asarray(leaf)[head + (1,)])
    else:
      np.testing.assert_array_equal(new, np.asarray(leaf))
  for a, c in zip(jax.tree.leaves(params), jax.tree.leaves(qk_clip.clip(params, s, 10 * float(s[LAYER][0]), targets))):
    np.testing.assert_array_equal(a, c)  # τ above every S_max: nothing changes


def _get(tree, path):
  for k in path:
    tree = tree[k.key]
  return tree


@pytest.mark.slow
def test_train_step_clips_after_the_update_and_logs_the_measured_max_logit():
  """One SGD step with qk_clip = τ: the metric `max_logits` is S_max at the step's parameters, the new parameters are
  the unclipped step's passed through `clip` (bit for bit), and the next step's S_max^0 is within the update's size
  of τ; at qk_clip = 0 the step records nothing."""
  model, params, b, s, tau = _hand_made()
  tx = optax.sgd(1e-6)
  state = TrainState(step=jnp.asarray(0), params=params, opt_state=tx.init(params), variables={}, rng=jax.random.key(0))
  plain, m0 = jax.jit(step.make_train_step(model, tx))(state, b)
  clipped, m = jax.jit(step.make_train_step(model, tx, qk_clip=tau))(state, b)
  assert "max_logits" not in m0
  for module, v in s.items():
    np.testing.assert_allclose(m["max_logits"][module], v, rtol=1e-6)
  want = qk_clip.clip(plain.params, m["max_logits"], tau, qk_clip.targets(model))
  for a, c in zip(jax.tree.leaves(want), jax.tree.leaves(clipped.params)):
    np.testing.assert_array_equal(a, c)
  np.testing.assert_allclose(float(_sown(model, clipped.params, b)[LAYER][0]), tau, rtol=1e-4)
  logged = qk_clip.scalars(m["max_logits"], tau)
  assert logged["qk_clipped_heads"] == 1.0
  assert logged["max_logit"] == pytest.approx(float(s[LAYER][0]), rel=1e-6)
  assert logged[f"max_logit/{LAYER}"] == logged["max_logit"]


def test_scalars_and_config_errors():
  logged = qk_clip.scalars({"a": np.array([1.0, 5.0]), "b": np.array([-2.0, 3.0])}, 2.5)
  assert logged == {"max_logit": 5.0, "max_logit/a": 5.0, "max_logit/b": 3.0, "qk_clipped_heads": 2.0}
  assert "qk_clipped_heads" not in qk_clip.scalars({"a": np.array([1.0])}, 0.0)
  config = default.get_config()
  config.optim.qk_clip, config.model.qk_norm = 100.0, True
  with pytest.raises(ValueError, match=r"config.optim.qk_clip=100.0 contradicts config.model.qk_norm=True"):
    config_lib.resolve(config)
  config.model.qk_norm, config.model.norm_position = False, "hybrid"
  with pytest.raises(ValueError, match=r"config.optim.qk_clip=100.0 contradicts config.model.norm_position='hybrid'"):
    config_lib.resolve(config)
  config.model.norm_position, config.model.attn_logit_softcap = "pre", 50.0
  with pytest.raises(ValueError, match=r"config.optim.qk_clip=100.0 contradicts config.model.attn_logit_softcap=50.0"):
    config_lib.resolve(config)
  config.model.attn_logit_softcap, config.model.num_heads, config.model.num_kv_heads = 0.0, 4, 2
  with pytest.raises(ValueError, match=r"config.optim.qk_clip=100.0 contradicts config.model.num_kv_heads=2"):
    config_lib.resolve(config)
  config.model.num_kv_heads = 4  # as many groups as heads: multi-head attention, clipped per head
  config_lib.resolve(config)
  config.model.num_kv_heads, config.optim.qk_clip = None, -1.0
  with pytest.raises(ValueError, match=r"config.optim.qk_clip=-1.0 is invalid"):
    config_lib.resolve(config)
