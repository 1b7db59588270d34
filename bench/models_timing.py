"""Per-model timing files, curvlinops-style: for each model at each size, the gradient's time and peak memory and
those of the Hessian, Gauss–Newton and empirical-Fisher products as ratios to it, and the matvecs of a certified
top-5 of the Hessian; one JSON per model, `reports/curvax_models/<model>.json`, holding its sizes and the machine.

Models and sizes: `bench.problems` (an MLP, a small CNN on 32×32×3 images, the project's encoder-decoder and decoder
LM; `tiny` and `mini` each), float32. What each field means: `bench.timing`'s docstring; the file repeats it under
"definitions". Every (model, size) runs in a fresh process (`--all` starts one per pair), so no program of one
model is in memory while another is timed, and the load average is read at its start.

Run:
  python bench/models_timing.py --all                               # the 8 (model, size) pairs, one process each
  python bench/models_timing.py --model mlp --size tiny [--repeats 5] [--out_dir reports/curvax_models]
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import problems, timing  # noqa: E402

OUT_DIR = os.path.join(ROOT, "reports", "curvax_models")
TOP_K, TOP_STEPS, TOP_TOL = 5, 150, 1e-2
DEFINITIONS = {
    "time_s": "median wall time of one call of the compiled program over `repeats` runs after one warm-up run",
    "ratio_to_gradient": "time_s / gradient_time_s, the median of gradient runs interleaved with this routine's (one "
    "before each), same process, same batch: both under the same load",
    "peak_bytes": timing.MEMORY_SOURCE,
    "hvp/ggn/ef": "time_s, peak_bytes: one product on the built operator (curvax.hessian / curvax.ggn / "
    "curvax.empirical_fisher); build: the constructor under jax.jit (one linearization, residuals stored)",
    "from_scratch_ratio_to_gradient": "build's + product's ratio_to_gradient: one product from the parameters, as a "
    "library that re-linearizes per product pays it",
    "peak_ratio_to_gradient": "max(build, product) peak_bytes / the gradient's peak_bytes",
    "top5": f"curvax.top_eigenvalues(hessian, {TOP_K}, num_steps={TOP_STEPS}, tol={TOP_TOL}); matvecs = Lanczos "
    "steps taken; certified: all five valid with bound <= tol*|value| (an eigenvalue within each bound); converged: "
    "curvax's stop criterion met; time_s the second call (first_call_s compiles; compile_s XLA's part of it)",
}


def measure(model: str, size: str, repeats: int) -> dict:
  """The timing entry of `model` at `size` (float32)."""
  load_at_start = timing.machine()["load_average_1_5_15min"]
  problem = problems.get_problem(model, size)
  entry = dict(
      model=model,
      size=size,
      params=timing.flat_size(problem.params),
      batch=problem.description["batch"],
      shape=problem.description,
      dtype="float32",
      load_average_at_start=load_at_start,
  )
  gradient, reference = timing.time_gradient(problem, repeats)
  entry["gradient"] = gradient
  print(f"{model} {size}: n = {entry['params']}, gradient {gradient['time_s'] * 1e3:.2f} ms", flush=True)
  for name in timing.OPERATORS:
    row, op = timing.time_operator(problem, name, gradient, reference, repeats, keep=name == "hvp")
    entry[name] = row
    print(
        f"  {name}: product {row['ratio_to_gradient']:.2f} x gradient, build {row['build']['ratio_to_gradient']:.2f}",
        flush=True,
    )
    if op is not None:
      steps = min(TOP_STEPS, entry["params"])
      entry["top5"] = timing.time_top(op, TOP_K, steps, TOP_TOL)
      entry["top5"]["basis_bytes"] = timing.basis_bytes(steps, problem.params)
      print(f"  top5: {entry['top5']['matvecs']} matvecs, certified {entry['top5']['certified']}", flush=True)
      del op
  entry["load_average_at_end"] = timing.machine()["load_average_1_5_15min"]
  return entry


def write(entry: dict, out_dir: str) -> str:
  """Adds (or replaces) `entry` under its size in `<out_dir>/<model>.json`, with the machine it ran on."""
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, f"{entry['model']}.json")
  doc = {"model": entry["model"], "sizes": {}}
  if os.path.exists(path):
    with open(path) as f:
      doc = json.load(f)
  doc["definitions"] = DEFINITIONS
  doc["command"] = "python bench/models_timing.py --all"
  doc["sizes"][entry["size"]] = dict(entry, machine=timing.machine())
  doc["sizes"] = dict(sorted(doc["sizes"].items(), key=lambda kv: problems.TIMING_SIZES.index(kv[0])))
  with open(path, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
  return path


def run_all(repeats: int, out_dir: str) -> None:
  for model in problems.MODELS:
    for size in problems.TIMING_SIZES:
      t = time.perf_counter()
      cmd = [sys.executable, os.path.abspath(__file__), "--model", model, "--size", size]
      subprocess.run(cmd + ["--repeats", str(repeats), "--out_dir", out_dir], check=True, cwd=ROOT)
      print(f"{model} {size}: {time.perf_counter() - t:.0f} s in all", flush=True)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", choices=sorted(problems.MODELS))
  ap.add_argument("--size", choices=problems.TIMING_SIZES)
  ap.add_argument("--all", action="store_true", help="every model at every size, one process each")
  ap.add_argument("--repeats", type=int, default=5)
  ap.add_argument("--out_dir", default=OUT_DIR)
  args = ap.parse_args(argv)
  if args.all:
    run_all(args.repeats, args.out_dir)
    return
  if not (args.model and args.size):
    ap.error("--model and --size (or --all)")
  print(write(measure(args.model, args.size, args.repeats), args.out_dir))


if __name__ == "__main__":
  main()
