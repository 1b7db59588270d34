"""Sweeps over any config keys × seeds, run through the same code as main.py's train mode (train.loop, analysis.run).

    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3
    python main.py --config=configs/sweeps/warmup.py --config.sweep.grid='optim.warmup_steps=0,400;init.scheme=bert'

`grid` parses `config.sweep` (`SweepConfig`) and the grid into cells; `sweep.run_sweep` runs them (resumable,
diverged and crashed runs recorded as outcomes); `report` writes the table and figures; `provenance` says where a
result came from. Above `analysis/` and `train/`; only main.py imports it.
"""

from experiments.grid import SweepConfig, cells, parse_grid
from experiments.sweep import GROUPS, analyze, run_sweep

__all__ = ["GROUPS", "SweepConfig", "analyze", "cells", "parse_grid", "run_sweep"]
