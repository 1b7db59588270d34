"""The decoder-LM blocks (models/blocks.py, rope.py, mlp.py, attention.py) against their defining equations on
forward passes: RoPE's relative-position invariance (Su et al. 2021, Eq. 16, 34), GQA = MHA with repeated key/value
heads (Ainslie et al. 2023), SwiGLU / GeGLU on hand-made inputs (Shazeer 2020, Eq. 6) and LLaMA's hidden width,
soft-capping's bound (Gemma Team 2024), the attention gate (Qiu et al. 2025) against an independent computation and
at init, the new roles and fans, and the config errors."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from configs import default
from models import ModelConfig, get_model, param_roles
from models.attention import MultiHeadAttention, softcap
from models.blocks import gated_hidden_width
from models.mlp import MLP
from models.rope import apply_rope
from tests import tiny


def _lm(**kw):
  return tiny.model_config(arch="decoder", num_decoder_layers=2, d_model=16, num_heads=4, d_ff=16, **kw)


# --- RoPE ---


def test_rope_is_su_et_als_rotation_of_complex_pairs():
  """Eq. 34 written as complex numbers: (x_{2i-1} + i·x_{2i})·e^{i·m·θ_i}, θ_i = 10000^{-2(i-1)/d}."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((2, 5, 3, 8))
  pos = rng.integers(0, 50, (2, 5))
  theta = 10000.0 ** (-np.arange(4) * 2 / 8)
  z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * pos[:, :, None, None] * theta)
  want = np.stack([z.real, z.imag], -1).reshape(x.shape)
  got = apply_rope(jnp.asarray(x, jnp.float32), jnp.asarray(pos), 10000.0)
  np.testing.assert_allclose(got, want, atol=2e-5)
  np.testing.assert_allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)  # a rotation


def test_rope_logits_depend_only_on_relative_position():
  """q_m·k_n after RoPE is a function of m − n (Su et al. 2021, Eq. 16): shifting both positions by s leaves every
  logit unchanged, while changing the offset m − n changes it."""
  rng = np.random.default_rng(1)
  q, k = (jnp.asarray(rng.standard_normal((1, 1, 2, 16)), jnp.float32) for _ in range(2))
  logit = lambda m, n: np.asarray(
      jnp.einsum("bqhd,bkhd->hqk", apply_rope(q, jnp.array([[m]]), 10000.0), apply_rope(k, jnp.array([[n]]), 10000.0))
  )
  for m, n in ((3, 1), (0, 7), (20, 20)):
    for s in (1, 5, 113):
      np.testing.assert_allclose(logit(m + s, n + s), logit(m, n), rtol=1e-4, atol=1e-4)
  assert np.abs(logit(3, 1) - logit(3, 0)).max() > 1e-2


def test_rope_model_is_invariant_to_shifting_every_position():
  """A causal LM whose only position signal is RoPE gives the same logits when all positions are shifted (the
  packing key `targets_position`); the same model with learned positions does not."""
  b = tiny.batch()
  shifted = {**b, "targets_position": jnp.broadcast_to(jnp.arange(4) + 37, (2, 4))}
  for position, invariant in (("rope", True), ("learned", False)):
    model = get_model(_lm(position=position, max_len=64, norm_position="pre"))
    params = model.init(jax.random.key(0), b)["params"]
    a, s = (np.asarray(model.apply({"params": params}, x)) for x in (b, shifted))
    if invariant:
      np.testing.assert_allclose(s, a, rtol=1e-4, atol=1e-5)
      assert "pos_embedding" not in params["decoder"]
    else:
      assert np.abs(s - a).max() > 1e-3


def test_rope_rotates_queries_and_keys_not_values():
  """Hand computation of one RoPE self-attention head: softmax(R_m q·R_n k/√d_k) over unrotated values."""
  c = tiny.model_config(d_model=8, num_heads=1, use_bias=False, position="rope")
  attn = MultiHeadAttention(c, "self_attn")
  x = jax.random.normal(jax.random.key(0), (1, 5, 8))
  pos = jnp.arange(5)[None] + 2
  mask = jnp.ones((1, 1, 5, 5), bool)
  params = nn.unbox(attn.init(jax.random.key(1), x, x, mask, rope_positions=pos))["params"]
  got = attn.apply({"params": params}, x, x, mask, rope_positions=pos)
  w = {n: np.asarray(params[n]["kernel"], np.float64).reshape(8, -1) for n in ("query", "key", "value")}
  xn = np.asarray(x[0], np.float64)
  q, k, v = xn @ w["query"], xn @ w["key"], xn @ w["value"]
  rot = lambda t: np.asarray(apply_rope(jnp.asarray(t[None, :, None], jnp.float32), pos, 10000.0))[0, :, 0]
  logits = rot(q) @ rot(k).T / math.sqrt(8)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  y = (p / p.sum(-1, keepdims=True)) @ v
  want = y @ np.asarray(params["out"]["kernel"], np.float64).reshape(8, 8)
  np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)


# --- grouped-query attention ---


def test_gqa_with_groups_equal_to_heads_is_mha_parameter_for_parameter():
  mha, gqa = (get_model(_lm(num_kv_heads=g)) for g in (None, 4))
  params = mha.init(jax.random.key(0), tiny.batch())["params"]
  assert jax.tree.structure(gqa.init(jax.random.key(0), tiny.batch())["params"]) == jax.tree.structure(params)
  np.testing.assert_array_equal(
      gqa.apply({"params": params}, tiny.batch()), mha.apply({"params": params}, tiny.batch())
  )


@pytest.mark.parametrize("groups", [1, 2])
def test_gqa_equals_mha_whose_key_value_heads_are_repeated(groups):
  """Ainslie et al. 2023 §2.2: query head j reads key/value head ⌊j·G/H⌋; MHA with each of the G heads' W_k, W_v
  (and biases) copied H/G times computes the same function (G = 1: multi-query attention)."""
  gqa, mha = get_model(_lm(num_kv_heads=groups)), get_model(_lm())
  params = gqa.init(jax.random.key(0), tiny.batch())["params"]
  layer = params["decoder"]["layer_0"]["self_attn"]
  assert layer["key"]["kernel"].shape == (16, groups, 4) and layer["query"]["kernel"].shape == (16, 4, 4)
  rep = lambda t: jnp.repeat(t, 4 // groups, axis=-2 if t.ndim == 3 else 0)
  repeated = jax.tree_util.tree_map_with_path(
      lambda path, t: rep(t) if any(getattr(k, "key", None) in ("key", "value") for k in path) else t, params
  )
  np.testing.assert_allclose(
      gqa.apply({"params": params}, tiny.batch()), mha.apply({"params": repeated}, tiny.batch()), rtol=1e-5, atol=1e-6
  )


# --- gated MLPs ---


def _silu(z):
  return z / (1.0 + np.exp(-z))


def _gelu(z):
  return 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


@pytest.mark.parametrize("kind,act", [("swiglu", _silu), ("geglu", _gelu), ("plain", lambda z: np.maximum(z, 0))])
def test_mlp_equations_on_hand_made_inputs(kind, act):
  """Shazeer 2020, Eq. 6: FFN_SwiGLU(x) = (Swish₁(xW) ⊙ xV)W₂, FFN_GEGLU(x) = (GELU(xW) ⊙ xV)W₂, with biases;
  'plain' is relu(xW₁)W₂ (Vaswani et al. 2017, Eq. 2)."""
  c = tiny.model_config(d_model=3, num_heads=1, d_ff=2, mlp=kind)
  x = np.array([[[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]])
  W = np.array([[0.5, -1.0], [0.25, 0.5], [-1.5, 2.0]])
  V = np.array([[1.0, 0.0], [-0.5, 0.75], [2.0, 1.0]])
  W2 = np.array([[1.0, -1.0, 0.5], [0.5, 2.0, -0.25]])
  bW, bV, b2 = np.array([0.1, -0.2]), np.array([0.3, 0.0]), np.array([0.0, 0.5, -0.5])
  params = {"wi": {"kernel": V, "bias": bV}, "wo": {"kernel": W2, "bias": b2}}
  if kind == "plain":
    want = act(x @ V + bV) @ W2 + b2
  else:
    params["wg"] = {"kernel": W, "bias": bW}
    want = (act(x @ W + bW) * (x @ V + bV)) @ W2 + b2
  got = MLP(c).apply({"params": jax.tree.map(jnp.float32, params)}, jnp.asarray(x, jnp.float32))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gated_hidden_width_is_llamas_rounded_eight_thirds():
  """LLaMA-7B: d = 4096, multiple_of = 256 gives 11008 (Touvron et al. 2023's released width); an unset d_ff of a
  gated MLP follows the rule, a set one is kept, a plain MLP keeps the preset's 4d."""
  assert gated_hidden_width(4096, 256) == 11008
  assert gated_hidden_width(128, 8) == 344  # 8/3·128 = 341.3 → 344
  config = default.get_config()
  config.model.mlp = "swiglu"
  assert ModelConfig.from_config(config.model).d_ff == 344  # preset 'mini': d = 128
  config.model.d_ff = 300
  assert ModelConfig.from_config(config.model).d_ff == 300
  assert ModelConfig.from_config(default.get_config().model).d_ff == 512


# --- soft-capping ---


def test_softcap_is_c_tanh_z_over_c_and_bounds_both_logits():
  """Gemma Team 2024 §2: c·tanh(z/c); |z| < c whatever the weights, ≈ z where |z| ≪ c; 0 = off, bit for bit."""
  z = jnp.array([-1e4, -3.0, -1e-3, 0.0, 1e-3, 2.5, 1e4])
  np.testing.assert_allclose(softcap(z, 5.0), 5.0 * np.tanh(np.asarray(z) / 5.0), rtol=1e-6)
  np.testing.assert_allclose(softcap(z, 5.0)[2:5], z[2:5], rtol=1e-6)
  assert softcap(z, 0.0) is z
  c = _lm(attn_logit_softcap=2.0, final_logit_softcap=1.5, attention_logit_scale="none")
  model = get_model(c)
  params = jax.tree.map(lambda p: 30.0 * p, model.init(jax.random.key(0), tiny.batch())["params"])  # huge logits
  logits, state = model.apply({"params": params}, tiny.batch(), mutable=["intermediates"])
  assert 1.4 < float(jnp.abs(logits).max()) <= 1.5  # < c in exact arithmetic; float32's tanh saturates at 1
  decoder = state["intermediates"]["decoder"]
  max_logit = max(float(decoder[f"layer_{i}"]["self_attn"]["max_logit"][0].max()) for i in range(2))
  assert 1.9 < max_logit <= 2.0
  uncapped = get_model(_lm(attention_logit_scale="none"))
  _, state = uncapped.apply({"params": params}, tiny.batch(), mutable=["intermediates"])
  assert float(state["intermediates"]["decoder"]["layer_0"]["self_attn"]["max_logit"][0].max()) > 10.0


# --- gated attention ---


def test_attention_gate_is_sigmoid_of_the_input_times_w_theta_per_head_and_coordinate():
  """Qiu et al. 2025 §2.2: Y' = Y ⊙ σ(X·W_θ + b) before W_o, computed here from scratch on one query/key set."""
  c = tiny.model_config(d_model=8, num_heads=2, attention_gate=True)
  attn = MultiHeadAttention(c, "cross_attn")
  xq, xk = jax.random.normal(jax.random.key(0), (2, 1, 3, 8))
  mask = jnp.ones((1, 1, 3, 3), bool)
  params = nn.unbox(attn.init(jax.random.key(1), xq, xk, mask))["params"]
  params = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(2), p.shape), params)  # nonzero biases
  got = attn.apply({"params": params}, xq, xk, mask)
  P = jax.tree.map(lambda p: np.asarray(p, np.float64), params)
  proj = lambda x, n: np.einsum("qd,dhk->qhk", np.asarray(x[0], np.float64), P[n]["kernel"]) + P[n]["bias"]
  q, k, v, gate = proj(xq, "query"), proj(xk, "key"), proj(xk, "value"), proj(xq, "gate")
  logits = np.einsum("qhd,khd->hqk", q, k) / 2.0
  p = np.exp(logits - logits.max(-1, keepdims=True))
  y = np.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), v) / (1.0 + np.exp(-gate))
  want = np.einsum("qhk,hkd->qd", y, P["out"]["kernel"]) + P["out"]["bias"]
  np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)


def test_attention_gate_at_init_halves_each_head_output():
  """The gate at init is σ(X·W_θ), centred on σ(0) = 1/2 (models/attention.py): with W_θ = 0 the gated output is
  exactly half the ungated one before W_o (no bias: W_o linear); under the xavier scheme the gate's mean is 1/2."""
  import init

  c = _lm(attention_gate=True, use_bias=False, norm_position="pre")
  gated, plain = get_model(c), get_model(_lm(use_bias=False, norm_position="pre"))
  variables = init.init_params({"scheme": "xavier"}, gated, jax.random.key(0), tiny.batch())
  params = variables["params"]
  zero_gate = jax.tree_util.tree_map_with_path(
      lambda path, p: jnp.zeros_like(p) if any(getattr(k, "key", None) == "gate" for k in path) else p, params
  )
  no_gate = jax.tree_util.tree_map_with_path(lambda path, p: p, zero_gate)
  for i in range(2):
    no_gate["decoder"][f"layer_{i}"]["self_attn"].pop("gate")
  b = tiny.batch()
  _, g = gated.apply({"params": zero_gate}, b, mutable=["intermediates"])
  _, u = plain.apply({"params": no_gate}, b, mutable=["intermediates"])
  branch = lambda s: np.asarray(s["intermediates"]["decoder"]["layer_0"]["self_attn_branch"][0])
  np.testing.assert_allclose(branch(g), 0.5 * branch(u), rtol=1e-5, atol=1e-7)
  # At init (xavier's W_θ): σ(X·W_θ) over the normalized input of layer 0 has mean 1/2.
  x = jax.random.normal(jax.random.key(3), (4096, 16))
  kernel = params["decoder"]["layer_0"]["self_attn"]["gate"]["kernel"].reshape(16, -1)
  gate = np.asarray(jax.nn.sigmoid(x @ kernel))
  assert abs(gate.mean() - 0.5) < 0.01 and 0.05 < gate.std() < 0.25


# --- roles and config errors ---


def test_gate_matrices_declare_their_roles_and_fans():
  c = _lm(mlp="swiglu", attention_gate=True, num_kv_heads=2, head_dim=3)
  roles = param_roles(c)["decoder"]["layer_0"]
  gate, wg, wi = roles["self_attn"]["gate"]["kernel"], roles["mlp"]["wg"]["kernel"], roles["mlp"]["wi"]["kernel"]
  assert (gate.role, gate.sublayer, gate.fan_in, gate.fan_out) == ("attn_gate", "self_attn", 16, 12)
  assert (wg.role, wg.fan_in, wg.fan_out) == ("mlp_gate", 16, 16) and wi.role == "mlp_in"
  k = roles["self_attn"]["key"]["kernel"]
  assert (k.role, k.fan_in, k.fan_out) == ("attn_k", 16, 6)  # G·d_k
  assert {"attn_gate", "mlp_gate"} <= set(models.ROLES)
  lr = models.lr_multipliers(None, _lm(mlp="swiglu", parameterization="mup", attention_logit_scale="dk"))
  assert lr["decoder"]["layer_0"]["mlp"]["wg"]["kernel"] == pytest.approx(32 / 16)  # hidden: 1/width_ratio


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("mlp", "glu", r"config.model.mlp='glu' is invalid; valid: \['plain', 'swiglu', 'geglu'\]"),
        ("num_kv_heads", 3, r"config.model.num_kv_heads=3 contradicts config.model.num_heads=4.*\[1, 2, 4\]"),
        ("num_kv_heads", 0, r"config.model.num_kv_heads=0 is invalid; valid: a positive integer"),
        ("attn_logit_softcap", -1.0, r"config.model.attn_logit_softcap=-1.0 is invalid"),
        ("final_logit_softcap", float("inf"), r"config.model.final_logit_softcap=inf is invalid"),
        ("rope_base", 0.0, r"config.model.rope_base=0.0 is invalid"),
        ("mlp_multiple_of", 0, r"config.model.mlp_multiple_of=0 is invalid"),
        ("attention_gate", 1, r"config.model.attention_gate=1 is invalid; valid: True or False"),
    ],
)
def test_bad_block_values_raise_naming_key_value_choices(key, value, match):
  with pytest.raises(ValueError, match=match):
    tiny.model_config(num_heads=4, **{key: value})


def test_rope_needs_an_even_head_dim():
  with pytest.raises(ValueError, match=r"model.position='rope' contradicts config.model.head_dim=3"):
    tiny.model_config(position="rope", head_dim=3)
