"""`sweep.products`, the grid as data: the same cells (names, order, arms, swept values) as the grid string it writes,
the claims' cells unchanged from when their grids were strings (so their run folders are found on a rerun), and bad
products named in the config boundary's format."""

import hashlib
import importlib
import json

import pytest

from experiments import grid as grid_lib
from experiments import sweep_config
from experiments.registry import CLAIM_NAMES, SCALES
from tests import tiny

# sha256 (16 hex digits) of [[scale, [[cell name, arm], ...]], ...] over SCALES of each claim's cells, recorded from
# the grid strings the claim configs wrote before their grids became data: a cell renamed or reordered fails here.
CELLS_OF_THE_STRING_GRIDS = {
    "truncated_normal": "036556a09f38716d",
    "activation_moments": "0b95c4c370e29e65",
    "attention_scale": "abc9899a5510496e",
    "identity_path": "4c9439537a2b5d51",
    "grad_norms": "1b12d8b024a4b1ba",
    "warmup": "07553682ccdf1b43",
    "hessian_spectrum": "4c9439537a2b5d51",
    "tfixup": "597f195a03338a00",
    "bert_vs_xavier": "96ac5ee86ebbdea3",
    "deep_no_warmup": "881f133a2ec0ebd5",
    "edge": "650ddd680bf623c2",
    "width": "d1624f18fa3d7d7b",
    "depth": "154b3f8636d5ec8d",
    "edge_boundary": "7b1c0c4bd62f18d7",
}


def _cells(config):
  return [(c.name, c.arm, c.params, c.overrides) for c in grid_lib.cells(config)]


@pytest.mark.parametrize("name", CLAIM_NAMES)
def test_a_claims_cells_are_those_of_its_former_grid_string_and_round_trip(name):
  module = importlib.import_module(f"configs.claims.{name}")
  named = []
  for scale in SCALES:
    config = module.get_config(scale)
    cells = _cells(config)
    named.append([scale, [[cell, arm] for cell, arm, _, _ in cells]])
    written = grid_lib.format_grid(grid_lib.sweep_products(config))  # the command line's form of the same grid
    again = module.get_config(scale)
    again.sweep.grid = written
    assert _cells(again) == cells  # same cells, order, arms, swept values and typed overrides
    if config.sweep.products:
      assert not config.sweep.grid  # the claim's grid is data
  assert hashlib.sha256(json.dumps(named).encode()).hexdigest()[:16] == CELLS_OF_THE_STRING_GRIDS[name]


def test_products_are_typed_as_the_keys_defaults_like_the_string():
  data = tiny.sweep_config(**{"sweep.grid": ""})
  data.sweep.products = (
      (("arm", "Post-LN"), ("model.norm_position", "post"), ("optim.learning_rate", (1, 1e-3))),
      (("model.norm_position", "pre"), ("optim.learning_rate", 1e30), ("train.eval_at_init", True)),
  )
  text = tiny.sweep_config(
      **{
          "sweep.grid": "Post-LN: model.norm_position=post;optim.learning_rate=1,1e-3 | "
          "model.norm_position=pre;optim.learning_rate=1e30;train.eval_at_init=true"
      }
  )
  assert _cells(data) == _cells(text)
  assert [c.name for c in grid_lib.cells(data)] == [
      "model.norm_position=post__optim.learning_rate=1.0",  # an integer lr is a number, as the string reads "1"
      "model.norm_position=post__optim.learning_rate=0.001",
      "model.norm_position=pre__optim.learning_rate=1e+30__train.eval_at_init=True",
  ]
  assert [c.arm for c in grid_lib.cells(data)] == ["Post-LN", "Post-LN", ""]
  assert grid_lib.swept_keys(data) == ["model.norm_position", "optim.learning_rate", "train.eval_at_init"]


def test_the_command_lines_grid_takes_the_place_of_the_products():
  config = tiny.sweep_config(**{"sweep.grid": "model.norm_position=pre"})
  config.sweep.products = ((("model.norm_position", ("post", "pre")),),)
  assert [c.name for c in grid_lib.cells(config)] == ["model.norm_position=pre"]


@pytest.mark.parametrize(
    "products, reason",
    [
        ((("nope.key", (1,)),), "key 'nope.key' is not a leaf key"),
        ((("train.seed", (1,)),), "set by the sweep itself"),
        ((("optim.learning_rate", ("fast",)),), "optim.learning_rate takes a number"),
        ((("train.num_steps", (1.5,)),), "train.num_steps takes an integer"),
        ((("model.norm_position", ("pre", "pre")),), "repeats one"),
        ((("model.norm_position", "pre"), ("model.norm_position", "post")), "appears twice"),
        ((("arm", "a;b"), ("model.norm_position", "pre")), "label 'a;b'"),
    ],
)
def test_a_bad_product_names_sweep_products_and_why(products, reason):
  config = tiny.sweep_config(**{"sweep.grid": ""})
  config.sweep.products = (products,)
  with pytest.raises(ValueError, match=r"config\.sweep\.products=.* is invalid \(.*" + reason):
    grid_lib.cells(config)


def test_products_of_another_shape_fail_at_the_config_boundary():
  config = tiny.sweep_config(**{"sweep.grid": ""})
  config.sweep.products = ("model.norm_position=pre",)
  with pytest.raises(ValueError, match=r"config\.sweep\.products=.* is invalid; valid: a tuple of products"):
    sweep_config.SweepConfig.from_config(config.sweep)


def test_a_product_may_run_its_own_seeds_in_either_form():
  """`seeds=<n>` (data: ("seeds", n)) runs that product's cells n seeds from sweep.first_seed, the rest sweep.seeds;
  it names no cell, is no swept key, round-trips through the string and survives an extension round."""
  data = tiny.sweep_config(**{"sweep.grid": "", "sweep.seeds": 2, "sweep.first_seed": 3})
  data.sweep.products = (
      (("arm", "a"), ("optim.learning_rate", (1e-3, 2e-3)), ("seeds", 5)),
      (("arm", "b"), ("optim.learning_rate", 1e-3), ("model.norm_position", "post")),
  )
  cells = grid_lib.cells(data)
  sweep = sweep_config.SweepConfig.from_config(data.sweep)
  assert [list(grid_lib.cell_seeds(c, sweep)) for c in cells] == [[3, 4, 5, 6, 7]] * 2 + [[3, 4]]
  assert [c.name for c in cells][:2] == ["optim.learning_rate=0.001", "optim.learning_rate=0.002"]
  assert grid_lib.num_runs(data) == 12 and grid_lib.seed_counts(data) == (2, 5)
  assert grid_lib.swept_keys(data) == ["optim.learning_rate", "model.norm_position"]
  written = grid_lib.format_grid(grid_lib.sweep_products(data))
  assert written.startswith("a: optim.learning_rate=0.001,0.002;seeds=5 | b: ")
  text = tiny.sweep_config(**{"sweep.grid": written, "sweep.seeds": 2})
  assert _cells(text) == _cells(data) and [c.seeds for c in grid_lib.cells(text)] == [5, 5, 0]
  grown = grid_lib.extend_grid(written, text, {"a": {"optim.learning_rate": [4e-3]}})
  assert grown.endswith(" | a: optim.learning_rate=0.004;seeds=5")  # the round repeats the product, seeds and all


@pytest.mark.parametrize(
    "grid, products",
    [
        ("optim.learning_rate=1e-3;seeds=0", (("optim.learning_rate", 1e-3), ("seeds", 0))),
        ("optim.learning_rate=1e-3;seeds=2,3", (("optim.learning_rate", 1e-3), ("seeds", (2, 3)))),
        ("optim.learning_rate=1e-3;seeds=x", (("optim.learning_rate", 1e-3), ("seeds", 1.5))),
        ("seeds=2;optim.learning_rate=1e-3;seeds=2", (("seeds", 2), ("optim.learning_rate", 1e-3), ("seeds", 2))),
    ],
)
def test_a_bad_seeds_part_names_the_grid_and_why(grid, products):
  with pytest.raises(ValueError, match=r"config\.sweep\.grid=.* is invalid \(part .*seeds.*one integer >= 1"):
    grid_lib.cells(tiny.sweep_config(**{"sweep.grid": grid}))
  config = tiny.sweep_config(**{"sweep.grid": ""})
  config.sweep.products = (products,)
  with pytest.raises(ValueError, match=r"config\.sweep\.products=.* is invalid \(.*(one integer >= 1|appears twice)"):
    grid_lib.cells(config)


def test_the_sweeps_plan_runs_each_products_own_seeds(tmp_path):
  from experiments import sweep as sweep_lib  # noqa: PLC0415 (the runner, for its plan alone)

  config = tiny.sweep_config(**{"sweep.grid": "a: optim.learning_rate=1e-3;seeds=3 | b: optim.learning_rate=2e-3"})
  config.sweep.first_seed, config.sweep.seeds = 4, 1
  plan = sweep_lib.plan(config, str(tmp_path))
  assert [(c.arm, seed, r.train.seed) for c, seed, r in plan] == [("a", 4, 4), ("a", 5, 5), ("a", 6, 6), ("b", 4, 4)]
