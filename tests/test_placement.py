"""models/placement.py: the 2025 norm placements against their definitions on a forward pass at init — Peri-LN (the
`sandwich` placement under its 2025 name: a norm on every sublayer's output, the same model parameter for
parameter), layer-norm scaling's 1/√l at layer l, Mix-LN's Post-LN-then-Pre-LN split, HybridNorm's QKV-norm and
Post-LN MLP, OLMo 2's reordered norm and where it differs from Peri-LN — and their config errors."""

import flax.linen as nn
import jax
import numpy as np
import pytest

import models
from models.placement import mix_ln_post_layers, sublayer_placement
from tests import tiny

LAYERS = 4


def _run(**kw):
  c = tiny.model_config(num_encoder_layers=LAYERS, num_decoder_layers=LAYERS, **kw)
  model = models.get_model(c)
  variables = model.init(jax.random.key(0), tiny.batch())
  _, state = model.apply(variables, tiny.batch(), mutable=["intermediates"], capture_intermediates=True)
  return c, variables["params"], state["intermediates"]


def _layernorm(x, eps=1e-6):
  x = np.asarray(x, np.float64)
  mu = x.mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _valid(stack):
  """Positions of the batch that are not padding (padding rows carry no constraint)."""
  b = tiny.batch()
  return np.asarray(b["inputs"] > 0) if stack == "encoder" else np.asarray(b["targets"] > 0)


def test_peri_is_sandwich_with_a_norm_on_every_sublayer_output():
  """Kim et al. 2025 §3: x_{l+1} = x_l + Norm(F(Norm(x_l))). Every sublayer's branch is a LayerNorm output (gain 1,
  bias 0 at init: per position mean 0, variance 1) of F applied to the normalized input, the merge adds it, the
  stack ends with a final norm; 'peri' and 'sandwich' are the same model, parameter for parameter."""
  c, params, inter = _run(norm_position="peri")
  for stack in ("encoder", "decoder"):
    valid = _valid(stack)
    for i in range(LAYERS):
      layer = inter[stack][f"layer_{i}"]
      for sub in ("self_attn", "mlp") + (("cross_attn",) if stack == "decoder" else ()):
        branch = np.asarray(layer[f"{sub}_branch"][0])[valid]
        np.testing.assert_allclose(branch.mean(-1), 0.0, atol=1e-5)
        np.testing.assert_allclose(branch.var(-1), 1.0, rtol=1e-3)
        x_in = layer[f"{sub}_residual_in"][0]
        np.testing.assert_allclose(layer[f"{sub}_norm"]["__call__"][0], _layernorm(x_in), rtol=1e-4, atol=1e-4)
        out = layer[f"{sub}_residual_out"][0]
        np.testing.assert_allclose(out, x_in + layer[f"{sub}_branch"][0], rtol=1e-6, atol=1e-6)
    assert "final_norm" in params[stack]
  sandwich = models.get_model(
      tiny.model_config(num_encoder_layers=LAYERS, num_decoder_layers=LAYERS, norm_position="sandwich")
  )
  peri = models.get_model(c)
  np.testing.assert_array_equal(
      peri.apply({"params": params}, tiny.batch()), sandwich.apply({"params": params}, tiny.batch())
  )


@pytest.mark.parametrize("norm_position", ["pre", "peri"])
def test_layer_norm_scaling_multiplies_the_input_norm_by_one_over_sqrt_l(norm_position):
  """Sun et al. 2025, Eq. 8: the MLP branch of layer l (1-based) is F(LN(x)/√l). With a linear MLP (identity
  activation, no biases) F(y) = y·W_in·W_out, so each layer's recorded branch equals the hand computation from its
  recorded input; without the rule the factor is 1 (l = 3: a 1/√3 change)."""
  kw = dict(norm_position=norm_position, activation="identity", use_bias=False, arch="decoder")
  for scaling in (True, False):
    _, params, inter = _run(layer_norm_scaling=scaling, **kw)
    for i in range(LAYERS):
      layer, p = inter["decoder"][f"layer_{i}"], params["decoder"][f"layer_{i}"]
      hand = _layernorm(layer["mlp_residual_in"][0]) / (np.sqrt(i + 1) if scaling else 1.0)
      hand = hand @ np.asarray(p["mlp"]["wi"]["kernel"], np.float64) @ np.asarray(p["mlp"]["wo"]["kernel"], np.float64)
      if norm_position == "peri":
        hand = _layernorm(hand)  # the output norm, which the scale leaves alone
        if i > 0:
          assert not np.allclose(hand, 0.0)
      np.testing.assert_allclose(layer["mlp_branch"][0], hand, rtol=2e-4, atol=2e-5)


def test_mix_ln_is_post_ln_in_the_first_quarter_and_pre_ln_after():
  """Li et al. 2025 §4: the first ⌊α·L⌋ layers Post-LN (their output is a LayerNorm output), the others Pre-LN
  (output = input + branch; the branch's input is normalized), a final norm after the last (Pre-LN) layer."""
  for ratio, post in ((0.25, 1), (0.5, 2), (0.0, 0)):
    c, params, inter = _run(norm_position="mix", mix_ln_ratio=ratio, arch="decoder")
    assert mix_ln_post_layers(c, "decoder") == post
    valid = _valid("decoder")
    for i in range(LAYERS):
      layer = inter["decoder"][f"layer_{i}"]
      x_in, out, branch = (layer[f"mlp_{k}"][0] for k in ("residual_in", "residual_out", "branch"))
      if i < post:
        assert sublayer_placement(c, "decoder", i, "mlp") == "post"
        np.testing.assert_allclose(out, _layernorm(np.asarray(x_in) + np.asarray(branch)), rtol=1e-4, atol=1e-4)
      else:
        assert sublayer_placement(c, "decoder", i, "mlp") == "pre"
        np.testing.assert_allclose(out, x_in + branch, rtol=1e-6, atol=1e-6)
        assert not np.allclose(np.asarray(out)[valid].var(-1), 1.0, rtol=0.05)  # the stream is not renormalized
    assert "final_norm" in params["decoder"]
  _, params, _ = _run(norm_position="mix", mix_ln_ratio=1.0, arch="decoder")
  assert "final_norm" not in params["decoder"]  # all Post-LN: the last layer already normalizes


def test_hybrid_norm_is_qkv_norm_in_attention_and_post_ln_in_the_mlp():
  """Zhuo et al. 2025 §3: attention x + Attn(x) with Q, K and V each normalized per head (LayerNorm over d_k: mean
  0, variance 1 at init), no norm on the stream; MLP Norm(x + FFN(x)); no final norm."""
  c, params, inter = _run(norm_position="hybrid", arch="decoder", d_model=16, num_heads=2)
  for i in range(LAYERS):
    layer = inter["decoder"][f"layer_{i}"]
    attn = layer["self_attn"]
    for name in ("query_norm", "key_norm", "value_norm"):
      y = np.asarray(attn[name]["__call__"][0])
      np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)
      np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-3)
    s_in, s_out, s_branch = (layer[f"self_attn_{k}"][0] for k in ("residual_in", "residual_out", "branch"))
    np.testing.assert_allclose(s_out, s_in + s_branch, rtol=1e-6, atol=1e-6)
    m_in, m_out, m_branch = (np.asarray(layer[f"mlp_{k}"][0]) for k in ("residual_in", "residual_out", "branch"))
    np.testing.assert_allclose(m_out, _layernorm(m_in + m_branch), rtol=1e-4, atol=1e-4)
    assert "self_attn_norm" not in params["decoder"][f"layer_{i}"]
  assert "final_norm" not in params["decoder"]
  roles = models.param_roles(c, params)["decoder"]["layer_0"]["self_attn"]["value_norm"]["scale"]
  assert (roles.role, roles.sublayer) == ("norm_scale", "self_attn")


def test_reordered_norm_is_x_plus_norm_of_f_of_x_with_a_final_norm():
  """OLMo Team 2025 ("2 OLMo 2 Furious", reordered norm): x_{l+1} = x_l + Norm(F(x_l)) — each branch is a LayerNorm
  output (mean 0, variance 1 at init) of F applied to the raw stream, which no norm rescales; one final norm."""
  c, params, inter = _run(norm_position="reordered", arch="decoder")
  valid = _valid("decoder")
  for i in range(LAYERS):
    layer, p = inter["decoder"][f"layer_{i}"], params["decoder"][f"layer_{i}"]
    for sub in ("self_attn", "mlp"):
      x_in, out, branch = (np.asarray(layer[f"{sub}_{k}"][0]) for k in ("residual_in", "residual_out", "branch"))
      np.testing.assert_allclose(branch[valid].mean(-1), 0.0, atol=1e-5)
      np.testing.assert_allclose(branch[valid].var(-1), 1.0, rtol=1e-3)
      np.testing.assert_allclose(out, x_in + branch, rtol=1e-6, atol=1e-6)
      assert f"{sub}_norm" not in p and f"{sub}_post_norm" in p
    w = [np.asarray(p["mlp"][n]["kernel"], np.float64) for n in ("wi", "wo")]
    f = np.maximum(np.asarray(layer["mlp_residual_in"][0], np.float64) @ w[0] + np.asarray(p["mlp"]["wi"]["bias"]), 0)
    hand = _layernorm(f @ w[1] + np.asarray(p["mlp"]["wo"]["bias"]))  # Norm(F(x)), F on the unnormalized x
    np.testing.assert_allclose(layer["mlp_branch"][0], hand, rtol=2e-4, atol=2e-4)
  assert "final_norm" in params["decoder"]


def test_reordered_norm_differs_from_peri_ln_exactly_where_the_input_is_not_normalized():
  """Peri-LN's branch Norm(F(Norm(x))) is blind to the scale of x; the reordered branch Norm(F(x)) is not. With the
  same F (shared parameters) the two branches agree on a normalized input and differ on 3·x."""
  from models.transformer import Layer

  kw = dict(arch="decoder", d_model=16, num_heads=2, d_ff=32)
  peri, reordered = (Layer(tiny.model_config(norm_position=n, **kw), "decoder", 0) for n in ("peri", "reordered"))
  x = np.asarray(jax.random.normal(jax.random.key(0), (2, 6, 16)))
  x = jax.numpy.asarray(_layernorm(x), jax.numpy.float32)  # rows with mean 0, variance 1: Norm(x) = x at init
  mask = jax.numpy.ones((2, 1, 6, 6), bool)
  params = nn.unbox(peri.init(jax.random.key(1), x, mask))["params"]
  shared = {k: v for k, v in params.items() if k not in ("self_attn_norm", "mlp_norm")}
  assert set(shared) == set(nn.unbox(reordered.init(jax.random.key(1), x, mask))["params"])

  def branch(layer, p, h):
    _, state = layer.apply({"params": p}, h, mask, mutable=["intermediates"])
    return np.asarray(state["intermediates"]["self_attn_branch"][0])

  np.testing.assert_allclose(branch(reordered, shared, x), branch(peri, params, x), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(branch(peri, params, 3 * x), branch(peri, params, x), rtol=1e-4, atol=1e-4)
  assert np.abs(branch(reordered, shared, 3 * x) - branch(peri, params, 3 * x)).max() > 0.1


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"norm_position": "post", "layer_norm_scaling": True}, r"config.model.layer_norm_scaling=True contradicts"),
        ({"norm_position": "hybrid", "layer_norm_scaling": True}, r"norm_position='hybrid'"),
        ({"norm_position": "mix", "mix_ln_ratio": 1.5}, r"config.model.mix_ln_ratio=1.5 is invalid"),
        (
            {"norm_position": "peri-ln"},
            r"valid: \['post', 'pre', 'sandwich', 'peri', 'mix', 'hybrid', 'reordered', 'none'\]",
        ),
    ],
)
def test_bad_placements_are_named(kw, match):
  with pytest.raises(ValueError, match=match):
    tiny.model_config(**kw)


def test_every_norm_position_maps_to_a_placement():
  """`sublayer_placement` of every value of model.norm_position, for layer 0 of 4 (mix ratio 0.25: Post-LN)."""
  expected = {"post": "post", "pre": "pre", "sandwich": "sandwich", "peri": "sandwich", "mix": "post", "none": "none"}
  expected["reordered"] = "reordered"
  for position, placement in expected.items():
    kw = {"norm_type": "none"} if position == "none" else {}
    cfg = tiny.model_config(num_decoder_layers=LAYERS, norm_position=position, **kw)
    assert sublayer_placement(cfg, "decoder", 0, "mlp") == placement
  hybrid = tiny.model_config(norm_position="hybrid")
  assert [sublayer_placement(hybrid, "decoder", 0, s) for s in ("self_attn", "cross_attn", "mlp")] == [
      "none",
      "none",
      "post",
  ]
