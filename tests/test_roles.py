"""models/roles.py: every parameter's role, stack, layer and fans as it declared them where it was created, not read
from its name; missing or misshapen parameters and undeclared roles are named in the error."""

import ast
import pathlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

import models
from models import get_model, param_roles
from models.dense import Dense
from tests import tiny

MODELS = pathlib.Path(__file__).resolve().parents[1] / "models"


def test_roles_and_fans():
  c = tiny.model_config(
      arch="encoder_decoder",
      d_model=16,
      num_heads=4,
      head_dim=3,
      d_ff=24,
      tie_embeddings=False,
      residual="admin",
      num_decoder_layers=2,
  )
  params = get_model(c).init(jax.random.key(0), tiny.batch())["params"]
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


def _models_imports(path: pathlib.Path) -> set[str]:
  """The modules of `models/` that `path` imports anywhere in it (top level or inside a function)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module == "models":
      found |= {a.name for a in node.names}
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("models."):
      found.add(node.module.split(".")[1])
    elif isinstance(node, ast.Import):
      found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("models.")}
  return found


def test_models_reads_bottom_up():
  """No import cycle inside models/ (none hidden in a function either): the modules order so that each imports only
  those before it, with the declarations (`roles`, `axes`) at the bottom, `transformer` above every layer, and
  `inventory`, which traces the whole model to read its declarations back, above `transformer`."""
  modules = {p.stem: p for p in MODELS.glob("*.py") if p.stem != "__init__"}
  deps = {name: _models_imports(path) & set(modules) - {name} for name, path in modules.items()}
  order, placed = [], set()
  while len(order) < len(deps):
    ready = sorted(n for n, d in deps.items() if n not in placed and d <= placed)
    assert (
        ready
    ), f"import cycle among {sorted(set(deps) - placed)}: {({n: deps[n] - placed for n in deps if n not in placed})}"
    order += ready
    placed |= set(ready)
  assert deps["roles"] == deps["axes"] == set()
  assert "transformer" in deps["inventory"] and all("inventory" not in d for n, d in deps.items())
  assert order.index("transformer") > max(order.index(n) for n in ("norms", "residual", "attention", "dense"))
