"""One claim end to end: its sweep (experiments.sweep, resumable), then measure, verdict and figures, into claim.json.

Contract: `run_claim(config, workdir)` takes a claim config (configs/claims/<name>.py: mode 'claim', the `claim`
group), runs its sweep in `workdir` (finished runs skipped, diverged and crashed runs recorded), then `decide`s:
`measure(results)`, `verdict(measured)`, `figure(...)` into `workdir`, and writes `<workdir>/claim.json`: the
claim's identity (number, statement, source, paper scale), `scale` and `settings` (the sizes actually run, in words),
`data` (which data: name, languages, folder), `thresholds`, `summary`, `tables`, `measured`, `verdict`, `reason`, `figures`,
`runs` (outcome counts), `provenance`, `seconds` (the runs' summed wall times, `run_seconds`) and the time.
`decide` alone re-decides a finished sweep without training.

`sweep.parallel=k` (main.py): `run_claim_parallel` starts k processes of main.py per round (experiments/shard.py),
each a shard of the round's runs with `claim.decide=false`; between rounds it reads the runs' records, so an adaptive
grid's extension rounds are trained k at a time too, and it decides once at the end. It never touches a device (its
JAX is the CPU's), so the children have the GPUs to themselves.
"""

import copy
import datetime
import json
import os
from typing import Any, Callable, Sequence

import jax
from absl import logging

from experiments import grid as grid_lib
from experiments import provenance as provenance_lib
from experiments import report, study
from experiments import shard as shard_lib
from experiments import sweep as sweep_lib
from experiments.registry import ClaimConfig, get_claim
from train import config as config_lib
from train import metrics as metrics_lib

GROUPS = {**sweep_lib.GROUPS, "claim": ClaimConfig}  # the groups above train/ that main.py resolves

RESULT_FILE = "claim.json"


def data_description(config: Any) -> dict:
  d = config.data
  out = {"name": d.name}
  if d.name == "embedded":
    out.update(note="the synthetic offline translation task (train/data/grammar.py)", num_train=d.embedded.num_train)
  else:
    out.update(dir=portable_path(d.dir), source_lang=d.source_lang, target_lang=d.target_lang)
  return out


def portable_path(path: str) -> str:
  """`path` as a record may state it: relative to the repository (e.g. '../shared/data/multi30k') when it is a local
  path, a URI as it is; never this machine's absolute path."""
  if not path or "://" in path:
    return path
  return os.path.relpath(os.path.abspath(path), provenance_lib.REPO)


def decide(config: Any, workdir: str, records: list[dict], seconds: float = float("nan")) -> dict:
  """measure → verdict → figures of the claim `config.claim.name` on its sweep's `records`; writes claim.json.
  `config`: the resolved claim config (a ConfigDict is resolved at this door)."""
  config = config_lib.resolve(config, groups=GROUPS)
  cc, sweep, source = config.claim, config.sweep, config.source  # the study reads the config as written
  claim = get_claim(cc.name)
  swept = grid_lib.swept_keys(source)
  counts = grid_lib.seed_counts(source)
  settings = report.fixed_settings(source, swept, counts, sweep.first_seed)
  results = study.Results(workdir, records, source, settings)
  measured = claim.measure(results)
  verdict = claim.verdict(measured)
  primary = jax.process_index() == 0  # every process measures; process 0 alone writes
  figures = claim.figure(measured, results, workdir, settings) if primary else []
  outcomes = {}
  for r in records:
    outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
  result = study.jsonable(
      dict(
          claim=claim.name,
          number=claim.number,
          statement=claim.statement,
          source=claim.source,
          paper_scale=claim.paper_scale,
          scale=cc.scale,
          settings=settings,
          swept=swept,
          seeds=counts[0] if len(counts) == 1 else list(counts),
          data=data_description(source),
          thresholds=claim.thresholds,
          summary=claim.summary(measured),
          tables=claim.tables(measured),
          measured=measured,
          verdict=verdict.verdict,
          reason=verdict.reason,
          figures=list(figures),
          runs=outcomes,
          provenance=provenance_lib.provenance(),
          trained_at=provenance_lib.trained_at([r.get("provenance") for r in records]),
          seconds=round(float(seconds), 1) if seconds == seconds else None,
          finished=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
      )
  )
  if primary:
    metrics_lib.write_text_atomic(os.path.join(workdir, RESULT_FILE), json.dumps(result, indent=1))  # a URI too
  return result


def run_seconds(records: list[dict]) -> float:
  """The claim's compute: the sum of its runs' wall times (each recorded by the invocation that ended the run), so a
  claim re-decided over finished runs states what they took, not the seconds of its skipping them; NaN if none is
  recorded."""
  times = [r["wall_time_s"] for r in records if r.get("wall_time_s") is not None]
  return float(sum(times)) if times else float("nan")


def run_claim(config: Any, workdir: str, *, emit: Callable[[str], Any] = logging.info) -> dict:
  """Runs (or resumes) the claim's sweep in `workdir`, then `decide`s; returns the claim.json dict. A shard of a job
  array decides only when it gathered every run (experiments/shard.py); `sweep.stage=prepare` and
  `claim.decide=false` (the processes of `sweep.parallel`: `run_claim_parallel`) never: they return just their runs'
  outcome counts. An adaptive grid's extension rounds run
  in the shard that gathered, every added run of them (the other shards have ended; the runs' claims keep a shard
  that gathered at the same moment from training one twice), so that the claim is decided."""
  config = config_lib.resolve(config, groups=GROUPS)  # the door: main.py's resolved config as it is
  cc = config.claim
  claim = get_claim(cc.name)  # an unknown claim fails before any compute
  records = sweep_lib.run_sweep(config, workdir, emit=emit)
  expected = grid_lib.num_runs(config.source)
  if not cc.decide:  # a process of `run_claim_parallel`: its parent extends and decides
    return dict(runs=_counts(records))
  for round_ in range(claim.max_rounds if claim.extend else 0):  # an adaptive grid (experiments/study.py)
    if len(records) < expected:
      break
    grid = _next_round(claim, config.source, workdir, records, round_ + 1, emit)
    if grid is None:
      break
    source = copy.deepcopy(config.source)
    source.sweep.grid = grid
    source.sweep.shard = "0/1"  # the round's runs are all this process's (docstring)
    config = config_lib.resolve(source, groups=GROUPS)
    records = sweep_lib.run_sweep(config, workdir, emit=emit)
    expected = grid_lib.num_runs(config.source)
  if len(records) < expected:  # sweep.stage=prepare, or a shard of a job array whose sweep other shards still run
    emit(f"Claim {cc.name}: {len(records)} of {expected} runs recorded here; decided once every run is done")
    return dict(runs=_counts(records))
  return _decide_and_say(config, workdir, records, emit)


def _next_round(claim: study.Study, config: Any, workdir: str, records: list[dict], round_: int, emit) -> Any:
  """The grid of an adaptive claim's extension round `round_` (1-based) from the runs so far, said in a line; None
  when the grid is complete. `config`: the claim's ConfigDict (a resolved config's `source`)."""
  additions = claim.extend(study.Results(workdir, records, config))
  written = _grid_text(config)
  grid = grid_lib.extend_grid(written, config, additions)
  if grid == written:
    return None
  emit(f"Claim {claim.name}: round {round_} of at most {claim.max_rounds} adds {additions}")
  return grid


def _grid_text(config: Any) -> str:
  """The grid of the claim's ConfigDict as `sweep.grid` writes it: an extension round's grid, and what the processes
  of `sweep.parallel` get on their command line (it takes the place of the file's `sweep.products`)."""
  return config.sweep.grid or grid_lib.format_grid(grid_lib.sweep_products(config))


def _decide_and_say(config: Any, workdir: str, records: list[dict], emit) -> dict:
  config = config_lib.resolve(config, groups=GROUPS)
  result = decide(config, workdir, records, run_seconds(records))
  scale = config.claim.scale
  emit(f"Claim {result['number']} ({result['claim']}, scale {scale}): {result['verdict']}. {result['reason']}")
  return result


def _counts(records: list[dict]) -> dict[str, int]:
  return {o: sum(r["outcome"] == o for r in records) for o in ("finished", "diverged", "crashed")}


def run_claim_parallel(
    config: Any,
    workdir: str,
    argv: Sequence[str],
    k: int,
    shard: tuple[int, int],
    *,
    emit: Callable[[str], Any] = logging.info,
) -> int:
  """`sweep.parallel=k` for a claim (module docstring): each round's runs in k processes of `main.py <argv>`, this
  invocation's `shard` of the first round and every run of the extension rounds (the other shards of a job array
  have ended when they start), then `decide`. Returns the first non-zero exit status of a round's processes, else 0
  (also when other shards' runs are not done yet: the shard that ends last decides)."""
  config = config_lib.resolve(config, groups=GROUPS)  # the door: main.py's resolved config as it is
  cc = config.claim
  claim = get_claim(cc.name)
  jax.config.update("jax_platforms", "cpu")  # records and figures only: the devices are the children's
  keep = [a for a in argv if not a.startswith(("--config.sweep.grid=", "--config.claim.decide="))]
  config = copy.deepcopy(config.source)  # the rounds' grids are set on it
  for round_ in range(claim.max_rounds + 1 if claim.extend else 1):
    worker = [*keep, f"--config.sweep.grid={_grid_text(config)}", "--config.claim.decide=false"]
    code = shard_lib.run_parallel(worker, k, shard if round_ == 0 else (0, 1))
    if code:
      return code
    gather = copy.deepcopy(config)
    gather.sweep.stage, gather.sweep.shard = "gather", "0/1"
    records = sweep_lib.run_sweep(gather, workdir, emit=emit)
    if len(records) < grid_lib.num_runs(config):
      emit(f"Claim {cc.name}: {len(records)} runs recorded; decided by the shard that ends last")
      return 0
    grid = _next_round(claim, config, workdir, records, round_ + 1, emit) if round_ < claim.max_rounds else None
    if grid is None:
      break
    config.sweep.grid = grid
  _decide_and_say(config, workdir, records, emit)
  return 0
