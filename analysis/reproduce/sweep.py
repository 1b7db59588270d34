"""Runs every claim (each in its own process, so a crash, a divergence or a timeout is recorded, never fatal) and
writes the report with figures.

    python -m analysis.reproduce.sweep --out=reports --runs=runs/reproduce            # all claims, 'cpu' scale
    python -m analysis.reproduce.sweep --claims=truncated_normal,identity_path --scale=tiny

Each claim runs `python main.py --config=configs/reproduce/<claim>.py --workdir=<runs>/<claim>`; its result.json
and PNGs are copied to `<out>/reproduction/<claim>/` (training checkpoints stay in <runs>), then
`<out>/REPRODUCTION.md` is written from all results. A claim that produced no result.json gets an 'inconclusive'
entry naming its exit code and the end of its log.

With `--merge` (default) the report lists every registry claim: those not run by this invocation come from their
`<out>/reproduction/<claim>/result.json` of an earlier sweep (the report says which run produced each), so the
claims can be run in several sittings without losing earlier results.
"""

import json
import os
import shutil
import subprocess
import sys
import time

from absl import app, flags

from analysis.reproduce.inputs import REPO_ROOT
from analysis.reproduce.registry import CLAIMS, SCALES, get_claim
from analysis.reproduce.report import write_report
from analysis.reproduce.result import INCONCLUSIVE

flags.DEFINE_string("out", "reports", "Report folder: REPRODUCTION.md and reproduction/<claim>/.")
flags.DEFINE_string("runs", "runs/reproduce", "Work folders of the claims (checkpoints, logs).")
flags.DEFINE_list("claims", list(CLAIMS), "Claims to run (default: all, in registry order).")
flags.DEFINE_enum("scale", "cpu", list(SCALES), "Scale of every claim.")
flags.DEFINE_bool("merge", True, "Also report claims not run now, from <out>/reproduction/<claim>/result.json.")
flags.DEFINE_integer("timeout", 1800, "Seconds before a claim's process is stopped and recorded as inconclusive.")
FLAGS = flags.FLAGS


def run_one(name: str, scale: str, runs: str, timeout: int) -> dict:
  """Runs one claim in a subprocess; returns its result dict (or an 'inconclusive' record of the failure)."""
  claim = get_claim(name)
  workdir = os.path.abspath(os.path.join(runs, name))
  log_path = os.path.join(workdir, "sweep.log")
  os.makedirs(workdir, exist_ok=True)
  result_path = os.path.join(workdir, "result.json")
  if os.path.exists(result_path):
    os.remove(result_path)  # a stale result must not pass for this run's
  cmd = [
      sys.executable,
      "main.py",
      f"--config=configs/reproduce/{name}.py",
      f"--config.reproduce.scale={scale}",
      f"--workdir={workdir}",
  ]
  start = time.perf_counter()
  with open(log_path, "w") as log:
    try:
      code = subprocess.run(cmd, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
      code = f"timeout after {timeout} s"
  if os.path.exists(result_path):
    with open(result_path) as f:
      return json.load(f)
  with open(log_path) as f:
    tail = f.read()[-1500:]
  return dict(
      claim=name,
      number=claim.number,
      statement=claim.statement,
      source=claim.source,
      paper_scale=claim.paper_scale,
      scale=scale,
      scale_used="(run failed)",
      verdict=INCONCLUSIVE,
      reason=f"the run produced no result.json (exit {code}); end of {log_path}:\n\n```\n{tail}\n```",
      thresholds={},
      summary={},
      figures=[],
      seconds=round(time.perf_counter() - start, 1),
  )


def merged_results(fresh: list, figure_root: str) -> list:
  """Results of every registry claim, in registry order: `fresh` ones first choice, else an earlier result.json."""
  by_name = {r["claim"]: r for r in fresh}
  out = []
  for name in CLAIMS:
    path = os.path.join(figure_root, name, "result.json")
    if name in by_name:
      out.append(by_name[name])
    elif os.path.exists(path):
      with open(path) as f:
        out.append(json.load(f))
  return out


def main(argv):
  del argv
  for name in FLAGS.claims:
    get_claim(name)  # every name checked before anything runs
  figure_root = os.path.join(FLAGS.out, "reproduction")
  results = []
  for name in FLAGS.claims:
    print(f"[sweep] {name} ...", flush=True)
    result = run_one(name, FLAGS.scale, FLAGS.runs, FLAGS.timeout)
    dest = os.path.join(figure_root, name)
    os.makedirs(dest, exist_ok=True)
    for fig in result.get("figures", []):
      shutil.copy(os.path.join(os.path.abspath(FLAGS.runs), name, fig), os.path.join(dest, fig))
    result["finished_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open(os.path.join(dest, "result.json"), "w") as f:
      json.dump(result, f, indent=1)
    results.append(result)
    print(f"[sweep] {name}: {result['verdict']} ({result.get('seconds')} s)", flush=True)
  if FLAGS.merge:
    results = merged_results(results, figure_root)
  path = write_report(
      results,
      os.path.join(FLAGS.out, "REPRODUCTION.md"),
      figure_dir="reproduction",
      command=f"python -m analysis.reproduce.sweep --out={FLAGS.out} --scale={FLAGS.scale}",
  )
  print(f"[sweep] report: {path}")


if __name__ == "__main__":
  app.run(main)
