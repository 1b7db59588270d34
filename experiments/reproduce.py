"""Runs every claim at one scale, each through main.py in its own process, and writes the report.

    python -m experiments.reproduce --data_dir=<Multi30k folder> --scale=cpu          # every claim (~100 min)
    python -m experiments.reproduce --data_dir=<folder> --claims=warmup,tfixup        # some; the rest merged

Each claim runs `python main.py --config=configs/claims/<claim>.py:<scale> --config.data.dir=<data_dir>
--workdir=<runs>/<claim>` (resumable: rerunning skips finished runs), its output streamed to this console and to
`<runs>/<claim>/main.log`. Then claim.json and the figures are copied to `<out>/reproduction/<claim>/`, and
`<out>/REPRODUCTION.md` is written from every claim's claim.json there (claims not run by this invocation keep their
earlier results; a claim whose process left no claim.json is listed as inconclusive with its exit status and the end
of its log). With --readme, the README's results table is rebuilt from the same results; --report_only runs nothing
and only rewrites them; --redecide=<claims> applies those claims' current rules to the measurements their records
store (a rule changed, the runs are gone), and runs no claim unless --claims names some. Exits 1 if a claim's process
failed.

Results land as they come: the records of every run the claim's sweep has finished or seen diverge (`RECORD_FILES`,
no checkpoints) are copied to `<out>/reproduction/<claim>/records/<cell>/seed_<s>/`, so a session can commit them
while the claim still runs; before a claim starts, the records there that its workdir lacks are copied back, so the
next session trains only the rest (each copied run's config checked against its cell's before any compute). Once the
claim has decided, claim.json holds what was measured and the folder is removed.

Claims 8, 9 and 10 are studies over the atlas's cells (configs/claims/_atlas_cells.py): with --atlas_runs=<the
workdir of configs/atlas.py's sweep> they read its runs and train only what those lack (`sweep.cells_dir`); without,
they train their own in <runs>/<claim>. `<out>/ATLAS.md` lists the atlas's studies from the same records.
"""

import json
import os
import shutil
import subprocess
import sys
import threading

from absl import app, flags

from experiments import provenance as provenance_lib
from experiments import reproduction, study
from experiments.registry import CLAIM_NAMES, SCALES, get_claim

REPO = provenance_lib.REPO
flags.DEFINE_string("data_dir", "", "Folder with Multi30k's {train,val,test_2016_flickr}.{de,en}.gz (cpu, paper).")
flags.DEFINE_enum("scale", "cpu", list(SCALES), "The claims' scale.")
flags.DEFINE_list("claims", list(CLAIM_NAMES), "Claims to run (default: all, in order).")
flags.DEFINE_string("runs", "runs/claims", "Work folders of the claims (runs, checkpoints, logs).")
flags.DEFINE_string("out", "reports", "Report folder: REPRODUCTION.md and reproduction/<claim>/.")
flags.DEFINE_integer(
    "parallel",
    1,
    "Runs of a claim trained at once on this machine (sweep.parallel, experiments/shard.py; what it gains on 2 CPU "
    "cores: docs/claims.md).",
    lower_bound=1,
)
flags.DEFINE_bool("readme", False, "Also rebuild the README's results table from the report's results.")
flags.DEFINE_integer("timeout", 4 * 3600, "Seconds before a claim's process is stopped (recorded as inconclusive).")
flags.DEFINE_bool("report_only", False, "Run nothing: rewrite the report (and with --readme the table) from <out>.")
flags.DEFINE_list(
    "redecide",
    [],
    "Claims whose record in <out> is re-decided by the claim's current rule from the measurements it stores (no "
    "runs needed: a rule changed and the runs are gone); `redecided_by` records this commit. Runs no claim unless "
    "--claims names some.",
)
flags.DEFINE_string(
    "atlas_runs",
    "",
    "The workdir of the atlas's cells (main.py --config=configs/atlas.py:<scale>, a plain sweep): the claims on "
    "its cells (ON_ATLAS_CELLS) read and complete its runs instead of training their own ('': each its own).",
)
FLAGS = flags.FLAGS
ON_ATLAS_CELLS = ("tfixup", "bert_vs_xavier", "deep_no_warmup")  # claims built on configs/claims/_atlas_cells.py
RECORD_FILES = ("config.json", "metrics.jsonl", "status.json", "data_stats.json", "sweep_record.json")
RECORDS_DIR = "records"  # <out>/reproduction/<claim>/records/: the done runs of a claim still running
RUN_STARTS = "cell "  # the sweep's progress line before each run (experiments/sweep.py)


def _run_dirs(root: str) -> list[str]:
  """`<cell>/seed_<s>` of every run folder under `root`/cells."""
  cells = os.path.join(root, "cells")
  if not os.path.isdir(cells):
    return []
  return sorted(
      os.path.join(c, s) for c in os.listdir(cells) for s in os.listdir(os.path.join(cells, c)) if s.startswith("seed_")
  )


def _done(run: str) -> bool:
  try:
    with open(os.path.join(run, "status.json"), encoding="utf-8") as f:
      return json.load(f).get("status") in ("finished", "diverged")
  except (OSError, ValueError):
    return False


def save_records(workdir: str, dest: str) -> int:
  """Copies the records (`RECORD_FILES`) of every done run under `workdir`/cells to `dest`/cells (module
  docstring), but for those `dest` holds already (their status.json as it is in `workdir`: `shutil.copy2` keeps its
  time); returns how many runs `dest` holds."""
  for run in _run_dirs(workdir):
    src, out = os.path.join(workdir, "cells", run), os.path.join(dest, "cells", run)
    if _done(src) and not _same_file(os.path.join(src, "status.json"), os.path.join(out, "status.json")):
      os.makedirs(out, exist_ok=True)
      for name in RECORD_FILES:
        if os.path.exists(os.path.join(src, name)):
          shutil.copy2(os.path.join(src, name), os.path.join(out, name))
  return len(_run_dirs(dest))


def _same_file(a: str, b: str) -> bool:
  try:
    sa, sb = os.stat(a), os.stat(b)
  except OSError:
    return False
  return (sa.st_size, sa.st_mtime_ns) == (sb.st_size, sb.st_mtime_ns)


def restore_records(src: str, workdir: str) -> int:
  """Copies the done runs' records under `src`/cells that `workdir` lacks into it; returns how many it copied."""
  restored = 0
  for run in _run_dirs(src):
    target = os.path.join(workdir, "cells", run)
    if _done(os.path.join(src, "cells", run)) and not _done(target):
      if os.path.exists(target):
        shutil.rmtree(target)  # an unfinished attempt of a run the records hold done
      shutil.copytree(os.path.join(src, "cells", run), target)
      restored += 1
  return restored


def run_one(
    name: str,
    scale: str,
    data_dir: str,
    runs: str,
    timeout: int,
    cells_dir: str = "",
    records: str = "",
    parallel: int = 1,
) -> tuple[int, str]:
  """Runs one claim through main.py (with `cells_dir`: its runs read from and added to that sweep folder, e.g. the
  atlas's train/), streaming its output; with `records`, the done runs' records are restored from and saved to that
  folder (module docstring); `parallel` > 1 trains that many of its runs at once (`sweep.parallel`). Returns (exit
  status, log path)."""
  workdir = os.path.abspath(os.path.join(runs, name))
  os.makedirs(workdir, exist_ok=True)
  root = os.path.abspath(cells_dir or workdir)
  if records and os.path.isdir(records):
    print(f"[reproduce] {name}: {restore_records(records, root)} done run(s) restored from {records}", flush=True)
  log_path = os.path.join(workdir, "main.log")
  cmd = [sys.executable, "main.py", f"--config=configs/claims/{name}.py:{scale}", f"--workdir={workdir}"]
  if data_dir:
    cmd.append(f"--config.data.dir={os.path.abspath(data_dir)}")
  if cells_dir:
    cmd.append(f"--config.sweep.cells_dir={os.path.abspath(cells_dir)}")
  if parallel > 1:
    cmd.append(f"--config.sweep.parallel={parallel}")
  print(f"[reproduce] {name}: {' '.join(cmd[1:])}", flush=True)
  with open(log_path, "a", encoding="utf-8") as log:
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    watchdog = threading.Timer(timeout, proc.kill)  # also stops a claim that hangs without printing
    watchdog.start()
    try:
      for line in proc.stdout:  # the child's progress lines, as they come
        sys.stdout.write(line)
        log.write(line)
        if records and RUN_STARTS in line and ", seed " in line and not line.rstrip().endswith("skipped"):
          save_records(root, records)  # a run starts: the ones before it are done (a resumed sweep skips hundreds)
      code = proc.wait()
    finally:
      watchdog.cancel()
  return code, log_path


def _identity(name: str) -> dict:
  """The registered claim's name, number, statement, source and paper scale, as its claim.json states them."""
  claim = get_claim(name)
  return dict(
      claim=name,
      number=claim.number,
      statement=claim.statement,
      source=claim.source,
      paper_scale=claim.paper_scale,
  )


def _failed(name: str, scale: str, code: int, log_path: str) -> dict:
  with open(log_path, encoding="utf-8") as f:
    tail = f.read()[-1500:]
  return dict(
      **_identity(name),
      scale=scale,
      verdict="inconclusive",
      reason=f"the claim's process left no claim.json (exit {code}); end of {log_path}:\n\n```\n{tail}\n```",
      figures=[],
  )


def load_baseline(out: str) -> dict | None:
  """`<out>/baseline/result.json` (experiments/baseline.py), or None before the baseline has run."""
  path = os.path.join(out, "baseline", "result.json")
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


NOT_RUN = "not run yet"  # the status of a registered study without a claim.json in <out> (no verdict)


def not_run(name: str) -> dict:
  """The entry of a registered study that has no claim.json yet: its identity, the status `NOT_RUN` and the command
  that runs it (`pending`: no record on disk; the reports say so, never a verdict)."""
  return dict(
      **_identity(name),
      verdict=NOT_RUN,
      reason=(
          f"no run at this scale is committed yet: `python -m experiments.reproduce --claims={name} "
          "--scale=cpu --data_dir=<Multi30k folder>` runs it (resumable; its runs' records land in "
          f"reports/reproduction/{name}/{RECORDS_DIR}/ as they finish)"
      ),
      figures=[],
      pending=True,
  )


def collect(out: str) -> list[dict]:
  """Every registered claim in claim order: its claim.json under `<out>/reproduction/`, or `not_run(name)`."""
  results = []
  for name in CLAIM_NAMES:
    path = os.path.join(out, "reproduction", name, "claim.json")
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        results.append(json.load(f))
    else:
      results.append(not_run(name))
  return results


def redecide(record: dict, folder: str = "") -> dict:
  """`record` with its claim's current verdict applied to the measurements it stores: verdict, reason, thresholds and
  summary and tables replaced, `redecided_by` this invocation's provenance (the runs' stays in `provenance`); with
  `folder`, a claim whose figures draw from the record alone (`Study.figures_from_record`) redraws them there."""
  claim = get_claim(record["claim"])
  verdict = claim.verdict(record["measured"])
  figures = record.get("figures", [])
  if folder and claim.figures_from_record:
    for old in figures:
      if os.path.exists(os.path.join(folder, old)):
        os.remove(os.path.join(folder, old))
    figures = claim.figure(record["measured"], None, folder, record.get("settings", ""))
  return dict(
      record,
      figures=list(figures),
      statement=claim.statement,
      verdict=verdict.verdict,
      reason=verdict.reason,
      thresholds=claim.thresholds,
      summary=study.jsonable(claim.summary(record["measured"])),
      tables=study.jsonable(claim.tables(record["measured"])),
      redecided_by=provenance_lib.provenance(),
  )


def main(argv):
  del argv
  for name in FLAGS.claims + FLAGS.redecide:
    get_claim(name)  # every name checked before anything runs
  failed = []
  only_redecide = FLAGS.redecide and not FLAGS["claims"].present  # --claims' default (all) is not a request to run
  for name in [] if FLAGS.report_only or only_redecide else FLAGS.claims:
    cells = FLAGS.atlas_runs if FLAGS.atlas_runs and name in ON_ATLAS_CELLS else ""
    dest = os.path.join(FLAGS.out, "reproduction", name)
    records = os.path.join(dest, RECORDS_DIR)
    code, log_path = run_one(
        name, FLAGS.scale, FLAGS.data_dir, FLAGS.runs, FLAGS.timeout, cells, records, parallel=FLAGS.parallel
    )
    src = os.path.join(os.path.abspath(FLAGS.runs), name)
    claim_json = os.path.join(src, "claim.json")
    if not (os.path.exists(claim_json) and code in (0, 4)) and os.path.isdir(records):
      save_records(cells or src, records)  # stopped before deciding: the records (and the earlier claim.json) stay
      print(f"[reproduce] {name}: not decided (exit {code}); its done runs' records stay in {records}", flush=True)
      failed.append(name)
      continue
    if not (os.path.exists(claim_json) and code in (0, 4)) and os.path.exists(os.path.join(dest, "claim.json")):
      print(f"[reproduce] {name}: not decided (exit {code}, {log_path}); its earlier record is kept", flush=True)
      failed.append(name)  # a failed start (a config error, a crash) never replaces a decided record
      continue
    if os.path.exists(dest):
      shutil.rmtree(dest)
    os.makedirs(dest)
    if os.path.exists(claim_json) and code in (0, 4):  # 4: some run crashed; the claim says so itself
      with open(claim_json, encoding="utf-8") as f:
        result = json.load(f)
      for fig in result["figures"]:
        shutil.copy(os.path.join(src, fig), os.path.join(dest, fig))
    else:
      result = _failed(name, FLAGS.scale, code, log_path)
      failed.append(name)
    with open(os.path.join(dest, "claim.json"), "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
    print(f"[reproduce] {name}: {result['verdict']} (exit {code})", flush=True)
  for name in FLAGS.redecide:
    path = os.path.join(FLAGS.out, "reproduction", name, "claim.json")
    with open(path, encoding="utf-8") as f:
      record = redecide(json.load(f), os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as f:
      json.dump(record, f, indent=1)
    print(f"[reproduce] {name}: {record['verdict']} (re-decided from {path})", flush=True)
  results = collect(FLAGS.out)
  baseline = load_baseline(FLAGS.out)
  command = f"python -m experiments.reproduce --scale={FLAGS.scale} --data_dir=<Multi30k folder>"
  path = reproduction.write_reproduction(
      results, os.path.join(FLAGS.out, "REPRODUCTION.md"), figure_dir="reproduction", command=command, baseline=baseline
  )
  atlas = reproduction.write_atlas(results, os.path.join(FLAGS.out, "ATLAS.md"), command=command)
  print(f"[reproduce] report: {path}, {atlas}", flush=True)
  if FLAGS.readme:
    reproduction.update_readme(os.path.join(REPO, "README.md"), results, baseline)
  if failed:
    print(f"[reproduce] no claim.json from: {failed}", flush=True)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
