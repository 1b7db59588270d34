"""models/parameterization.py: NTK computes the standard parameterization's function with rescaled kernels, and µP's
learning-rate multipliers and readout multiplier."""

import jax
import numpy as np
import pytest

import models
from models import get_model, param_roles
from tests import tiny


@pytest.mark.parametrize("arch,tied", [("encoder_decoder", False), ("decoder", True), ("encoder", True)])
def test_ntk_equals_standard_with_rescaled_kernels(arch, tied):
  """NTK computes the SP function when W_ntk = W_sp·√fan_in (docs/science.md §3)."""
  kw = dict(arch=arch, tie_embeddings=tied, norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  sp = get_model(tiny.model_config(**kw, tied_readout_scale="rsqrt_d" if tied else "none"))
  ntk = get_model(tiny.model_config(**kw, parameterization="ntk"))
  b = tiny.batch()
  params = sp.init(jax.random.key(0), b)["params"]
  roles = param_roles(sp, params)
  scaled = {"attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "head"}
  params_ntk = jax.tree.map(lambda p, r: p * np.sqrt(r.fan_in) if r.role in scaled else p, params, roles)
  np.testing.assert_allclose(
      sp.apply({"params": params}, b), ntk.apply({"params": params_ntk}, b), rtol=1e-4, atol=1e-5
  )


def test_mup_lr_multipliers_and_readout():
  c = tiny.model_config(
      arch="decoder",
      parameterization="mup",
      attention_logit_scale="dk",
      d_model=32,
      mup_base_width=8,
      tie_embeddings=False,
  )
  params = get_model(c).init(jax.random.key(0), tiny.batch())["params"]
  mult = models.lr_multipliers(params, c)
  assert mult["decoder"]["layer_0"]["mlp"]["wi"]["kernel"] == pytest.approx(0.25)
  assert mult["decoder"]["layer_0"]["self_attn"]["query"]["kernel"] == pytest.approx(0.25)
  assert mult["token_embedding"]["embedding"] == 1.0 and mult["head"]["kernel"] == 1.0
  sp = tiny.model_config(arch="decoder", tie_embeddings=False, d_model=32)
  sp_mult = models.lr_multipliers(get_model(sp).init(jax.random.key(0), tiny.batch())["params"], sp)
  assert set(jax.tree.leaves(sp_mult)) == {1.0}
  # The readout is multiplied by 1/width_ratio = 1/4 relative to the same kernel without µP.
  from models.parameterization import readout_multiplier

  assert readout_multiplier(c, tied=False) == pytest.approx(0.25)
