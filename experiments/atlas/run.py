"""The atlas driver: its parts' sweeps, in the order asked, the report rewritten after each run.

Contract: `run_atlas(config, workdir, out, parts=PARTS)` runs (or resumes) each part in `parts` (default: every one of
`experiments.atlas.axes.PARTS`, in that order) in `<workdir>/<part>/` through `experiments.sweep.run_sweep`:
  init      experiments.atlas.cells.init_config: one cell per method × seed, one step, the step-0 curvature in
            `analysis/step_0/`;
  train     the config's grid (method × warmup × lr), no analysis;
  length    experiments.atlas.length.probe_config: Post-LN + warmup vs Pre-LN, long, at one lr (the training-length
            probe);
  trace, width, depth, transfer  experiments.atlas.axes.part_config (`config.atlas.<part>`).
`run_config` is main.py's atlas mode (`config.atlas.{parts, out, report_only, redecide}`):

    python main.py --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas
    python main.py --config=configs/atlas.py:cpu ... --config.atlas.parts=width,depth   # those parts only
    python main.py --config=configs/atlas.py:cpu ... --config.atlas.report_only=true    # only rewrite ATLAS.md
    python main.py --config=configs/atlas.py:cpu --config.atlas.redecide=true  # atlas.json re-decided, no runs

Every run of every part is checked before any compute (`experiments.sweep.plan`). After each run `<out>/ATLAS.md`
and its figures are rewritten from whatever is finished (experiments.atlas.report, which reads each part's
results.jsonl; missing cells listed; a figure whose data did not change is not redrawn), so results land as they
come. Diverged and crashed runs are outcomes (the sweep layer's rule); Preempted / KeyboardInterrupt stop it, and
rerunning resumes.
"""

import os
from typing import Any, Callable, Sequence

import ml_collections
from absl import logging

from experiments import sweep as sweep_lib
from experiments.atlas import axes as axes_lib
from experiments.atlas import cells as cells_lib
from experiments.atlas import length as length_lib
from experiments.atlas import report as report_lib


def plan(config: ml_collections.ConfigDict, part: str) -> ml_collections.ConfigDict:
  """The sweep config of one part of the atlas of `config`."""
  if part == "init":
    return cells_lib.init_config(config)
  if part == "train":
    return cells_lib.train_config(config)
  if part == "length":
    return length_lib.probe_config(config)
  return axes_lib.part_config(config, part)


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
  plans = {part: plan(config, part) for part in parts}
  for part, cfg in plans.items():  # every run of every part checked before any compute
    try:
      sweep_lib.plan(cfg, os.path.join(workdir, part))
    except ValueError as e:
      raise ValueError(f"atlas part {part}: {e}") from None
  summaries = []  # the report after each run
  write = lambda _: summaries.append(report_lib.write(config, workdir, out, command=command))
  for part, cfg in plans.items():
    emit(f"atlas part {part}")
    sweep_lib.run_sweep(cfg, os.path.join(workdir, part), emit=emit, on_run=write)
  return summaries[-1] if summaries else report_lib.write(config, workdir, out, command=command)


def run_config(config: ml_collections.ConfigDict, workdir: str, *, command: str = "") -> int:
  """main.py's atlas mode: runs or resumes the parts `config.atlas.parts` ('' = all) in `workdir` and writes the report
  into `config.atlas.out`; with `config.atlas.report_only`, runs nothing and rewrites the report from the workdir;
  with `config.atlas.redecide`, from `<atlas.out>/atlas/atlas.json`'s stored measurements by the current rules.
  Returns the number of runs that crashed (the report names them)."""
  a = config.atlas
  parts = axes_lib.parse_parts(a.parts)  # a bad part fails here, before any compute
  if a.report_only or a.redecide:
    report_lib.write(config, workdir, a.out, command=command, redecide=a.redecide)
    return 0
  m = run_atlas(config, workdir, a.out, parts=parts, command=command)
  outcomes = [o for r in m["methods"].values() for w in r["runs"].values() for os_ in w["outcomes"] for o in os_]
  return outcomes.count("crashed") + sum(part["outcomes"]["crashed"] for part in m["axes"].values())
