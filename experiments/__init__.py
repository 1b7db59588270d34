"""Sweeps over any config keys × seeds, run through the same code as main.py's train mode (train.loop, analysis.run).

    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3
    python main.py --config=configs/sweeps/warmup.py --config.sweep.grid='optim.warmup_steps=0,400;init.scheme=bert'

The runner: `sweep_config` types `config.sweep` (`SweepConfig`), `grid` parses the grid into cells; `sweep.run_sweep` runs them
(resumable, diverged and crashed runs recorded as outcomes); `report` writes a sweep's table and figures, `plots` is
the figures' kit; `study` is the contract of a study and `registry` the studies; `run` runs one claim (its sweep,
then measure / verdict / figures into claim.json); `reproduce` runs every claim and `reproduction` writes
REPRODUCTION.md and ATLAS.md from their records; `provenance` says where a result came from; `command` is main.py's
sweep and claim modes (to an exit status). `claims/` holds the studies alone (the papers' claims and the atlas's
questions) and the rules several of them share. Above `analysis/` and `train/`; only main.py imports it.
"""

from experiments.grid import cells, parse_grid
from experiments.hooks import step_hooks
from experiments.run import GROUPS  # the groups above train/ that main.py resolves: analysis, sweep, claim
from experiments.sweep import analyze, run_sweep
from experiments.sweep_config import SweepConfig

__all__ = ["GROUPS", "SweepConfig", "analyze", "cells", "parse_grid", "run_sweep", "step_hooks"]
