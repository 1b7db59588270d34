"""The grid (experiments/grid.py): cells as the product of typed values, a union of products recording every swept
key, a product's label naming its cells but not their directories, the analysis steps a sweep keeps, and a bad grid
or sweep key named with the syntax before any compute. The sweep end to end: tests/test_sweep.py."""

import re

import pytest

from experiments import grid as grid_lib
from experiments import sweep as sweep_lib
from experiments import sweep_config
from tests import tiny


def syntax_error(grid, reason):
  return re.escape(f"config.sweep.grid={grid!r} is invalid ({reason}); valid: {grid_lib.GRID_SYNTAX}")


def test_grid_cells_are_the_product_typed_as_the_defaults():
  config = tiny.sweep_config(
      **{"sweep.grid": " optim.warmup_steps=0, 400 ; model.norm_position=none,post;model.d_model=none,64"}
  )
  axes = grid_lib.parse_grid(config.sweep.grid, config)
  assert axes == [
      ("optim.warmup_steps", [0, 400]),
      ("model.norm_position", ["none", "post"]),  # a string key keeps 'none'
      ("model.d_model", [None, 64]),  # a placeholder (default None) takes 'none'
  ]
  cells = grid_lib.cells(config)
  assert len(cells) == 8 and cells[1].overrides == {
      "optim.warmup_steps": 0,
      "model.norm_position": "none",
      "model.d_model": 64,
  }
  assert cells[1].name == "optim.warmup_steps=0__model.norm_position=none__model.d_model=64"
  assert cells[-1].name == "optim.warmup_steps=400__model.norm_position=post__model.d_model=64"
  run = grid_lib.cell_config(config, cells[1], seed=3)
  assert (run.optim.warmup_steps, run.model.norm_position, run.model.d_model, run.train.seed, run.mode) == (
      0,
      "none",
      64,
      3,
      "train",
  )
  assert config.train.seed == 0 and config.model.d_model is None  # the base config is untouched
  typed = grid_lib.parse_grid("optim.learning_rate=1,3e-4;model.use_bias=TRUE,false", config)
  assert typed == [("optim.learning_rate", [1.0, 3e-4]), ("model.use_bias", [True, False])]
  assert isinstance(typed[0][1][0], float)
  assert [c.name for c in grid_lib.cells(tiny.sweep_config(**{"sweep.grid": ""}))] == ["base"]


def test_a_union_of_products_records_every_swept_key():
  grid = "model.norm_position=post;optim.warmup_steps=0,30 | model.norm_position=pre;init.scheme=bert"
  config = tiny.sweep_config(**{"sweep.grid": grid})
  assert grid_lib.parse_grid(grid, config) == [
      ("model.norm_position", ["post", "pre"]),
      ("optim.warmup_steps", [0, 30]),
      ("init.scheme", ["bert"]),
  ]
  cells = grid_lib.cells(config)
  assert [c.name for c in cells] == [
      "model.norm_position=post__optim.warmup_steps=0",
      "model.norm_position=post__optim.warmup_steps=30",
      "model.norm_position=pre__init.scheme=bert",
  ]
  # Every cell records every swept key: the base config's value where its product does not set it.
  assert cells[2].params == {"model.norm_position": "pre", "optim.warmup_steps": 0, "init.scheme": "bert"}
  assert cells[0].params["init.scheme"] == config.init.scheme == "xavier"
  assert grid_lib.cell_config(config, cells[2], seed=0).optim.warmup_steps == 0
  with pytest.raises(ValueError, match=re.escape("two cells get the same directory name")):
    grid_lib.cells(tiny.sweep_config(**{"sweep.grid": "optim.warmup_steps=0 | optim.warmup_steps=0,1"}))


def test_a_product_named_by_a_label_names_its_cells_but_not_their_directories():
  named = "Post-LN + Xavier (warmup 0..30): model.norm_position=post;optim.warmup_steps=0,30 | Pre-LN: init.scheme=bert"
  cells = grid_lib.cells(tiny.sweep_config(**{"sweep.grid": named}))
  assert [c.arm for c in cells] == ["Post-LN + Xavier (warmup 0..30)"] * 2 + ["Pre-LN"]
  unnamed = grid_lib.cells(
      tiny.sweep_config(**{"sweep.grid": "model.norm_position=post;optim.warmup_steps=0,30 | init.scheme=bert"})
  )
  assert [(c.name, c.overrides, c.params) for c in cells] == [(c.name, c.overrides, c.params) for c in unnamed]
  assert {c.arm for c in unnamed} == {""}
  assert grid_lib.split_label(" a: b=1") == ("a", " b=1") and grid_lib.split_label("data.dir=/x:y") == (
      None,
      "data.dir=/x:y",
  )  # a ':' after the first '=' is a value's


def test_analysis_steps_must_be_kept_checkpoints():
  assert sweep_config.saved_steps(10, 4, 3) == [4, 8, 10] and sweep_config.saved_steps(10, 4, 2) == [8, 10]
  for steps in ((0,), (8, 4), (4, 4), [True]):
    with pytest.raises(ValueError, match=re.escape("valid: a tuple of increasing checkpoint steps > 0")):
      sweep_config.SweepConfig.from_config(tiny.sweep_config(**{"sweep.analysis_steps": steps}).sweep)
  config = tiny.sweep_config(**{"sweep.analysis_steps": (2,), "sweep.grid": ""})  # 4 steps, checkpoints every 4
  with pytest.raises(ValueError, match=re.escape("sweep cell base, seed 0: [2] will not be kept")):
    sweep_lib.run_sweep(config, "/nonexistent/never/written")


@pytest.mark.parametrize(
    "grid, reason",
    [
        ("a=1 || b=2", "an empty product (two '|' in a row, or one at an end)"),
        ("optim.warmup_steps", "part 'optim.warmup_steps' needs exactly one '=' between the key and its values"),
        (
            "optim.warmup_steps=0=1",
            "part 'optim.warmup_steps=0=1' needs exactly one '=' between the key and its values",
        ),
        ("optim.warmupsteps=0,1", "key 'optim.warmupsteps' is not a leaf key of the config (see configs/default.py)"),
        ("optim=0,1", "key 'optim' is not a leaf key of the config (see configs/default.py)"),
        ("optim.warmup_steps=0,x", "optim.warmup_steps='x': optim.warmup_steps takes an integer"),
        ("optim.learning_rate=fast", "optim.learning_rate='fast': optim.learning_rate takes a number"),
        ("model.use_bias=yes", "model.use_bias='yes': model.use_bias takes true or false"),
        ("optim.warmup_steps=0,,1", "part 'optim.warmup_steps=0,,1' has an empty value"),
        ("optim.warmup_steps=0,0", "part 'optim.warmup_steps=0,0' repeats a value"),
        ("optim.warmup_steps=0;;init.scheme=bert", "an empty part (two ';' in a row, or one at an end)"),
        ("optim.warmup_steps=0;optim.warmup_steps=1", "key 'optim.warmup_steps' appears twice"),
        ("train.seed=0,1", "key 'train.seed' is set by the sweep itself (seeds: sweep.seeds)"),
        ("sweep.seeds=1,2", "key 'sweep.seeds' is set by the sweep itself (seeds: sweep.seeds)"),
        (": optim.warmup_steps=0", "product ': optim.warmup_steps=0': its label before ':' is empty or has ';' or ','"),
        (
            "a,b: optim.warmup_steps=0",
            "product 'a,b: optim.warmup_steps=0': its label before ':' is empty or has ';' or ','",
        ),
        ("Pre-LN: ", "product 'Pre-LN:' names no key after its label"),
    ],
)
def test_a_bad_grid_names_the_part_and_the_syntax(grid, reason):
  with pytest.raises(ValueError, match="^" + syntax_error(grid, reason) + "$"):
    grid_lib.cells(tiny.sweep_config(**{"sweep.grid": grid}))


def test_bad_sweep_keys_and_cells_fail_before_any_compute(tmp_path):
  with pytest.raises(ValueError, match=re.escape("config.sweep.seeds=0 is invalid; valid: an integer >= 1")):
    sweep_config.SweepConfig.from_config(tiny.sweep_config(**{"sweep.seeds": 0}).sweep)
  with pytest.raises(ValueError, match=re.escape("config.sweep.metric='loss' is invalid; valid: '<split>/<name>'")):
    sweep_config.SweepConfig.from_config(tiny.sweep_config(**{"sweep.metric": "loss"}).sweep)
  # A value the grid parses but the config boundary rejects: the cell is named, nothing runs.
  config = tiny.sweep_config(**{"sweep.grid": "init.scheme=xavier,nonsense"})
  with pytest.raises(ValueError, match=r"^sweep cell init.scheme=nonsense, seed 0: config.init.scheme='nonsense'"):
    sweep_lib.run_sweep(config, str(tmp_path / "sweep"))
  assert not (tmp_path / "sweep").exists()
