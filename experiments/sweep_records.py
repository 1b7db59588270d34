"""What a sweep records of each run: its `sweep_record.json` and the rows of the sweep's results.jsonl.

Contract: `run_record` is one run's record (fields: experiments/sweep.py's module docstring): its cell, seed and
outcome, the last value of each `<split>/<name>` in metrics.jsonl (`final_metrics`), its class by
analysis/outcomes.py's rule (`run_class`), status.json, its folder relative to the sweep's workdir and the sweep's
provenance. `stored_record` reads back the record of a run this invocation did not train (its sweep_record.json,
else one rebuilt from status.json). `write_hparams` gives TensorBoard's HParams tab the same values. A JSON file that
does not parse is read as absent, with a warning naming it (`read_json`).
"""

import json
import os
import uuid
from typing import Optional

import tensorboardX
from absl import logging
from etils import epath

import train.loop
from analysis import outcomes
from experiments import grid as grid_lib
from experiments import report
from train import metrics as metrics_lib

RECORD_FILE = "sweep_record.json"


def read_json(path: str) -> Optional[dict]:
  """The JSON object in `path` (local or a URI), None when there is no such file or it does not parse (torn: a
  warning names it, and the caller rebuilds what it held)."""
  path = epath.Path(path)
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except ValueError as e:
    logging.warning("%s does not parse (%s): read as absent", path, e)
    return None


def final_metrics(run_workdir: str) -> dict[str, float]:
  """The last value of every `<split>/<name>` of the run's metrics.jsonl."""
  out: dict[str, float] = {}
  for record in metrics_lib.read_metrics(run_workdir):
    out.update({f"{record['split']}/{k}": v for k, v in record.items() if k not in ("step", "split")})
  return out


def _record_from_status(run_workdir: str) -> dict:
  """The record of a run ended outside this sweep's bookkeeping (no sweep_record.json): from its status.json."""
  status = metrics_lib.read_status(run_workdir) or {}
  return {"outcome": status.get("status"), "error": None, "wall_time_s": None, "resumed_from_step": None}


def write_jsonl(path: str, records: list[dict]) -> None:
  metrics_lib.write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


def run_class(run_workdir: str) -> dict:
  """{'class', 'class_reason'} of a run by analysis/outcomes.py's rule (None where it does not apply: no training
  step, or no step-0 evaluation to compare with because `train.eval_at_init` is off)."""
  stats = read_json(os.path.join(run_workdir, train.loop.DATA_STATS_FILE))
  outcome = outcomes.classify_run(metrics_lib.read_metrics(run_workdir), metrics_lib.read_status(run_workdir), stats)
  return {"class": outcome and outcome.cls, "class_reason": outcome and outcome.reason}


def write_hparams(writer_dir: str, record: dict) -> None:
  """The run's cell values and seed as TensorBoard hparams, with its finite final metrics (none where tensorboardX
  cannot write `writer_dir`: train/metrics.py; results.jsonl has the same values)."""
  if reason := metrics_lib.tensorboard_unsupported(epath.Path(writer_dir)):
    logging.warning("No HParams events in %s: %s", writer_dir, reason)
    return
  hparams = {k: (v if isinstance(v, (bool, int, float, str)) else str(v)) for k, v in record["params"].items()}
  hparams.update(seed=record["seed"], outcome=record["outcome"])
  metrics = {f"hparam/{k}": v for k, v in record["final"].items() if isinstance(v, float) and v == v}
  # A unique file name: tensorboardX names event files by the second, and two runs can end within one.
  with tensorboardX.SummaryWriter(writer_dir, filename_suffix=f".{os.getpid()}.{uuid.uuid4().hex[:8]}") as writer:
    writer.add_hparams(hparams, metrics, name=f"{record['cell']}/seed_{record['seed']}")


def stored_record(cell: grid_lib.Cell, seed: int, rdir: str, workdir: str) -> dict:
  """The record of a run this invocation did not train: its sweep_record.json (written by whichever sweep or shard
  ran it) seen from this grid, else one from its status.json."""
  record = read_json(os.path.join(rdir, RECORD_FILE))
  if record is None:
    return run_record(cell, seed, rdir, _record_from_status(rdir), None, workdir)
  # A run made by a sweep of another grid (e.g. one cell of this union) records only that grid's keys; this sweep's
  # cell of the same name has every swept key (the base value where its product sets none).
  record["params"], record["arm"] = dict(cell.params), cell.arm
  record["workdir"] = report.relative(rdir, workdir)  # this sweep's path to it (another's may have run it)
  return record


def run_status(run_workdir: str) -> Optional[str]:
  status = metrics_lib.read_status(run_workdir)
  return status and status.get("status")


def run_record(cell: grid_lib.Cell, seed: int, rdir: str, base: dict, prov: Optional[dict], workdir: str) -> dict:
  """The results.jsonl record of one run (module docstring)."""
  return {
      "cell": cell.name,
      "params": dict(cell.params),
      "arm": cell.arm,
      "seed": seed,
      **base,
      "final": final_metrics(rdir),
      **run_class(rdir),
      "status": metrics_lib.read_status(rdir),
      "workdir": report.relative(rdir, workdir),  # relative to the sweep's workdir
      "provenance": prov,
  }
