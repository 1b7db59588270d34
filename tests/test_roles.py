"""models/roles.py: every parameter's role, stack, layer and fans as it declared them where it was created, not read
from its name; missing or misshapen parameters and undeclared roles are named in the error."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

import models
from models import get_model, param_roles
from models.dense import Dense
from tests.test_models import batch, tiny


def test_roles_and_fans():
  c = tiny(
      arch="encoder_decoder",
      d_model=16,
      num_heads=4,
      head_dim=3,
      d_ff=24,
      tie_embeddings=False,
      residual="admin",
      num_decoder_layers=2,
  )
  params = get_model(c).init(jax.random.key(0), batch())["params"]
  roles = param_roles(c, params)
  q = roles["decoder"]["layer_1"]["cross_attn"]["query"]["kernel"]
  assert (q.role, q.stack, q.layer, q.sublayer, q.fan_in, q.fan_out) == ("attn_q", "decoder", 1, "cross_attn", 16, 12)
  o = roles["encoder"]["layer_0"]["self_attn"]["out"]["kernel"]
  assert (o.role, o.fan_in, o.fan_out) == ("attn_out", 12, 16)
  assert roles["decoder"]["layer_0"]["mlp"]["wo"]["kernel"].role == "mlp_out"
  assert roles["decoder"]["layer_0"]["mlp_residual"]["omega"].role == "residual_scale"
  assert roles["head"]["kernel"].role == "head"
  assert roles["token_embedding"]["embedding"].stack == "shared"
  assert param_roles(get_model(c)) is roles  # read once per model config
  with pytest.raises(ValueError, match=r"missing \['decoder/layer_0/cross_attn/key/bias'"):
    param_roles(c, {**params, "decoder": {**params["decoder"], "layer_0": {}}})
  with pytest.raises(ValueError, match="has shape"):
    param_roles(c, jax.tree.map(lambda x: x[..., None], params))


def test_roles_are_declared_where_parameters_are_created_not_read_from_names():
  """A role comes from the `declare` box the parameter was created with, whatever the module is called; a parameter
  created without one is named in the error, and a role outside ROLES is refused when declared."""

  class Renamed(nn.Module):
    declared: bool = True

    @nn.compact
    def __call__(self, x):
      y = Dense(3, role="attn_v", sublayer="mlp", axes=("embed", "kv"), name="mystery")(x)
      init = nn.initializers.zeros
      if self.declared:
        init = models.roles.declare(init, ("embed",), role="norm_bias", sublayer="final_norm")
      return y.sum() + self.param("whatever", init, (x.shape[-1],)).sum()

  x = jnp.ones((2, 4))
  roles = models.roles.declared_roles(Renamed().init(jax.random.key(0), x)["params"])
  kernel, bias, other = roles["mystery"]["kernel"], roles["mystery"]["bias"], roles["whatever"]
  assert (kernel.role, kernel.sublayer, kernel.fan_in, kernel.fan_out, kernel.path) == (
      "attn_v",
      "mlp",
      4,
      3,
      "mystery/kernel",
  )
  assert (bias.role, bias.sublayer) == ("bias", "mlp")
  assert (other.role, other.sublayer, other.stack, other.layer) == ("norm_bias", "final_norm", "shared", None)
  with pytest.raises(ValueError, match="'whatever' has no declared role"):
    models.roles.declared_roles(Renamed(declared=False).init(jax.random.key(0), x)["params"])
  with pytest.raises(ValueError, match="role='gain' is not one of"):
    models.roles.declare(nn.initializers.ones, ("embed",), role="gain", sublayer="mlp")
