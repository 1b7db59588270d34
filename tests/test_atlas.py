"""configs/atlas.py's method registry: `cpu` is the method set of study 11's committed record, `+added` appends the
methods registered after it without renaming a committed cell, `paper` runs every method, and every method builds the
atlas's encoder-decoder at tiny with its rule in force."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import atlas
from configs.claims import edge as edge_config
from configs.claims import edge_boundary as edge_boundary_config
from experiments import grid as grid_lib
from train import loop
from train.loss import make_loss_fn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record_methods(claim: str) -> set[str]:
  with open(os.path.join(REPO, f"reports/reproduction/{claim}/claim.json"), encoding="utf-8") as f:
    return {r["method"] for r in json.load(f)["measured"]["runs"]}


def _arms(config) -> list[str]:
  return [c.arm for c in grid_lib.cells(config) if c.params.get("analysis.at_init")]


def test_every_method_has_a_name_and_added_ones_are_registered():
  assert set(atlas.NAMES) == set(atlas.ARMS) and len(set(atlas.NAMES.values())) == len(atlas.NAMES)
  assert set(atlas.ADDED) <= set(atlas.ARMS) and not set(atlas.ADDED) & set(atlas.METHODS["cpu"])
  assert atlas.METHODS["paper"] == tuple(atlas.ARMS)


def test_cpu_is_the_committed_records_methods_and_added_appends_the_rest():
  committed = _record_methods("edge")
  assert len(committed) == 19 and {atlas.NAMES[m] for m in atlas.METHODS["cpu"]} == committed
  assert set(edge_boundary_config.BRACKETS["cpu"]) == committed == _record_methods("edge_boundary")
  cpu, added = edge_config.get_config("cpu"), edge_config.get_config("cpu+added")
  assert sorted(_arms(cpu)) == sorted(committed)
  assert sorted(_arms(added)) == sorted(committed | {atlas.NAMES[m] for m in atlas.ADDED})
  # The committed methods' cells keep their folder names and overrides: `cpu+added` reuses their runs.
  old = {c.name: c.overrides for c in grid_lib.cells(cpu)}
  new = {c.name: c.overrides for c in grid_lib.cells(added)}
  per_method = len(edge_config.WARMUPS["cpu"]) * len(edge_config.LRS["cpu"]) + 1  # its training cells + at init
  assert {k: new[k] for k in old} == old and len(new) == len(old) + per_method * len(atlas.ADDED)
  assert sorted(_arms(edge_config.get_config("paper"))) == sorted(atlas.NAMES.values())
  with pytest.raises(ValueError, match=r"config string 'cpu\+more' is invalid; valid: '<scale>' or '<scale>\+added'"):
    edge_config.get_config("cpu+more")


# What each added rule changes in the resolved config (one field each), read independently of configs/atlas.py.
RULE = {
    "megatron": lambda c: c.init.scheme == "megatron" and c.init.std == 0.02,
    "mitchell": lambda c: c.init.scheme == "mitchell" and not c.model.scale_embeddings,
    "small_init": lambda c: c.init.scheme == "small_init" and not c.model.scale_embeddings,
    "reordered": lambda c: c.model.norm_position == "reordered" and c.init.scheme == "xavier",
    "olmo2": lambda c: c.model.norm_position == "reordered" and c.init.scheme == "olmo2",
    "softcap": lambda c: (c.model.attn_logit_softcap, c.model.final_logit_softcap) == (50.0, 30.0),
    "gated_attention": lambda c: c.model.attention_gate,
    "qk_clip": lambda c: c.optim.qk_clip == 100.0 and c.optim.name == "adam",
}


@pytest.mark.parametrize("method", atlas.ADDED)
def test_each_added_method_builds_the_atlas_model_at_tiny_with_its_rule(method, tmp_path):
  config = edge_config.get_config("tiny+added")
  config.data.embedded.num_train, config.data.embedded.num_eval = 200, 16
  cell = next(c for c in grid_lib.cells(config) if c.arm == atlas.NAMES[method] and c.params.get("analysis.at_init"))
  exp = loop.setup(grid_lib.cell_config(config, cell, 0), str(tmp_path))
  c = exp.config
  assert RULE[method](c) and c.model.arch == "encoder_decoder" and c.model.num_encoder_layers == 1
  batch = jax.tree.map(jnp.asarray, exp.batches(1)[0])
  logits = exp.model.apply({"params": exp.state.params, **exp.state.variables}, batch)
  loss = float(make_loss_fn(exp.model, variables=exp.state.variables)(exp.state.params, batch))
  # At init every method predicts near-uniformly: the loss is within 1 nat of ln V.
  assert abs(loss - np.log(exp.model.config.vocab_size)) < 1.0, loss
  if method == "softcap":  # Gemma 2's final cap bounds every logit
    assert float(jnp.max(jnp.abs(logits))) <= 30.0
  if method == "gated_attention":
    assert any("gate" in "/".join(map(str, p)) for p, _ in jax.tree_util.tree_leaves_with_path(exp.state.params))
