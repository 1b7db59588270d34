"""The sweep runner: every cell of the sweep's grid × seeds trained by `train.loop` (main.py's train mode), resumable.

Contract: `run_sweep(config, workdir)` takes the resolved config (`train.config.Config`, its `sweep` typed; a ConfigDict
is resolved at the door), validates every cell's config before any compute (`train.config.resolve`; an error names the
cell), then for each cell and seed s of `grid.cell_seeds` (from `sweep.first_seed`; train.seed = s) runs
`train.loop.setup` + `train_and_evaluate` in `<root>/cells/<cell>/seed_<s>/` (`<root>`: `sweep.cells_dir`, else the
workdir; one SentencePiece model in `<root>/tokenizer/` unless `data.tokenizer_dir` says otherwise).
`sweep.analysis_at_init` runs `analysis.run.run_analysis` first, into `analysis/step_0/` as main.py does;
`sweep.analysis_steps` restores and analyzes those checkpoints of a finished run into `analysis/step_<k>/` (each a
checkpoint the run keeps, checked before any compute). Trackers (`metrics.writers`) group the runs by `sweep_name`.
  * resumable: a run whose status.json says `finished` or `diverged` is skipped (its record kept); any other resumes
    from its latest checkpoint; a run whose config.json differs from its cell's in what it trains (`mode` and
    `train.config.TRAINED`, `data.tokenizer_dir` excepted) is an error before any compute;
  * outcomes: `finished`; `diverged` (`train.stops.Diverged`: a result, the sweep goes on); `crashed` (any other
    exception: recorded and logged, the sweep goes on); `Preempted` and KeyboardInterrupt stop the sweep;
  * one record per run in its `sweep_record.json`, gathered (grid order) into `<workdir>/results.jsonl` after every
    run: `cell`, `params`, `arm` (experiments/grid.py), `seed`, `outcome`, `error`, `final` (the last value of each
    `<split>/<name>` in metrics.jsonl), `class` and `class_reason` (analysis/outcomes.py; None without
    `train.eval_at_init`), `status`, `wall_time_s`, `resumed_from_step`, `workdir` and `provenance`; then
    `results.md` and the figures (experiments/report.py) and TensorBoard's HParams in `<workdir>/tensorboard_hparams/`;
  * progress: `cell k/K, seed s: <cell> | elapsed H:MM:SS | ETA H:MM:SS | <run dir>` before each run, the ETA from
    the mean time of the runs this invocation ended.
Only process 0 writes the sweep's files (every process runs every cell: the loop is collective), each through
`etils.epath`, so the workdir and `sweep.cells_dir` may be a URI such as `gs://bucket/sweep` (experiments/shard.py).
"""

import contextlib
import json
import os
import time
import traceback
from typing import Any, Callable, Optional

import jax
from absl import logging
from etils import epath

import analysis.config
import analysis.run
import train.config
import train.experiment
import train.loop
import train.stops
from experiments import grid as grid_lib
from experiments import hooks, report, sweep_config
from experiments import provenance as provenance_lib
from experiments import shard as shard_lib
from experiments import sweep_records as records_lib
from train import metrics as metrics_lib

RESULTS_FILE = "results.jsonl"
DONE = ("finished", "diverged")  # statuses a rerun skips


class SweepIncomplete(RuntimeError):
  """A shard (or a whole sweep) ended with runs of its own share undone: claimed by a live process elsewhere.
  main.py exits EXIT_INCOMPLETE, so a job array's task that did not do its share does not report success."""


GROUPS = {
    "analysis": analysis.config.AnalysisConfig,
    "sweep": sweep_config.SweepConfig,
}  # typed by train.config.resolve


def run_dir(workdir: str, cell: grid_lib.Cell, seed: int) -> str:
  return os.path.join(workdir, "cells", cell.name, f"seed_{seed}")  # a URI stays one: gs://b/w/cells/...


def analyze(exp: train.experiment.Experiment, workdir: str, progress: Optional[bool] = None) -> str:
  """The configured analysis (`config.analysis`) of the experiment's current state (step k: at init, or a restored
  checkpoint) into `<workdir>/analysis/step_<k>/`, on the run's mesh; main.py's analyze mode and `analysis.at_init`
  and a sweep's `sweep.analysis_at_init`. Returns that folder. Lanczos progress lines as `analysis.progress` says
  (`analysis.config.progress_enabled`: by default only for models of 5M parameters and more) unless `progress` is
  given; a sweep's runs pass `progress=False`: no host callback in the programs, so the persistent compilation cache
  serves them to the next run of the same shapes (a cell's next seed) instead of compiling them again."""
  config = exp.config
  if progress is None:
    size = sum(x.size for x in jax.tree.leaves(exp.state.params))
    progress = analysis.config.progress_enabled(config.analysis.progress, size)
  step = int(exp.state.step)
  n, size = config.analysis.num_batches, config.analysis.batch_size
  out_dir = os.path.join(workdir, "analysis")
  analysis.run.run_analysis(
      config.analysis,
      model=exp.model,
      variables=exp.state.model_variables(),
      batches=exp.batches(n, size),
      out_dir=out_dir,
      label=f"step_{step}",
      init_fn=exp.init_variables,
      step=step,
      batch_source=(
          f"train split of data.name={config.data.name!r}: the first {n} global batch(es) of {size} sequences of a "
          f"fresh pass (data.shuffle_seed={config.data.shuffle_seed}), split over the run's {jax.device_count()} "
          "device(s)"
      ),
      mlm_mask_rate=config.train.mlm_mask_rate,
      print_fn=logging.info,
      mesh=exp.mesh,
      optim_config=config.optim,
      progress=progress,
  )
  return os.path.join(out_dir, f"step_{step}")


def _analyzed(run_workdir: str, step: int) -> bool:
  return (epath.Path(run_workdir) / "analysis" / f"step_{step}" / "metadata.json").exists()


def analyze_checkpoints(config: train.config.Config, run_workdir: str, steps: tuple) -> None:
  """Analyzes each checkpoint step of `steps` not analyzed yet (restored, on the batches of `analyze`)."""
  for step in steps:
    if not _analyzed(run_workdir, step):
      analyze(train.loop.setup(config, run_workdir, restore_step=step), run_workdir, progress=False)


def run_one(
    config: train.config.Config, run_workdir: str, analysis_at_init: bool, analysis_steps: tuple = ()
) -> tuple[str, Optional[str], int]:
  """Trains one run (and analyzes it: module docstring); returns (outcome, error or None, the step it started
  from). Preempted propagates."""
  start = 0
  try:
    with train.stops.stops_during_setup(run_workdir):  # a signal here: the run's status says so, the sweep stops
      exp = train.loop.setup(config, run_workdir)
      start = exp.start_step
      if (analysis_at_init or config.analysis.at_init) and start == 0:  # the sweep's, or the cell's own (its grid)
        analyze(exp, run_workdir, progress=False)
    train.loop.train_and_evaluate(exp, hooks.step_hooks(exp))
    analyze_checkpoints(config, run_workdir, analysis_steps)
  except train.stops.Diverged as e:
    logging.warning("Run %s diverged: %s", run_workdir, e)
    return "diverged", str(e), start
  except train.stops.Preempted:
    raise
  except Exception as e:  # noqa: BLE001 (a crashed run is an outcome; the sweep goes on)
    logging.error("Run %s crashed:\n%s", run_workdir, traceback.format_exc())
    return "crashed", f"{type(e).__name__}: {e}", start
  return "finished", None, start


def runs_root(config: Any, workdir: str) -> str:
  """The folder holding the sweep's run folders and shared tokenizer: `sweep.cells_dir`, else the workdir."""
  return config.sweep.cells_dir or workdir


def use_compilation_cache(config: Any, workdir: str) -> Optional[str]:
  """Turns on JAX's persistent compilation cache per `sweep.compilation_cache` ('auto': `<runs root>/jax_cache`; a
  folder; '' off) for this process, before any compute; returns the folder (None: off). main.py's sweep and claim
  modes call it once: a sweep's runs compile the same programs again (a fresh model and closures per run), so
  with the cache the second seed of an at-init analysis reuses the first's executables instead of recompiling."""
  cache = config.sweep.compilation_cache
  if not cache:
    return None
  path = os.path.join(runs_root(config, workdir), "jax_cache") if cache == "auto" else cache
  jax.config.update("jax_compilation_cache_dir", path)
  return path


def sweep_name(workdir: str) -> str:
  """The sweep's name: its workdir's last part (`runs/warmup` and `gs://b/sweeps/warmup/` are 'warmup'); the group
  of its runs in a tracker (`metrics.group`, when the config leaves it empty)."""
  return os.path.basename(os.fspath(workdir).rstrip("/")) or "sweep"


def plan(config: Any, workdir: str) -> list[tuple[grid_lib.Cell, int, train.config.Config]]:
  """(cell, seed, resolved config) of every run of the sweep, in grid order, each checked before any compute: the
  config boundary (an error names the cell), the run's config.json of an earlier invocation
  (`train.config.check_unchanged`) and `sweep.analysis_steps`. `run_sweep`'s run stage then checks the memory of the
  runs it has to train, on the devices that train them (`check_memory`). A driver running several sweeps checks them all
  with this first. `config`: a resolved `train.config.Config` (main.py's), or its ConfigDict (resolved here)."""
  config = train.config.resolve(config, groups=GROUPS)  # the door: a resolved Config (main.py's) as it is
  sweep = config.sweep
  root = runs_root(config, workdir)
  runs = []
  for cell in grid_lib.cells(config.source):
    for seed in grid_lib.cell_seeds(cell, sweep):
      cell_config = grid_lib.cell_config(config.source, cell, seed, tokenizer_dir=os.path.join(root, "tokenizer"))
      if "metrics" in cell_config and not cell_config.metrics.group:
        cell_config.metrics.group = sweep_name(workdir)  # the runs' W&B / Trackio group
      try:
        resolved = train.config.resolve(cell_config, groups=GROUPS)
      except ValueError as e:
        raise ValueError(f"sweep cell {cell.name}, seed {seed}: {e}") from None
      train.config.check_unchanged(run_dir(root, cell, seed), resolved, f"sweep cell {cell.name}, seed {seed}")
      sweep_config.check_analysis_steps(sweep.analysis_steps, resolved.train, f"sweep cell {cell.name}, seed {seed}")
      runs.append((cell, seed, resolved))
  return runs


def _seeds_text(cells: list[grid_lib.Cell], sweep: sweep_config.SweepConfig) -> str:
  """The seeds per cell, for the sweep's first line: '3', or '2–5' where products run their own (`cell_seeds`)."""
  counts = sorted({len(grid_lib.cell_seeds(c, sweep)) for c in cells} or {sweep.seeds})
  return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def analyzed(sweep: sweep_config.SweepConfig, config: train.config.Config) -> bool:
  """Whether a run of the sweep is analyzed (`run_one`): at init (`sweep.analysis_at_init`, `analysis.at_init`) or
  at checkpoints (`sweep.analysis_steps`)."""
  return bool(sweep.analysis_at_init or sweep.analysis_steps or config.analysis.at_init)


def check_memory(runs: list, todo: list[int], sweep: sweep_config.SweepConfig) -> None:
  """Before the first of `todo`'s runs trains: the Lanczos bases of each of their cells' curvature records and
  analyses fit this process's devices (`hooks.check_before_runs`, once per cell: its seeds share its model and mesh).
  Only the run stage calls it: `prepare` and `gather` may run where no run trains (a login node, a claim's CPU parent).
  """
  checked = set()
  for i in todo:
    cell, _, resolved = runs[i]
    if cell.name not in checked:
      checked.add(cell.name)
      hooks.check_before_runs(resolved, f"sweep cell {cell.name}", analyzed(sweep, resolved))


def run_sweep(
    config: Any,
    workdir: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    emit: Callable[[str], Any] = logging.info,
    on_run: Optional[Callable[[list[dict]], Any]] = None,
    env: Optional[dict] = None,
) -> list[dict]:
  """Runs (or resumes) the sweep of `config` (a resolved `train.config.Config`, main.py's; a ConfigDict is resolved
  at this door) in `workdir` (module docstring); returns the records, grid order.
  `on_run(records)`, if given, is called after each run this invocation ends, with the records so far (grid order, up
  to that run; results.jsonl holds the same): a study rewrites its report from them as the runs land. A shard of a
  job array (`sweep.shard`, experiments/shard.py; `env`: the variables it reads, default os.environ) runs only its
  runs, writes no top-level file and calls no `on_run`; the shard that finds every run of the sweep done gathers."""
  config = train.config.resolve(config, groups=GROUPS)  # the door: a resolved Config (main.py's) as it is
  sweep = config.sweep
  cells = grid_lib.cells(config.source)
  runs = plan(config, workdir)
  shard_i, shard_n, shard_source = shard_lib.resolve_shard(
      sweep.shard, sweep.num_shards, env, process_count=jax.process_count()
  )
  shard = (shard_i, shard_n)
  if sweep.stage == "prepare":
    return prepare(config, workdir, runs, emit=emit)
  if sweep.stage == "gather":
    return gather(config, workdir, runs, emit=emit)
  sharded = shard_n > 1
  primary = jax.process_index() == 0
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  prov = provenance_lib.provenance()
  root = runs_root(config, workdir)
  todo = [
      i
      for i, (c, s, _) in enumerate(runs)
      if records_lib.run_status(run_dir(root, c, s)) not in DONE and shard_lib.mine(i, shard)
  ]
  check_memory(runs, todo, sweep)
  owner = shard_lib.owner_id()
  ours = sum(shard_lib.mine(i, shard) for i in range(len(runs)))
  emit(
      f"Sweep in {workdir}: {len(cells)} cell(s) × {_seeds_text(cells, sweep)} seed(s) = {len(runs)} run(s)"
      + (f"; shard {shard_i}/{shard_n} ({shard_source}) runs {ours} of them" if sharded else "")
      + f"; {ours - len(todo)} already done, {len(todo)} to run"
  )
  t0, times, finished_times, records, held_elsewhere = clock(), [], [], [], []
  for i, (cell, seed, resolved) in enumerate(runs):
    if not shard_lib.mine(i, shard):
      continue  # another shard's run
    rdir = run_dir(root, cell, seed)
    k = cells.index(cell) + 1
    record_path = os.path.join(rdir, records_lib.RECORD_FILE)
    if i in todo:
      holder = shard_lib.claim_together(rdir, owner, sweep.claim_timeout_s)
      if holder is not None:
        emit(f"cell {k}/{len(cells)}, seed {seed}: {cell.name} | claimed by {holder}, skipped")
        held_elsewhere.append((f"{cell.name}/seed_{seed}", rdir, holder))
        continue
      left = len(todo) - todo.index(i)
      measured = finished_times or times  # a diverged run stops early: finished runs say what a run costs
      eta = sum(measured) / len(measured) * left if measured else None
      emit(
          f"cell {k}/{len(cells)}, seed {seed}: {cell.arm + ' | ' if cell.arm else ''}{cell.name} | elapsed {metrics_lib.format_duration(clock() - t0)} | "
          f"ETA {metrics_lib.format_duration(eta) if eta is not None else '?'} | {rdir}"
      )
      start = clock()
      try:
        with shard_lib.Heartbeat(rdir, owner, sweep.claim_timeout_s / 4) if primary else contextlib.nullcontext():
          outcome, error, resumed = run_one(resolved, rdir, sweep.analysis_at_init, sweep.analysis_steps)
      finally:  # ended, preempted or interrupted: the run is free for whoever comes next (a killed process leaves
        if primary:  # its claim, taken over once stale)
          shard_lib.release(rdir, owner)
      times.append(clock() - start)
      if outcome == "finished":
        finished_times.append(times[-1])
      base = {"outcome": outcome, "error": error, "wall_time_s": times[-1], "resumed_from_step": resumed}
      record = records_lib.run_record(cell, seed, rdir, base, prov, workdir)
      if primary:
        epath.Path(rdir).mkdir(parents=True, exist_ok=True)  # a run that crashed in setup may not have made it
        metrics_lib.write_text_atomic(record_path, json.dumps(record, indent=1))
        records_lib.write_hparams(os.path.join(workdir, "tensorboard_hparams"), record)
    else:
      emit(f"cell {k}/{len(cells)}, seed {seed}: {cell.name} | already {records_lib.run_status(rdir)}, skipped")
      if records_lib.run_status(rdir) == "finished" and not all(_analyzed(rdir, s) for s in sweep.analysis_steps):
        analyze_checkpoints(resolved, rdir, sweep.analysis_steps)  # steps added since the run finished
      record = records_lib.stored_record(cell, seed, rdir, workdir)
    records.append(record)
    if primary and not sharded:
      records_lib.write_jsonl(os.path.join(workdir, RESULTS_FILE), records)
    if on_run is not None and i in todo and not sharded:
      on_run(records)
  undone = [(name, holder) for name, rdir, holder in held_elsewhere if records_lib.run_status(rdir) not in DONE]
  if undone:  # this shard's own runs, held by live processes elsewhere: not done, so not a success
    raise SweepIncomplete(
        f"{len(undone)} run(s) of this shard's share not done, held by other live processes: "
        + "; ".join(f"{n} (by {h})" for n, h in undone[:5])
        + (" ..." if len(undone) > 5 else "")
        + ". Rerun once they end (or after sweep.claim_timeout_s if their owner died on another host)"
    )
  if sharded:
    left = [f"{c.name}/seed_{s}" for c, s, _ in runs if records_lib.run_status(run_dir(root, c, s)) not in DONE]
    if left:
      emit(
          f"Shard {shard_i}/{shard_n} done in {metrics_lib.format_duration(clock() - t0)}; {len(left)} run(s) of "
          "the sweep not done yet (other shards'); the shard that ends last gathers the results (or sweep.stage=gather)"
      )
      return records
    return gather(config, workdir, runs, emit=emit)
  if primary:
    _write_report(config, workdir, records)
  counts = {o: sum(r["outcome"] == o for r in records) for o in ("finished", "diverged", "crashed")}
  emit(
      f"Sweep done in {metrics_lib.format_duration(clock() - t0)}: "
      + ", ".join(f"{n} {o}" for o, n in counts.items())
      + f"; {workdir}/results.jsonl, results.md"
      + (", curves.png, final_metric.png" if config.train.num_steps else "")
  )
  return records


def _write_report(config: train.config.Config, workdir: str, records: list[dict]) -> None:
  sweep, source = config.sweep, config.source  # the report states the config as written ('auto' keys as given)
  swept = grid_lib.swept_keys(source)
  counts = grid_lib.seed_counts(source)
  report.write_report(records, workdir, swept=swept, metric=sweep.metric, config=source, seeds=counts)


def gather(config: train.config.Config, workdir: str, runs: list, *, emit: Callable[[str], Any]) -> list[dict]:
  """`sweep.stage=gather` (and the last shard to finish): results.jsonl, results.md and the figures from the record
  of every run of the sweep that is done (grid order); a run not done yet is named and left out."""
  root = runs_root(config, workdir)
  records, left = [], []
  for cell, seed, _ in runs:
    rdir = run_dir(root, cell, seed)
    if records_lib.run_status(rdir) in DONE:
      records.append(records_lib.stored_record(cell, seed, rdir, workdir))
    else:
      left.append(f"{cell.name}/seed_{seed}")
  if jax.process_index() == 0:
    epath.Path(workdir).mkdir(parents=True, exist_ok=True)
    records_lib.write_jsonl(os.path.join(workdir, RESULTS_FILE), records)
    _write_report(config, workdir, records)
  emit(
      f"Gathered {len(records)} of {len(runs)} run(s) into {workdir}/results.jsonl, results.md"
      + (f"; not done yet: {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}" if left else "")
  )
  return records


def prepare(config: train.config.Config, workdir: str, runs: list, *, emit: Callable[[str], Any]) -> list[dict]:
  """`sweep.stage=prepare`, once before a job array starts: every cell's config was checked (`plan`); the shared
  tokenizer is built in `<runs root>/tokenizer/` (the first run's data config: every run of a sweep reads the same
  data and vocabulary), so the shards find it instead of each training it. Trains nothing; returns no records."""
  if runs:
    import train.data  # noqa: PLC0415 (the data layer, only for this stage)

    train.data.build(runs[0][2].data, workdir=runs_root(config, workdir))
  emit(f"Prepared {len(runs)} run(s) in {runs_root(config, workdir)}: every cell's config checked, tokenizer built")
  return []
