"""Logical axes declared where parameters are created, and FSDP over a (data, fsdp) mesh (issue 13).

The multi-device tests run `tests/scripts/fsdp_train.py` in a subprocess on 4 simulated CPU devices (the test process
has one), bounded in time, through the public path `train.loop.setup` + `train_and_evaluate`.
"""

import functools
import itertools
import json
import os
import pathlib
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import models
from tests import tiny
from tests.conftest import xla_flags
from train import config as config_lib
from train import loop
from train import step as step_lib

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "fsdp_train.py"


def _specs(tree):
  return jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, P))


@pytest.mark.parametrize(
    "arch,residual,norm_type,tied",
    [
        (arch, residual, norm_type, tied)
        for arch, residual, norm_type, tied in itertools.product(
            ("encoder_decoder", "decoder", "encoder"), ("rezero", "admin"), ("layernorm", "rmsnorm"), (True, False)
        )
        if tied or arch != "encoder"  # BERT's MLM head is tied
    ],
)
def test_logical_axes_cover_every_parameter(arch, residual, norm_type, tied):
  """Every parameter declares one logical axis name per dimension (learned positions, embedding norm, biases,
  α / ω, MLM head included), from models.LOGICAL_AXES, and `model.init` still returns plain arrays."""
  mc = tiny.model_config(
      vocab_size=37,
      arch=arch,
      d_model=16,
      d_ff=24,
      scale_embeddings=True,
      max_len=256,
      residual=residual,
      norm_position="post",
      norm_type=norm_type,
      tie_embeddings=tied,
      position="learned",
      embedding_norm=True,
  )
  model = models.get_model(mc)
  tokens = jnp.ones((2, 3), jnp.int32)
  params = jax.eval_shape(model.init, jax.random.key(0), {"inputs": tokens, "targets": tokens})["params"]
  axes = models.logical_axes(model)
  assert jax.tree.structure(params) == jax.tree.structure(
      jax.tree.map(lambda _: 0, axes, is_leaf=lambda x: isinstance(x, P))
  )
  leaves = jax.tree.leaves(params)
  assert len(leaves) == len(_specs(axes)) > 10
  for spec, leaf in zip(_specs(axes), leaves):
    assert len(spec) == leaf.ndim and all(name in models.LOGICAL_AXES for name in spec), (spec, leaf.shape)
  flat = {
      "/".join(str(k.key) for k in path): tuple(s)
      for path, s in jax.tree_util.tree_flatten_with_path(axes, is_leaf=lambda x: isinstance(x, P))[0]
  }
  assert flat["token_embedding/embedding"] == ("vocab", "embed")
  stack = "encoder" if arch == "encoder" else "decoder"
  assert flat[f"{stack}/layer_0/self_attn/query/kernel"] == ("embed", "heads", "kv")
  assert flat[f"{stack}/layer_0/self_attn/out/kernel"] == ("heads", "kv", "embed")
  assert flat[f"{stack}/layer_0/mlp/wi/kernel"] == ("embed", "mlp")
  assert flat[f"{stack}/layer_0/mlp/wo/kernel"] == ("mlp", "embed")
  assert flat[f"{stack}/layer_0/mlp_norm/scale"] == ("embed",)
  # Plain arrays everywhere else: init, roles and Hessians never see a box.
  variables = model.init(jax.random.key(0), {"inputs": tokens, "targets": tokens})
  assert all(isinstance(x, jax.Array) for x in jax.tree.leaves(variables))


def test_logical_axes_are_traced_once_per_config_and_equal_a_fresh_trace(monkeypatch):
  """`logical_axes(model)` reads the boxes `models.inventory` traced for the config's roles (one abstract init per config,
  not one per call): the same specs as an independent trace on a batch of another shape, and no trace on the second
  call."""
  mc = tiny.model_config(vocab_size=23, num_encoder_layers=2, d_ff=16, scale_embeddings=True, max_len=256)
  model = models.get_model(mc)
  models.inventory.boxed_param_shapes.cache_clear()
  cached = models.logical_axes(model)
  tokens = jnp.ones((3, 5), jnp.int32)
  # nn.Module.init, not model.init: the Transformer's init strips the boxes
  boxed = jax.eval_shape(
      functools.partial(nn.Module.init, model), jax.random.key(1), {"inputs": tokens, "targets": tokens}
  )
  assert cached == nn.get_partition_spec(boxed["params"]) and models.logical_axes(mc) == cached
  traces = []
  monkeypatch.setattr(jax, "eval_shape", lambda *a, **k: traces.append(a) or pytest.fail("traced again"))
  assert models.logical_axes(models.get_model(mc)) == cached and models.param_roles(mc) is not None and not traces


def test_mesh_spec_follows_the_rules_and_replicates_what_does_not_divide():
  """Rules in priority order, each mesh axis once per array; a dimension the mesh axis does not divide (an odd
  vocabulary) is skipped, so the next rule can use the axis; size-1 axes (fsdp = 1) shard nothing."""
  sizes = {"data": 1, "fsdp": 4}
  rules = (("vocab", "fsdp"), ("embed", "fsdp"))
  assert step_lib.mesh_spec(P("vocab", "embed"), (309, 64), sizes, rules) == P(None, "fsdp")
  assert step_lib.mesh_spec(P("vocab", "embed"), (308, 64), sizes, rules) == P("fsdp", None)
  assert step_lib.mesh_spec(P("heads", "kv", "embed"), (4, 16, 64), sizes, rules) == P(None, None, "fsdp")
  assert step_lib.mesh_spec(P("embed", "mlp"), (30, 64), sizes, rules) == P(None, None)
  assert step_lib.mesh_spec(P(), (), sizes, rules) == P()
  assert step_lib.mesh_spec(P("embed", "mlp"), (64, 128), {"data": 2, "fsdp": 2}, (("embed", ("data", "fsdp")),)) == P(
      ("data", "fsdp"), None
  )
  assert step_lib.mesh_spec(P("embed", "mlp"), (64, 128), {"data": 4, "fsdp": 1}, rules) == P(None, None)
  with pytest.raises(ValueError, match="do not match"):
    step_lib.mesh_spec(P("embed"), (64, 128), sizes, rules)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("mesh.fsdp", 0, r"config.mesh.fsdp=0 is invalid"),
        ("mesh.fsdp", 2, r"config.mesh.fsdp=2 is invalid; valid: a divisor of the number of devices, 1"),
        ("mesh.rules", (("embed", "model"),), r"unknown mesh axis 'model'"),
        ("mesh.rules", (("d_model", "fsdp"),), r"unknown logical axis 'd_model'"),
        ("mesh.rules", ("embed",), r"config.mesh.rules="),
    ],
)
def test_bad_mesh_config_fails_before_compute(tmp_path, key, value, match):
  with pytest.raises(ValueError, match=match):
    loop.setup(tiny.run_config(**{key: value}), str(tmp_path / "run"))
  assert not (tmp_path / "run").exists()  # raised before the workdir, the data or any parameter


def test_mesh_config_round_trips_through_config_json():
  config = config_lib.resolve(tiny.run_config(**{"mesh.fsdp": 4, "mesh.rules": [["embed", "fsdp"], ["vocab", None]]}))
  assert config.mesh.rules == (("embed", "fsdp"), ("vocab", None))
  again = config_lib.resolve(ml_collections.ConfigDict(json.loads(json.dumps(config.to_dict()))))
  assert again.mesh == config.mesh


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
  """One subprocess for both tests below: data parallel (1), FSDP 1 × 4 (4, its uninterrupted run also the run the
  resume is compared with) and 2 × 2 (2)."""
  return _run(tmp_path_factory.mktemp("fsdp"), "1", "4:resume", "2")


def _run(tmp_path, *layouts, timeout=300):
  env = {
      **os.environ,
      "XLA_FLAGS": xla_flags(4),  # the suite's flags (tests/conftest.py)
      "JAX_PLATFORMS": "cpu",
  }
  proc = subprocess.run(
      [sys.executable, str(SCRIPT), str(tmp_path), *layouts],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=timeout,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.strip().splitlines()[-1])
  assert out["devices"] == 4
  return out


@pytest.mark.slow
def test_fsdp_matches_data_parallel(layouts):
  """20 steps on 4 devices: FSDP 1 × 4 and 2 × 2 give the losses of replicated data parallelism (4 × 1) to 1e-5
  relative, and the parameters and their Adam moments really are split over `fsdp` (D of a [D, F] kernel, of the
  [V, D] embedding and of the [H, K, D] output projection is 1/fsdp on each device; replicated under fsdp = 1)."""
  out = layouts
  dp = np.asarray(out["1"]["losses"])
  assert out["1"]["steps"] == list(range(1, 21)) and np.all(np.isfinite(dp)) and dp[-1] < dp[0] - 1.0
  for fsdp in (4, 2):
    run = out[str(fsdp)]
    assert run["mesh"] == {"data": 4 // fsdp, "fsdp": fsdp}
    np.testing.assert_allclose(run["losses"], dp, rtol=1e-5)
    for when in ("setup", "trained"):
      for name, dim in (
          ("encoder/layer_0/mlp/wi/kernel", 0),
          ("token_embedding/embedding", 1),
          ("decoder/layer_0/self_attn/out/kernel", 2),
      ):
        shard = run["shards"][when][name]
        expected = list(shard["shape"])
        expected[dim] //= fsdp
        assert shard["param"] == expected and shard["mu"] == expected, (fsdp, when, name, shard)
  for shard in out["1"]["shards"]["trained"].values():
    assert shard["param"] == shard["mu"] == shard["shape"]


@pytest.mark.slow
def test_fsdp_checkpoint_restores(layouts):
  """A checkpoint saved under FSDP (1 × 4) restores sharded as it was saved, and resuming from step 10 gives the
  uninterrupted run's losses of steps 11..20 bit for bit."""
  run = layouts["4"]
  assert run["resumed_from"] == 10
  assert run["resumed_losses"] == run["losses"][10:]
  assert run["shards"]["restored"] == run["shards"]["setup"]
  assert run["shards"]["restored"]["encoder/layer_0/mlp/wi/kernel"]["param"] == [16, 128]
