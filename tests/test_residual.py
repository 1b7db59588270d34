"""The residual stream at init (models/residual.py): x_0 under model.embedding_norm, the identity path of Post-LN
(decays like 2^{-l/2}) and Pre-LN (kept), the scheduled α (state, updated by its rule), LayerScale's per-channel λ."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models import get_model, param_roles
from models.config import ARCHS
from models.residual import layerscale_epsilon
from tests import tiny


def _stream_coefficients(norm_position, num_layers=6, d=512):
  """cos-like coefficient <x_l, x_0>/<x_0, x_0> after each layer, with attention branches zeroed and unit-variance
  MLP branches (normalized ReLU, LeCun init) — the σ = 1 setting of Su 2021a §6 / Su 2021b (docs/science.md §6)."""
  c = tiny.model_config(
      arch="encoder",
      num_encoder_layers=num_layers,
      d_model=d,
      num_heads=4,
      d_ff=d,
      use_bias=False,
      norm_position=norm_position,
      activation="normalized_relu",
      max_len=64,
  )
  model = get_model(c)
  tokens = jax.random.randint(jax.random.key(0), (4, 64), 3, tiny.VOCAB)
  params = model.init(jax.random.key(1), {"inputs": tokens})["params"]
  for i in range(num_layers):
    attn = params["encoder"][f"layer_{i}"]["self_attn"]
    params["encoder"][f"layer_{i}"]["self_attn"] = {**attn, "out": {"kernel": jnp.zeros_like(attn["out"]["kernel"])}}
  _, state = model.apply({"params": params}, {"inputs": tokens}, mutable=["intermediates"])
  inter = state["intermediates"]["encoder"]
  # The derivation's x_0 is the normalized input: in Post-LN the first norm (after the zeroed attention branch)
  # rescales the embeddings, so measure against the first MLP sublayer's input.
  x0 = inter["layer_0"]["mlp_residual_in"][0].reshape(-1, d)
  coeffs, branch_var = [], []
  for i in range(num_layers):
    layer = inter[f"layer_{i}"]
    x = layer["mlp_residual_out"][0].reshape(-1, d)
    coeffs.append(float(jnp.sum(x * x0) / jnp.sum(x0 * x0)))
    h = layer["mlp_branch"][0].reshape(-1, d)
    xin = layer["mlp_residual_in"][0].reshape(-1, d)
    branch_var.append(float(jnp.mean(h * h) / jnp.mean(xin * xin)))
  return np.array(coeffs), np.array(branch_var)


def test_post_ln_identity_path_decays_like_two_to_minus_half_l():
  coeffs, branch_var = _stream_coefficients("post")
  np.testing.assert_allclose(branch_var, 1.0, atol=0.1)  # σ² ≈ 1: the setting of the derivation
  predicted = 2.0 ** (-np.arange(1, 7) / 2)
  np.testing.assert_allclose(coeffs, predicted, rtol=0.15, atol=0.02)
  # The general form with the measured σ_k²: Π_k (1 + σ_k²)^{-1/2}.
  np.testing.assert_allclose(coeffs, np.cumprod(1 / np.sqrt(1 + branch_var)), rtol=0.15, atol=0.02)


@pytest.mark.slow
def test_pre_ln_keeps_the_identity_path():
  coeffs, _ = _stream_coefficients("pre")
  np.testing.assert_allclose(coeffs, 1.0, atol=0.1)


@pytest.mark.parametrize("arch", ARCHS)
def test_embedding_norm_gives_unit_variance_tokens_with_norm_roles(arch):
  """model.embedding_norm (BERT, Devlin et al. 2019 §3): x_0 = LayerNorm(token + position embeddings) in every
  stack: a [D] gain and bias per stack with norm roles, and at init (gain 1, bias 0) each token of x_0 has mean 0
  and variance v/(v + ε), v the variance of its token + position sum computed here from the tables."""
  c = tiny.model_config(arch=arch, position="learned", embedding_norm=True, d_model=16, num_heads=2, d_ff=8)
  model = get_model(c)
  b = tiny.batch()
  variables = model.init(jax.random.key(0), b)
  params = variables["params"]
  logits, state = model.apply(variables, b, mutable=["intermediates"])
  length = b["inputs"].shape[1] if arch == "encoder" else b["targets"].shape[1]
  assert logits.shape == (2, length, tiny.VOCAB)
  roles = param_roles(model, params)
  for stack in c.stacks:
    norm = params[stack]["embedding_norm"]
    assert norm["scale"].shape == norm["bias"].shape == (16,)
    r_scale, r_bias = roles[stack]["embedding_norm"]["scale"], roles[stack]["embedding_norm"]["bias"]
    assert (r_scale.role, r_scale.stack, r_scale.layer, r_scale.sublayer) == (
        "norm_scale",
        stack,
        None,
        "embedding_norm",
    )
    assert (r_bias.role, r_bias.sublayer) == ("norm_bias", "embedding_norm")
    tokens = b["inputs"] if stack == "encoder" else models.transformer.shift_right(b["targets"])
    s = np.asarray(params["token_embedding"]["embedding"], np.float64)[np.asarray(tokens)]
    s = s + np.asarray(params[stack]["pos_embedding"]["embedding"], np.float64)[: tokens.shape[1]]
    v = s.var(-1)
    x0 = np.asarray(state["intermediates"][stack]["stream_0"][0], np.float64)
    np.testing.assert_allclose(x0.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(x0.var(-1), v / (v + c.norm_epsilon), rtol=1e-4)
    np.testing.assert_allclose(x0.var(-1), 1.0, rtol=1e-3)  # v ≈ 2 here, ε = 1e-6
  without = get_model(tiny.model_config(arch=arch, position="learned", d_model=16, num_heads=2, d_ff=8))
  p_without = without.init(jax.random.key(0), b)["params"]
  assert all("embedding_norm" not in p_without[stack] for stack in c.stacks)


def test_scheduled_alpha_is_state_and_updates():
  c = tiny.model_config(arch="decoder", residual="scheduled", norm_position="none", norm_type="none", alpha_init=0.0)
  model = get_model(c)
  variables = model.init(jax.random.key(0), tiny.batch())
  alphas = variables[models.ALPHA_COLLECTION]
  assert len(jax.tree.leaves(alphas)) == 2 and all(float(a) == 0.0 for a in jax.tree.leaves(alphas))
  for _ in range(3):
    alphas = models.scheduled_alpha_update(alphas, 0.4, 1.0)
  np.testing.assert_allclose(jax.tree.leaves(alphas), 1.0)
  # With α = 0 every branch is off: the decoder is embedding + positions straight to the readout.
  out0 = model.apply(variables, tiny.batch())
  out1 = model.apply({**variables, models.ALPHA_COLLECTION: alphas}, tiny.batch())
  assert not np.allclose(out0, out1)


@pytest.mark.parametrize("depth,epsilon", [(1, 0.1), (12, 0.1), (18, 0.1), (24, 1e-5), (36, 1e-6), (48, 1e-6)])
def test_layerscale_epsilon_is_cait_s_by_depth(depth, epsilon):
  """Touvron et al. 2021 (CaiT) §2.2: ε = 0.1 up to depth 18, 10⁻⁵ at 24, 10⁻⁶ deeper."""
  assert layerscale_epsilon(depth) == epsilon


@pytest.mark.slow
def test_layerscale_scales_each_branch_by_lambda_per_channel():
  """x_out − x_in = λ ⊙ F(x_in) for every sublayer: at init λ = ε in every channel (ε from the stack's depth:
  0.1 for these 2-layer stacks, or `model.layerscale_init`), and with a random λ channel by channel; λ is a
  [d] vector of role residual_scale on the logical axis 'embed'."""
  d = 8
  c = tiny.model_config(residual="layerscale", norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  model = get_model(c)
  variables = model.init(jax.random.key(0), tiny.batch())
  roles = param_roles(c, variables["params"])
  lam = variables["params"]["decoder"]["layer_1"]["cross_attn_residual"]["gamma"]
  assert lam.shape == (d,) and roles["decoder"]["layer_1"]["cross_attn_residual"]["gamma"].role == "residual_scale"
  assert tuple(models.logical_axes(c)["encoder"]["layer_0"]["mlp_residual"]["gamma"]) == ("embed",)
  rng = np.random.default_rng(0)
  random_lam = jax.tree_util.tree_map_with_path(
      lambda p, x: jnp.asarray(rng.normal(size=x.shape), x.dtype) if p[-1].key == "gamma" else x, variables["params"]
  )
  for params, expected in ((variables["params"], None), (random_lam, "random")):
    _, state = model.apply({"params": params}, tiny.batch(), mutable=["intermediates"])
    for stack, layers in (("encoder", 2), ("decoder", 2)):
      for i in range(layers):
        inter = state["intermediates"][stack][f"layer_{i}"]
        for sub in ("self_attn", "mlp") + (("cross_attn",) if stack == "decoder" else ()):
          gamma = params[stack][f"layer_{i}"][f"{sub}_residual"]["gamma"]
          if expected is None:
            np.testing.assert_array_equal(gamma, np.full(d, 0.1, np.float32))
          delta = inter[f"{sub}_residual_out"][0] - inter[f"{sub}_residual_in"][0]
          np.testing.assert_allclose(delta, gamma * inter[f"{sub}_branch"][0], rtol=1e-5, atol=1e-6)
  c = tiny.model_config(residual="layerscale", norm_position="pre", layerscale_init=1e-3)
  params = get_model(c).init(jax.random.key(0), tiny.batch())["params"]
  np.testing.assert_array_equal(params["encoder"]["layer_0"]["mlp_residual"]["gamma"], np.full(d, 1e-3, np.float32))
  with pytest.raises(ValueError, match=r"config.model.layerscale_init=-0.1 is invalid"):
    tiny.model_config(residual="layerscale", layerscale_init=-0.1)
