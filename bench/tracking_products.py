"""Benchmark: Hessian-vector products per warm-started `train.curvature_every` record along a training run.

Trains a config through `main.py` (the path a user takes) once per setting of (curvature_every, tracking_tol,
tracking_mix), reads `curvature/lanczos_steps` from each run's metrics.jsonl and reports, per setting, the products
of the first (cold) record and the median and maximum over the warm ones, and whether every record met its bound.

    python bench/tracking_products.py --config=configs/t5_init.py --steps=200 --out=reports/curvax_models/tracking.json
    python bench/tracking_products.py --steps=20 --every=5 --settings=0.01:0.01 --preset=tiny   # the test's size

A setting is `tol:mix`; with `--every` several cadences each run every setting.
"""

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _records(workdir: str) -> list[dict]:
  """The rows of metrics.jsonl that carry a curvature record, in step order."""
  rows = []
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    for line in f:
      row = json.loads(line)
      if "curvature/lanczos_steps" in row:
        rows.append(row)
  return sorted(rows, key=lambda r: r["step"])


def summarize(rows: list[dict], tol: float) -> dict:
  """Products per record: the first (cold) one apart, median and max of the warm ones; bound ≤ tol·|λ| per record."""
  steps = [int(r["curvature/lanczos_steps"]) for r in rows]
  warm = steps[1:]
  met = [
      r["curvature/lambda_max_bound"] <= tol * abs(r["curvature/lambda_max"]) * (1 + 1e-6)
      for r in rows
      if "curvature/lambda_max_bound" in r
  ]
  return dict(
      records=len(steps),
      cold_products=steps[0] if steps else None,
      warm_median=float(np.median(warm)) if warm else None,
      warm_max=max(warm) if warm else None,
      warm_products=warm,
      bound_met=f"{sum(met)}/{len(met)}" if met else "not recorded",
  )


def run(config: str, preset: str, data_dir: str, steps: int, every: int, tol: float, mix: float, extra: list[str]):
  with tempfile.TemporaryDirectory() as workdir:
    cmd = [
        sys.executable,
        str(ROOT / "main.py"),
        f"--config={config}",
        f"--workdir={workdir}",
        f"--config.train.num_steps={steps}",
        f"--config.train.curvature_every={every}",
        f"--config.analysis.tracking_tol={tol}",
        f"--config.analysis.tracking_mix={mix}",
        *([f"--config.model.preset={preset}"] if preset else []),
        *([f"--config.data.dir={data_dir}"] if data_dir else []),
        *extra,
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return summarize(_records(workdir), tol)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--config", default="configs/t5_init.py")
  parser.add_argument("--preset", default="")
  parser.add_argument("--data_dir", default="", help="data.dir (default: the config's own)")
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--every", type=int, nargs="+", default=[10, 20])
  parser.add_argument("--settings", nargs="+", default=["0.01:0.01", "0.01:0.1"], help="tol:mix pairs")
  parser.add_argument("--override", nargs="*", default=[], help="extra --config.x=y flags for main.py")
  parser.add_argument("--out", default="")
  args = parser.parse_args()
  results = []
  for every in args.every:
    for setting in args.settings:
      tol, mix = map(float, setting.split(":"))
      row = dict(every=every, tol=tol, mix=mix)
      row.update(run(args.config, args.preset, args.data_dir, args.steps, every, tol, mix, args.override))
      print(json.dumps(row), flush=True)
      results.append(row)
  if args.out:
    record = dict(
        config=args.config,
        preset=args.preset,
        steps=args.steps,
        overrides=args.override,
        machine=f"{platform.machine()} CPU, {os.cpu_count()} cores",
        commit=subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        results=results,
    )
    pathlib.Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
  main()
