"""models/norms.py: DyT (Zhu et al. 2025, Eq. 1) and Derf (Chen et al. 2025, Eq. 10) against their defining equations
on a forward pass, in the model (every norm replaced, α₀ per sublayer) and as modules with trained-looking parameters;
init schemes keep α₀ and s₀; bad values are named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import erf

import init
import models
from models.norms import get_norm
from tests import tiny


def _captured(c):
  model = models.get_model(c)
  b = tiny.batch()
  variables = model.init(jax.random.key(0), b)
  _, state = model.apply(variables, b, mutable=["intermediates"], capture_intermediates=True)
  return variables["params"], state["intermediates"]


@pytest.mark.parametrize("norm_type", ["dyt", "derf"])
def test_every_norm_of_the_model_is_the_pointwise_function_of_its_input_at_init(norm_type):
  """At init γ = 1, β = 0: a Pre-LN sublayer's norm outputs f(α₀·x_in + s₀) of its residual input, α₀ = 0.7 in front
  of attention and 0.3 elsewhere (`model.norm_alpha_init_attention` / `norm_alpha_init`), s₀ = 0.2 for Derf; the
  final norm gives f(0.3·x_L + s₀); QK-norm, embedding and MLM norms are the same module."""
  s0 = 0.2 if norm_type == "derf" else 0.0
  f = (lambda z: erf(z + s0)) if norm_type == "derf" else jnp.tanh
  c = tiny.model_config(
      norm_type=norm_type,
      norm_position="pre",
      norm_alpha_init=0.3,
      norm_alpha_init_attention=0.7,
      derf_shift_init=s0,
      qk_norm=True,
  )
  params, inter = _captured(c)
  for stack in ("encoder", "decoder"):
    layer = inter[stack]["layer_0"]
    for sub, a0 in (("self_attn", 0.7), ("mlp", 0.3)):
      x_in = layer[f"{sub}_residual_in"][0]
      np.testing.assert_allclose(layer[f"{sub}_norm"]["__call__"][0], f(a0 * x_in), rtol=1e-6, atol=1e-7)
      assert float(params[stack]["layer_0"][f"{sub}_norm"]["alpha"]) == pytest.approx(a0)
    x_last = layer["mlp_residual_out"][0]
    np.testing.assert_allclose(inter[stack]["final_norm"]["__call__"][0], f(0.3 * x_last), rtol=1e-6, atol=1e-7)
  assert set(params["decoder"]["layer_0"]["self_attn"]["query_norm"]) == (
      {"alpha", "scale", "bias", "shift"} if norm_type == "derf" else {"alpha", "scale", "bias"}
  )
  roles = models.param_roles(c, params)["decoder"]["layer_0"]["self_attn_norm"]
  assert (roles["alpha"].role, roles["scale"].role) == ("norm_alpha", "norm_scale")
  assert norm_type == "dyt" or roles["shift"].role == "norm_shift"


@pytest.mark.parametrize("norm_type", ["dyt", "derf"])
def test_pointwise_norm_with_trained_parameters_is_gamma_f_alpha_x_plus_s_plus_beta(norm_type):
  """γ ⊙ tanh(α·x) + β (DyT) and γ ⊙ erf(α·x + s) + β (Derf) with random per-channel γ, β and scalars α, s; no
  statistics: each element depends on itself only."""
  norm = get_norm(norm_type)(
      epsilon=1e-6,
      use_bias=True,
      dtype=jnp.float32,
      param_dtype=jnp.float32,
      name="n",
      sublayer="mlp",
      alpha_init=0.5,
      shift_init=0.0,
  )
  x = (3.0 * jax.random.normal(jax.random.key(0), (4, 5, 6))).at[0, 0, 0].set(0.1)
  params = jax.tree.map(lambda p: p.unbox() if hasattr(p, "unbox") else p, norm.init(jax.random.key(1), x)["params"])
  k1, k2 = jax.random.split(jax.random.key(2))
  params = {**params, "scale": jax.random.normal(k1, (6,)), "bias": jax.random.normal(k2, (6,)), "alpha": 1.7}
  if norm_type == "derf":
    params["shift"] = -0.4
  y = norm.apply({"params": params}, x)
  inner = 1.7 * x + (-0.4 if norm_type == "derf" else 0.0)
  expected = params["scale"] * (erf(inner) if norm_type == "derf" else jnp.tanh(inner)) + params["bias"]
  np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
  # Point-wise: changing one (unsaturated) element changes only its own output.
  y2 = norm.apply({"params": params}, x.at[0, 0, 0].set(0.3))
  assert int(jnp.sum(y2 != y)) == 1


def test_init_schemes_keep_alpha0_and_s0():
  """Every scheme re-draws the matrices but leaves α and s as the model creates them."""
  c = tiny.model_config(norm_type="derf", norm_position="pre", norm_alpha_init=0.25, derf_shift_init=-0.1)
  model = models.get_model(c)
  b = tiny.batch()
  variables = init.init_params({"scheme": "xavier"}, model, jax.random.key(0), b)
  roles = models.param_roles(c, variables["params"])
  found = {"norm_alpha": set(), "norm_shift": set()}
  for r, p in zip(jax.tree.leaves(roles), jax.tree.leaves(variables["params"])):
    if r.role in found:
      found[r.role].add(float(p))
  assert found == {"norm_alpha": {0.25}, "norm_shift": {float(np.float32(-0.1))}}


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"norm_alpha_init": 0.0}, r"config.model.norm_alpha_init=0.0 is invalid; valid: a finite number > 0"),
        ({"norm_alpha_init_attention": -1.0}, r"config.model.norm_alpha_init_attention=-1.0 is invalid"),
        ({"norm_type": "dyn"}, r"config.model.norm_type='dyn' is invalid; valid: \['layernorm', 'rmsnorm', 'dyt'"),
    ],
)
def test_bad_pointwise_values_are_named(kw, match):
  with pytest.raises(ValueError, match=match):
    tiny.model_config(norm_position="pre", **kw)
