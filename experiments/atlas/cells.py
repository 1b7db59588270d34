"""The atlas's two sweeps read from one config: the training grid's cells by method, warmup and lr, the at-init arms.

Contract: the atlas config's `sweep.grid` is a union with one product per method, named by the method's label
(experiments/grid.py: 'Pre-LN: <keys>'); each product sets the method's keys and sweeps `optim.warmup_steps` and
`optim.learning_rate` (configs/atlas.py). `arms(config)` are the products without those two keys (the at-init
sweep's grid: one cell per method, with the same label); `method_of(cell, grid)` is a cell's label, the config's own
name of its method (an unnamed product is an error); `init_config` is the
at-init sweep's config: the arms, one training step (whose `train/loss`, computed before the update, is the loss at
init ℓ₀) and `sweep.analysis_at_init`; `train_config` the training sweep's: the full grid, no analysis. Both start
from `base_config`, the config without its `atlas` group (the axis parts' settings, experiments/atlas/axes.py), so
their cells' configs are what they were before the axis parts existed.
"""

import copy
import dataclasses
from typing import Any

import ml_collections

from experiments import grid as grid_lib
from models.config import invalid

LR_KEY = "optim.learning_rate"
WARMUP_KEY = "optim.warmup_steps"


@dataclasses.dataclass(frozen=True)
class AtlasCell:
  """A training cell of the atlas: its method, warmup steps, peak lr and the sweep's cell."""

  method: str
  warmup: int
  lr: float
  cell: grid_lib.Cell


def config_value(params: dict, config: ml_collections.ConfigDict, key: str) -> Any:
  """A cell's value of `key`: its `params`' (every swept key's) or else the base config's."""
  if key in params:
    return params[key]
  node = config
  for part in key.split("."):
    node = node[part]
  return node


def base_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of the atlas config without its `atlas` group (the axis parts' settings, experiments/atlas/axes.py),
  which no run reads: every sweep of the atlas starts from it, so its runs' config.json hold what they train."""
  out = copy.deepcopy(config)
  if "atlas" in out:
    with out.unlocked():
      del out["atlas"]
  return out


def method_of(cell: grid_lib.Cell, grid: str) -> str:
  """The method of a cell: the label of its grid product (configs/atlas.py names each; ValueError if unnamed)."""
  if not cell.arm:
    raise invalid("sweep.grid", grid, "one product per method, each named by its label ('Pre-LN: <keys>')")
  return cell.arm


def _format(value: Any) -> str:
  return repr(value) if isinstance(value, float) else str(value).lower() if isinstance(value, bool) else str(value)


def product_grid(overrides: dict[str, Any]) -> str:
  """The one-product grid string whose single cell has these overrides (and so the same name)."""
  return ";".join(f"{k}={_format(v)}" for k, v in overrides.items())


def arms(config: ml_collections.ConfigDict) -> list[tuple[str, dict[str, list[Any]]]]:
  """(method, its product without the lr and warmup keys) per product of the grid (raises if a product is unnamed or
  lacks either key)."""
  out = []
  for label, product in grid_lib.labeled_products(config.sweep.grid, config):
    keys = [k for k, _ in product]
    if LR_KEY not in keys or WARMUP_KEY not in keys or not label:
      raise invalid(
          "sweep.grid",
          config.sweep.grid,
          f"one named product per method ('Pre-LN: ...'), each sweeping {LR_KEY} and {WARMUP_KEY}",
      )
    out.append((label, {k: v for k, v in product if k not in (LR_KEY, WARMUP_KEY)}))
  return out


def init_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The at-init sweep: one cell per method (each arm's single values), one step, analysis at step 0."""
  out = base_config(config)
  parts = []
  for label, arm in arms(config):
    if any(len(v) != 1 for v in arm.values()):
      raise invalid("sweep.grid", config.sweep.grid, "one value per method key (only lr and warmup swept)")
    parts.append(f"{label}: " + product_grid({k: v[0] for k, v in arm.items()}))
  out.sweep.grid = " | ".join(parts)
  out.sweep.analysis_at_init = True
  out.sweep.analysis_steps = ()
  out.train.num_steps = out.train.log_every = out.train.eval_every = out.train.checkpoint_every = 1
  return out


def train_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The training sweep: the config's grid, no analysis."""
  out = base_config(config)
  out.sweep.analysis_at_init = False
  out.sweep.analysis_steps = ()
  return out


def training_cells(config: ml_collections.ConfigDict) -> list[AtlasCell]:
  """Every training cell with its method, warmup and lr, in grid order."""
  return [
      AtlasCell(method_of(c, config.sweep.grid), int(c.params[WARMUP_KEY]), float(c.params[LR_KEY]), c)
      for c in grid_lib.cells(config)
  ]


def init_cells(config: ml_collections.ConfigDict) -> list[tuple[str, grid_lib.Cell]]:
  """(method, cell) of every at-init cell, in grid order."""
  init = init_config(config)
  return [(method_of(c, init.sweep.grid), c) for c in grid_lib.cells(init)]
