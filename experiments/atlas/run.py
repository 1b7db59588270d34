"""The atlas driver: its parts' sweeps, in the order asked, cell by cell, the report rewritten after each cell.

Contract: `run_atlas(config, workdir, out, parts=PARTS)` runs (or resumes) each part in `parts` (default: every one of
`experiments.atlas.axes.PARTS`, in that order) in `<workdir>/<part>/` through `experiments.sweep.run_sweep`:
  init      experiments.atlas.cells.init_config: one cell per method × seed, one step, the step-0 curvature in
            `analysis/step_0/`;
  train     the config's grid (method × warmup × lr), no analysis;
  length    experiments.atlas.length.probe_config: Post-LN + warmup vs Pre-LN, long, at one lr (the training-length
            probe);
  trace, width, depth, transfer  experiments.atlas.axes.part_config (`config.atlas.<part>`).
Every part's grid and every cell's config are checked before any compute (`train.config.resolve`, as the sweep
does). Each cell runs as a one-cell sweep (a one-cell grid has the cell's own directory name, so the runs are the full
sweep's; it writes no sweep report), and after each cell `<out>/ATLAS.md` and its figures are rewritten from whatever
is finished (experiments.atlas.report; missing cells listed; a figure whose data did not change is not redrawn); a
final `run_sweep` over a part's full grid (every run skipped) writes its results.jsonl, results.md and figures.
Diverged and crashed runs are outcomes (the sweep layer's rule); Preempted / KeyboardInterrupt stop it, and rerunning
resumes.
"""

import os
from typing import Any, Callable, Sequence

import ml_collections
from absl import logging

import train.config
from experiments import grid as grid_lib
from experiments import sweep as sweep_lib
from experiments.atlas import axes as axes_lib
from experiments.atlas import cells as cells_lib
from experiments.atlas import length as length_lib
from experiments.atlas import report as report_lib


def plan(config: ml_collections.ConfigDict, part: str) -> tuple[ml_collections.ConfigDict, list[tuple[str, Any]]]:
  """(the part's sweep config, [(the progress line's name of a cell, the cell)]) in run order."""
  if part == "init":
    return cells_lib.init_config(config), [
        (f"at-init cell {k + 1}: {m}", c) for k, (m, c) in enumerate(cells_lib.init_cells(config))
    ]
  if part == "train":
    cfg = cells_lib.train_config(config)
    todo = cells_lib.training_cells(cfg)
    return cfg, [
        (f"cell {k + 1}/{len(todo)}: {c.method}, warmup {c.warmup}, lr {c.lr:g}", c.cell) for k, c in enumerate(todo)
    ]
  if part == "length":
    cfg = length_lib.probe_config(config)
    return cfg, [(f"length cell {k + 1}/2: {c.name}", c) for k, c in enumerate(grid_lib.cells(cfg))]
  cells = axes_lib.part_cells(config, part)
  what = {"trace": "", "width": ", d={:g}", "depth": ", N={:g}", "transfer": ", d={:g}"}[part]
  return axes_lib.part_config(config, part), [
      (
          f"{part} cell {k + 1}/{len(cells)}: {c.arm}{what.format(c.x)}"
          + (f", lr {c.lr:g}" if part == "transfer" else ""),
          c.cell,
      )
      for k, c in enumerate(cells)
  ]


def _check(cfg: ml_collections.ConfigDict, cells: list, part: str) -> None:
  """Every cell × seed of a part through the config boundary, before any compute (the sweep's own check)."""
  for _, cell in cells:
    for seed in range(cfg.sweep.seeds):
      try:
        train.config.resolve(grid_lib.cell_config(cfg, cell, seed), groups=sweep_lib.GROUPS)
      except ValueError as e:
        raise ValueError(f"atlas part {part}, cell {cell.name}, seed {seed}: {e}") from None


def run_atlas(
    config: ml_collections.ConfigDict,
    workdir: str,
    out: str,
    *,
    parts: Sequence[str] = axes_lib.PARTS,
    command: str = "",
    emit: Callable[[str], Any] = logging.info,
) -> dict:
  """Runs or resumes `parts` of the atlas of `config` in `workdir`; returns the report's measured summary."""
  parts = axes_lib.parse_parts(",".join(parts))
  plans = {part: plan(config, part) for part in parts}  # every grid checked before any compute
  for part, (cfg, cells) in plans.items():
    _check(cfg, cells, part)
  summary = None
  for part, (cfg, cells) in plans.items():
    part_dir = os.path.join(workdir, part)
    for name, cell in cells:
      emit(f"atlas {name}")
      sweep_lib.run_sweep(cells_lib.single_cell_config(cfg, cell), part_dir, emit=emit, write_report=False)
      summary = report_lib.write(config, workdir, out, command=command)
    sweep_lib.run_sweep(cfg, part_dir, emit=emit)  # every run done: the part's full results.jsonl / results.md
  return summary if summary is not None else report_lib.write(config, workdir, out, command=command)
