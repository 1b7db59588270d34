"""The atlas driver: the at-init sweep, then the training sweep, both cell by cell, the report rewritten after each.

Contract: `run_atlas(config, workdir, out)` runs (or resumes) `<workdir>/init/` (experiments.atlas.cells.init_config:
one cell per method × seed, one step, the step-0 curvature in `analysis/step_0/`) and `<workdir>/train/` (the
config's grid, no analysis) through `experiments.sweep.run_sweep`, one cell at a time (a one-cell grid has
the cell's own directory name, so the runs are the full sweep's), and after each cell writes `<out>/ATLAS.md` and
its figures from whatever is finished (experiments.atlas.report; missing cells listed). A final `run_sweep` over the
full grid (every run skipped) writes the training sweep's results.jsonl and results.md. Diverged and crashed runs
are outcomes (the sweep layer's rule); Preempted / KeyboardInterrupt stop it, and rerunning resumes.
"""

import os
from typing import Any, Callable

import ml_collections
from absl import logging

from experiments import sweep as sweep_lib
from experiments.atlas import cells as cells_lib
from experiments.atlas import report as report_lib


def run_atlas(
    config: ml_collections.ConfigDict,
    workdir: str,
    out: str,
    *,
    command: str = "",
    emit: Callable[[str], Any] = logging.info,
) -> dict:
  """Runs or resumes the atlas of `config` in `workdir`; returns the report's measured summary (report.write)."""
  init_dir, train_dir = os.path.join(workdir, "init"), os.path.join(workdir, "train")
  train_cfg = cells_lib.train_config(config)
  todo = cells_lib.training_cells(train_cfg)  # the grid checked before any compute
  init_cfg = cells_lib.init_config(config)
  for k, (method, cell) in enumerate(cells_lib.init_cells(config)):  # the report after each method's step 0
    emit(f"atlas at-init cell {k + 1}: {method}")
    sweep_lib.run_sweep(cells_lib.single_cell_config(init_cfg, cell), init_dir, emit=emit)
    summary = report_lib.write(config, workdir, out, command=command)
  sweep_lib.run_sweep(init_cfg, init_dir, emit=emit)  # every run done: the at-init sweep's full results.jsonl
  for k, c in enumerate(todo):
    emit(f"atlas cell {k + 1}/{len(todo)}: {c.method}, warmup {c.warmup}, lr {c.lr:g}")
    sweep_lib.run_sweep(cells_lib.single_cell_config(train_cfg, c.cell), train_dir, emit=emit)
    summary = report_lib.write(config, workdir, out, command=command)
  sweep_lib.run_sweep(train_cfg, train_dir, emit=emit)  # every run done: the full results.jsonl / results.md
  return summary
