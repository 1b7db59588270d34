"""main.py's sweep and claim modes, from the resolved config and workdir to the command's exit status.

  * `parallel(config)`: whether the command runs as `sweep.parallel` processes of itself (stage `run`, k > 1);
  * `run_parallel(config, workdir, argv)`: those k processes, each a shard of this one's runs on its own devices,
    started before this process touches a device (JAX would take the GPUs' memory); a claim's processes train, this
    one runs its extension rounds and decides (experiments/run.py);
  * `run_sweep_or_claim(config, workdir)`: every cell × seed in <workdir>/cells/ (a claim: its sweep, then its
    verdict), diverged and crashed runs recorded; the grid and the shard are checked first, one line each.
Exit statuses (train/cli.py): 0; `EXIT_CRASHED` a run crashed (the others all ran); `EXIT_INCOMPLETE` runs of this
shard's share held by live processes elsewhere; `EXIT_PREEMPTED` / `EXIT_INTERRUPTED` a signal stopped the sweep;
`EXIT_CONFIG` a bad grid or shard, before any compute.
"""

from typing import Any

from absl import logging

import experiments.grid
import experiments.run
import experiments.shard
import experiments.sweep
import train.cli
import train.stops
from train.cli import config_boundary


def parallel(config: Any) -> bool:
  """Whether main.py starts `sweep.parallel` processes of itself instead of running the sweep or claim here."""
  return (
      config.mode in ("sweep", "claim")
      and config.groups["sweep"].parallel > 1
      and config.groups["sweep"].stage == "run"
  )


def run_parallel(config: Any, workdir: str, argv: list[str]) -> int:
  """The exit status of k processes of this command (`argv`: its arguments), each a shard of this one's runs."""
  sweep = config.sweep
  shard = config_boundary(lambda: experiments.shard.resolve_shard(sweep.shard, sweep.num_shards)[:2])
  config_boundary(lambda: experiments.grid.cells(config.source))
  if config.mode == "claim":
    run = lambda: experiments.run.run_claim_parallel(config, workdir, argv, sweep.parallel, shard)
  else:
    run = lambda: experiments.shard.run_parallel(argv, sweep.parallel, shard)
  return config_boundary(run)


def run_sweep_or_claim(config: Any, workdir: str) -> int:
  """Runs the sweep (or the claim) of `config` in this process; its exit status (module docstring)."""
  # the grid (keys, values, syntax) and the array's shard, before any compute: one line each (EXIT_CONFIG)
  config_boundary(lambda: experiments.grid.cells(config.source))
  config_boundary(lambda: experiments.shard.resolve_shard(config.sweep.shard, config.sweep.num_shards))
  experiments.sweep.use_compilation_cache(config, workdir)  # recorded; the runs share compiled programs
  try:  # the resolved config: its typed groups are not typed again below
    if config.mode == "claim":
      crashed = experiments.run.run_claim(config, workdir)["runs"].get("crashed", 0)
    else:
      crashed = sum(r["outcome"] == "crashed" for r in experiments.sweep.run_sweep(config, workdir))
  except train.stops.Preempted as e:
    logging.warning("Sweep %s; rerun the same command to resume", e)
    return train.cli.exit_code(e)
  except experiments.sweep.SweepIncomplete as e:
    logging.error("Sweep incomplete: %s", e)
    return train.cli.EXIT_INCOMPLETE
  if crashed:
    logging.error("%d run(s) crashed (tracebacks above; results.jsonl has their errors)", crashed)
    return train.cli.EXIT_CRASHED
  return 0
