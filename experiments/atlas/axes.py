"""The atlas's axis parts (issue 15 items 3-4): four more sweeps of the sweep layer, read from `config.atlas.<part>`.

Contract: `config.atlas.<part>` (configs/atlas.py) holds a part's `grid` (grid syntax, experiments/grid.py), the keys
it sets over the atlas config (`overrides`, one product of single values in the same syntax: the sizes) and its
`seeds`; `part_config(config, part)` is the part's sweep config: the atlas config without the `atlas` group (no run
reads it; `cells.base_config`), the overrides, the grid and seeds, and what the part measures (`MEASURES`, fixed
here, not per scale):
  trace     training runs with `train.curvature_every`: η(t)·λ_max(t) and, with `analysis.preconditioned_top_k`,
            Adam's η(t)·λ_max(P⁻¹H)(t) in metrics.jsonl (analysis/tracking.py);
  width     at init (as `cells.init_config`: one step, `sweep.analysis_at_init`): λ_max(H) and λ_max(P⁻¹H), top 1;
  depth     at init: λ_max(H), top 1, and the per-parameter gradient norms (`analysis.grad_norms`);
  transfer  training runs, the final validation loss; no analysis.
`part_cells(config, part)` names each cell for the report: its arm (the label of its grid product: a
parameterization, a method, or for the trace a method with its warmup), its x (d_model, layers per stack, warmup steps) and its
peak lr. `parse_parts` reads `atlas.parts`; `PARTS` are the driver's parts in their default order.
"""

import dataclasses
from typing import Any

import ml_collections

from experiments import grid as grid_lib
from experiments.atlas import cells as cells_lib
from models.config import Section, invalid

PARTS = ("init", "train", "length", "trace", "width", "depth", "transfer")
AXIS_PARTS = ("trace", "width", "depth", "transfer")
AT_INIT = {  # one step whose pre-update loss is ℓ₀, the analysis at step 0, nothing but what the part reads
    "sweep.analysis_at_init": True,
    "train.num_steps": 1,
    "train.log_every": 1,
    "train.eval_every": 1,
    "train.checkpoint_every": 1,
    "analysis.top_k": 1,
    "analysis.bottom_k": 0,
    "analysis.update_sharpness": False,
    "analysis.blocks": False,
    "analysis.spectrum": False,
    "analysis.trace_probes": 0,
    "analysis.signal": False,
}
MEASURES = {  # what each axis part measures (its sizes come from config.atlas.<part>.overrides)
    "trace": {"sweep.analysis_at_init": False, "analysis.preconditioned_top_k": 1},
    "width": {**AT_INIT, "analysis.preconditioned_top_k": 1, "analysis.grad_norms": False},
    "depth": {**AT_INIT, "analysis.preconditioned_top_k": 0, "analysis.grad_norms": True},
    "transfer": {"sweep.analysis_at_init": False, "train.curvature_every": 0},
}


@dataclasses.dataclass(frozen=True)
class AxisConfig(Section):
  """One `config.atlas.<part>` subtree, typed and checked (configs/atlas.py)."""

  KEY = "atlas"
  grid: str
  overrides: str
  seeds: int

  def __post_init__(self):
    if self.seeds < 1:
      raise invalid("atlas.<part>.seeds", self.seeds, "an integer >= 1")


@dataclasses.dataclass(frozen=True)
class AxisCell:
  """A cell of an axis part: the line it is on (`arm`), its x, its peak lr, and the sweep's cell."""

  part: str
  arm: str
  x: float
  lr: float
  cell: grid_lib.Cell


def parse_parts(text: str) -> tuple[str, ...]:
  """The parts of the comma-separated `atlas.parts` ('' = every part, in `PARTS`' order; ValueError naming the key,
  the bad value and the valid parts), checked before any compute."""
  if not text.strip():
    return PARTS
  parts = tuple(p.strip() for p in text.split(","))
  bad = [p for p in parts if p not in PARTS]
  if bad or len(set(parts)) < len(parts):
    why = f"{bad[0]!r} is not a part" if bad else "a part is named twice"
    raise invalid("atlas.parts", text, f"comma-separated parts of {list(PARTS)} ('': all, in that order)", why)
  return parts


def axis(config: ml_collections.ConfigDict, part: str) -> AxisConfig:
  """The typed `config.atlas.<part>` (ValueError naming the part if the atlas config has none)."""
  if part not in AXIS_PARTS:
    raise invalid("part", part, list(AXIS_PARTS))
  if "atlas" not in config or part not in config.atlas:
    raise invalid(f"atlas.{part}", None, "a subtree {grid, overrides, seeds} (configs/atlas.py)", "missing")
  return AxisConfig.from_config(config.atlas[part], f"atlas.{part}")


def part_config(config: ml_collections.ConfigDict, part: str) -> ml_collections.ConfigDict:
  """The sweep config of an axis part (module docstring); a bad grid or override raises before any compute."""
  a = axis(config, part)
  out = cells_lib.base_config(config)
  products = grid_lib.parse_products(a.overrides, out)
  if len(products) > 1 or any(len(values) != 1 for _, values in products[0]):
    raise invalid(f"atlas.{part}.overrides", a.overrides, "one value per key, 'k=v;k2=v2' (the grid syntax, no '|')")
  for key, values in products[0]:
    _set(out, key, values[0])
  for key, value in MEASURES[part].items():
    _set(out, key, value)
  out.sweep.grid = a.grid
  out.sweep.seeds = a.seeds
  out.sweep.analysis_steps = ()
  return out


def _set(config: ml_collections.ConfigDict, key: str, value: Any) -> None:
  *parents, leaf = key.split(".")
  node = config
  for p in parents:
    node = node[p]
  node[leaf] = value


X_KEYS = {  # the x of each part's cells
    "trace": cells_lib.WARMUP_KEY,
    "width": "model.d_model",
    "depth": "model.num_decoder_layers",
    "transfer": "model.d_model",
}


def part_cells(config: ml_collections.ConfigDict, part: str) -> list[AxisCell]:
  """Every cell of the part's sweep with its arm, x and lr (module docstring), in grid order."""
  cfg = part_config(config, part)
  out = []
  for c in grid_lib.cells(cfg):
    x = cells_lib.config_value(c.params, cfg, X_KEYS[part])
    if x is None:  # a size placeholder: the preset's
      raise invalid(X_KEYS[part], None, f"set by the {part} part's grid or overrides (configs/atlas.py)")
    lr = float(cells_lib.config_value(c.params, cfg, cells_lib.LR_KEY))
    out.append(AxisCell(part, cells_lib.method_of(c, cfg.sweep.grid), float(x), lr, c))
  return out
