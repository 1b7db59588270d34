"""The GPU run: a GPT-2-small-sized decoder (124.4M parameters, sequence 1024, batch 8) in float32 and bfloat16
products, gradient, Hessian and Gauss–Newton products (build and product), a certified top-5 of the Hessian, peak
memory; sized to finish inside a short accelerator slot (bench/gpu.sh stops it at 8 minutes).

Every measurement is printed on one line as it lands, `MEASURED {json}` (flushed), so a run stopped at a lease's
limit keeps what it measured; `SKIPPED name: why` for one the time budget (`--budget_s`) or a failed prerequisite
left out, `FAILED name: error` for one that raised (e.g. out of device memory: the run goes on), `NOTE ...` for
choices made at run time. At the end (or on SIGINT) a markdown table of the lines and, with `--json`, the machine and
every row in one file.

Order, per compute dtype (float32 first): gradient; Hessian build and product; top-5 of that Hessian; Gauss–Newton
build and product. The top-5 is `curvax.top_eigenvalues(H, 5, tol=...)` with a thick-restart basis of
`--max_vectors` where curvax takes `max_vectors` (`bench.timing.restart_option`), else plain Lanczos with a printed
note; either way its steps are cut to what the budget left and the basis to `--basis_gib`. Fields: bench/timing.py
(peak_bytes from XLA's memory analysis of each program; device_peak_bytes_so_far the allocator's process-wide
high-water mark where the device keeps one).

`--size=toy` is the same architecture at a size a CPU runs in seconds (tests/test_bench_gpu.py runs it).
Run: bench/gpu.sh [--size=gpt2_small|toy] [--json reports/curvax_models/gpu_gpt2_small.json] [--budget_s 420]
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax.numpy as jnp  # noqa: E402

from bench import problems, timing  # noqa: E402

SIZES = {  # size flag -> (bench.problems size of `decoder`, defaults)
    "gpt2_small": ("gpt2_small", dict(repeats=3, top_steps=80, max_vectors=30, basis_gib=20.0)),
    "toy": ("gpt2_toy", dict(repeats=2, top_steps=60, max_vectors=20, basis_gib=1.0)),
}
DTYPES = ("float32", "bfloat16")
TOP_K, TOP_TOL = 5, 1e-2
ROUTINES = ("gradient", "hvp_build", "hvp", "top5", "ggn_build", "ggn")


class Run:
  """The printed lines and the rows behind them, against one wall-clock budget."""

  def __init__(self, budget_s):
    self.start, self.budget_s, self.rows = time.monotonic(), budget_s, []

  def left(self):
    return self.budget_s - (time.monotonic() - self.start)

  def measured(self, name, row):
    row = dict(name=name, elapsed_s=round(time.monotonic() - self.start, 2), **row)
    self.rows.append(row)
    print("MEASURED " + json.dumps(row), flush=True)

  def skipped(self, name, why):
    self.rows.append(dict(name=name, skipped=why))
    print(f"SKIPPED {name}: {why}", flush=True)

  def failed(self, name, error):
    self.rows.append(dict(name=name, failed=f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"))
    print(f"FAILED {name}: {self.rows[-1]['failed']}", flush=True)

  def attempt(self, name, fn):
    """fn() -> (row, kept) inside the budget; prints the row; returns kept, or None if skipped or failed."""
    if self.left() <= 0:
      self.skipped(name, f"over the {self.budget_s:.0f} s budget")
      return None
    try:
      row, kept = fn()
    except Exception as e:  # noqa: BLE001  (one failed measurement, e.g. out of memory, must not end the run)
      self.failed(name, e)
      return None
    self.measured(name, row)
    return kept


def top_steps(run, args, n, product_s, compile_s):
  """Lanczos steps that fit the time left (each step about 1.3 products; the program compiles about like the
  product's) and, without restarts, a basis within --basis_gib."""
  fit = int((run.left() - 1.5 * compile_s) / (1.3 * max(product_s, 1e-9)))
  steps = min(args.top_steps, n, max(fit, TOP_K))
  if args.restart is None:
    steps = min(steps, max(int(args.basis_gib * 2**30 / (4 * n)) - 1, TOP_K))
  if steps < args.top_steps:
    print(f"NOTE top5: {steps} Lanczos steps, not {args.top_steps} (time left or --basis_gib)", flush=True)
  return steps


def _gradient(problem, args):
  # No interleaved reference here (bench.timing): an accelerator is not shared, and a gradient run beside a stored
  # operator's residuals would add its own peak to the product's.
  row = timing.time_gradient(problem, args.repeats)[0]
  return row, row


def _build(problem, op_name, grad, args):
  op, row = timing.run_compiled(timing.constructor(problem, op_name), (problem.params, problem.batch), args.repeats)
  timing.add_ratios(row, grad)
  return row, (op, row)


def _product(problem, op, build, grad, args):
  v = timing.random_vector(problem.params)
  out, row = timing.run_compiled(lambda o, x: o(x), (op, v), args.repeats)
  del out, v
  timing.add_ratios(row, grad)
  row["from_scratch_ratio_to_gradient"] = build["ratio_to_gradient"] + row["ratio_to_gradient"]
  return row, row


def _top5(run, args, op, n, product):
  steps = top_steps(run, args, n, product["time_s"], product["compile_s"])
  kwargs = dict(max_vectors=args.max_vectors) if args.restart else {}
  basis = int(args.basis_gib * 2**30)
  row = timing.time_top(op, TOP_K, steps, TOP_TOL, calls=1, callback=progress, max_basis_bytes=basis, **kwargs)
  return row, row


def measure_dtype(run, args, dtype):
  """The measurements of one compute dtype, in order; an operator is dropped (nothing else holds it) before the
  next one is built, so two operators' residuals are never on the device at once."""
  problem = problems.get_problem("decoder", SIZES[args.size][0], jnp.dtype(dtype))
  n = timing.flat_size(problem.params)
  print(
      f"NOTE {dtype}: decoder {SIZES[args.size][0]}, n = {n}, batch {problem.description['batch']} x "
      f"{problem.description['length']}",
      flush=True,
  )
  name = lambda r: f"{dtype}/{r}"
  grad = run.attempt(name("gradient"), lambda: _gradient(problem, args))
  if grad is None:
    return
  for op_name in ("hvp", "ggn"):
    built = run.attempt(name(f"{op_name}_build"), lambda: _build(problem, op_name, grad, args))
    if built is None:
      run.skipped(name(op_name), f"no {op_name} operator")
      continue
    op, build = built
    product = run.attempt(name(op_name), lambda: _product(problem, op, build, grad, args))
    if op_name == "hvp":
      if product is None:
        run.skipped(name("top5"), "no Hessian product")
      else:
        run.attempt(name("top5"), lambda: _top5(run, args, op, n, product))
    op = built = None  # the last references to this operator: its residuals are freed before the next is built


def progress(step, total):
  print(f"  lanczos {int(step)}/{int(total)}", flush=True)


def _bytes(b):
  return "–" if b is None else f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.2f} MiB"


def _seconds(t):
  return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.2f} ms"


def table(rows):
  """The rows as a markdown table: time, ratio to the gradient, XLA's peak, the device's peak so far, the top-5."""
  lines = ["| measurement | time | / gradient | peak (XLA) | device peak so far | top-5 |", "|---|---|---|---|---|---|"]
  for r in rows:
    if "skipped" in r or "failed" in r:
      why = f"skipped: {r['skipped']}" if "skipped" in r else f"failed: {r['failed']}"
      lines.append(f"| {r['name']} | {why} | | | | |")
      continue
    ratio = f"{r['ratio_to_gradient']:.2f}" if "ratio_to_gradient" in r else "–"
    top = f"{r['matvecs']} matvecs, certified {r['certified']}" if "matvecs" in r else ""
    lines.append(
        f"| {r['name']} | {_seconds(r['time_s'])} | {ratio} | {_bytes(r.get('peak_bytes'))} | "
        f"{_bytes(r.get('device_peak_bytes_so_far'))} | {top} |"
    )
  return "\n".join(lines)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--size", choices=sorted(SIZES), default="gpt2_small")
  ap.add_argument("--dtypes", default=",".join(DTYPES), help="compute dtypes, comma-separated, in order")
  ap.add_argument("--budget_s", type=float, default=420.0, help="no measurement starts after this many seconds")
  ap.add_argument("--repeats", type=int, default=None, help="timed runs after the warm-up (median kept)")
  ap.add_argument("--top_steps", type=int, default=None, help="most Lanczos steps (matvecs) of the top-5")
  ap.add_argument("--max_vectors", type=int, default=None, help="thick-restart basis, where curvax takes it")
  ap.add_argument("--basis_gib", type=float, default=None, help="most GiB of Lanczos basis")
  ap.add_argument("--json", default=None, help="write the machine and every row here")
  args = ap.parse_args(argv)
  for key, value in SIZES[args.size][1].items():
    if getattr(args, key) is None:
      setattr(args, key, value)
  args.restart = timing.restart_option()
  run = Run(args.budget_s)
  machine = timing.machine()
  print("MACHINE " + json.dumps(machine), flush=True)
  if args.restart is None:
    print("NOTE curvax.top_eigenvalues takes no max_vectors here: plain Lanczos (no thick restart)", flush=True)
  try:
    for dtype in args.dtypes.split(","):
      if dtype not in DTYPES:
        raise SystemExit(f"--dtypes: {dtype!r} is not one of {list(DTYPES)}")
      measure_dtype(run, args, dtype)
  except KeyboardInterrupt:  # bench/gpu.sh's time limit: keep the table of what landed
    print("NOTE interrupted: the table holds what landed before", flush=True)
  print(table(run.rows), flush=True)
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      doc = dict(command="bench/gpu.sh " + " ".join(argv if argv is not None else sys.argv[1:]), size=args.size)
      json.dump(dict(doc, machine=machine, restart=args.restart, rows=run.rows), f, indent=1)
      f.write("\n")


if __name__ == "__main__":
  main()
