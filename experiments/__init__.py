"""Sweeps over any config keys × seeds, run through the same code as main.py's train mode (train.loop, analysis.run).

    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3
    python main.py --config=configs/sweeps/warmup.py --config.sweep.grid='optim.warmup_steps=0,400;init.scheme=bert'

`claims` builds the studies on it (one sweep config + measure / verdict / figure each): the papers' claims and the
atlas's questions (study 11, edge: the step-0 curvature against where training breaks, cell by cell). `grid` parses
`config.sweep` (`SweepConfig`) and the grid into cells; `sweep.run_sweep` runs them (resumable, diverged and crashed
runs recorded as outcomes); `report` writes the table and figures; `provenance` says where a result came from. Above
`analysis/` and `train/`; only main.py imports it.
"""

from experiments import claims
from experiments.grid import SweepConfig, cells, parse_grid
from experiments.hooks import step_hooks
from experiments.sweep import GROUPS as _SWEEP_GROUPS
from experiments.sweep import analyze, run_sweep

GROUPS = {**_SWEEP_GROUPS, "claim": claims.ClaimConfig.from_config}  # the groups main.py resolves above train/

__all__ = ["GROUPS", "SweepConfig", "analyze", "cells", "claims", "parse_grid", "run_sweep", "step_hooks"]
