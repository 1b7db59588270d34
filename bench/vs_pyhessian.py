"""curvax against PyHessian on the identical encoder-decoder, on the path each library documents, as ratios.

The model is the project's Transformer at a bench size (`SIZES`: `tiny`, the preset at vocab 1000; `small`, the
preset at a subword vocabulary of 8000, 7.58M parameters; `medium`, 4+4 layers of width 384 at 8000, 19.6M; float32)
in JAX and its PyTorch port (bench/torch_transformer.py), on one batch of 16 × 32 random tokens, checked equal first
(bench/vs_pyhessian_check.py: float64 identity, float32 within rounding; else the bench stops). Per routine, each
side runs in fresh processes (`--worker`), its first call timed from the loaded parameters to the result on the host:

  * curvax: `H = curvax.hessian(loss_fn, params, batch)`, then `curvax.lanczos(H, num_steps=30)`,
    `curvax.spectral_density(H, num_steps=30, num_probes=2)` (a band needs two probes) or `curvax.top_eigenvalues(H, 1, num_steps=30, tol=1e-3)` (docs/curvax.md), in (a) a process
    whose persistent compilation cache (`curvax.enable_compilation_cache`) starts empty, (b) a second process on the
    cache (a) filled; (c) is the second call, operator included, in process (a);
  * PyHessian: `hessian(model, criterion, data=(inputs, targets), cuda=False)`, then `density(iter=30, n_v=P)`
    (its Lanczos, with curvax's number of probes P: 1 against `lanczos`, 2 against `spectral_density`) or
    `eigenvalues(maxIter=100, tol=1e-3, top_n=1)` (power iteration to a relative change of 1e-3; it converges to
    the largest |λ|, which can be the most negative eigenvalue); torch.set_num_threads(2). The worker supplies
    `torch.eig`, which PyHessian's density calls and current torch lacks, from `torch.linalg.eigh`.

Each measurement is repeated `--repeats` times, interleaved, and the minimum kept; the JAX side reports its
compilations and persistent-cache hits. Targets (issue 44, at `small` and `medium`): (c) ≤ 0.8 × PyHessian's second
call, (a) ≤ 1.0 × its first. bench/vs_pyhessian_profile.py splits a step into its pieces; bench/vs_pyhessian_accuracy.py
compares the top eigenvalue's stop rules at equal accuracy.
Run, torch and pyhessian in a separate venv (bench/requirements-pyhessian.txt; without torch the PyHessian side is
skipped): python bench/vs_pyhessian.py [--presets small medium] [--repeats 2] [--markdown out.md]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import numpy as np  # noqa: E402
import pyhessian_problem as problem  # noqa: E402

# torch's OpenMP threads wait asleep, not spinning, unless the caller says otherwise: on a shared machine a spinning
# thread holds a core its partner needs, and at a load of 12 on 2 cores PyHessian's product on `small` took 30 s
# spinning against 1.7 s asleep (curvax's: 1.4 s), a measure of the load, not of the library. Read by libgomp when
# torch loads, so before any import of torch (the workers inherit it).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

STEPS, TOL = 30, 1e-3
ROUTINES = ("lanczos", "density", "top")
LABELS = {
    "lanczos": f"Lanczos, {STEPS} steps",
    "density": f"density, {STEPS} steps, 2 probes",
    "top": f"top eigenvalue, tol {TOL:g}",
}
PROBES = {"lanczos": 1, "density": 2}
PYHESSIAN_CALL = {"lanczos": f"density({STEPS}, 1)", "density": f"density({STEPS}, 2)", "top": "eigenvalues(tol=1e-3)"}
_COMPILE = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_retrieval_time_sec"


def have_torch() -> bool:
  try:
    import pyhessian  # noqa: F401, PLC0415
    import torch  # noqa: F401, PLC0415
  except ImportError:
    return False
  return True


def _install_torch_eig(torch):
  """PyHessian's density calls `torch.eig(T, eigenvectors=True)`, which current torch removed (a stub that raises):
  the same values (as [n, 2] real/imaginary columns) and eigenvectors from `torch.linalg.eigh` of the symmetric
  tridiagonal T."""

  def eig(t, eigenvectors=False):
    values, vectors = torch.linalg.eigh(t)
    return torch.stack([values, torch.zeros_like(values)], dim=1), vectors

  torch.eig = eig


def worker_curvax(preset, routine, path, cache):
  import jax  # noqa: PLC0415

  import curvax  # noqa: PLC0415

  curvax.enable_compilation_cache(cache)
  events = []
  jax.monitoring.register_event_duration_secs_listener(lambda event, seconds, **kw: events.append((event, seconds)))
  loss_fn, params, batch, _ = problem.jax_side(preset, path)
  jax.block_until_ready((params, batch))

  def call():
    H = curvax.hessian(loss_fn, params, batch)
    if routine == "lanczos":
      res = curvax.lanczos(H, num_steps=STEPS, key=jax.random.key(1))
      return float(np.max(res.valid_ritz()[0])), int(res.num_steps_taken)
    if routine == "density":
      res = curvax.spectral_density(H, num_steps=STEPS, num_probes=PROBES[routine], key=jax.random.key(1))
      return float(np.max(np.asarray(res.nodes)[np.asarray(res.node_mask)])), STEPS * PROBES[routine]
    res = curvax.top_eigenvalues(H, 1, num_steps=STEPS, key=jax.random.key(1), tol=TOL)
    return float(res.values[0]), int(res.lanczos.num_steps_taken)

  out = {}
  for label in ("first", "second"):
    before = len(events)
    t = time.perf_counter()
    value, matvecs = call()
    out[label] = time.perf_counter() - t
    compiles = [s for e, s in events[before:] if e == _COMPILE]
    out[f"{label}_compiles"], out[f"{label}_compile_s"] = len(compiles), sum(compiles)
    out[f"{label}_cache_hits"] = sum(1 for e, _ in events[before:] if e == _CACHE_HIT)
  out.update(value=value, matvecs=matvecs)
  return out


def worker_pyhessian(preset, routine, path, calls=2):
  import torch  # noqa: PLC0415
  import torch_transformer  # noqa: PLC0415
  from pyhessian import hessian  # noqa: PLC0415

  _install_torch_eig(torch)
  matvecs = [0]
  module = sys.modules["pyhessian.hessian"]  # the package's attribute of that name is the class
  product = module.hessian_vector_product

  def counted(*args):
    matvecs[0] += 1
    return product(*args)

  module.hessian_vector_product = counted  # to report PyHessian's number of products
  flat, inputs, targets = problem.read_problem(path)
  model, data = problem.torch_side(preset, flat, inputs, targets)
  torch.manual_seed(1)
  out = {}
  for label in ("first", "second")[:calls]:
    model.zero_grad(set_to_none=True)  # PyHessian's constructor accumulates into .grad
    t = time.perf_counter()
    h = hessian(model, torch_transformer.token_cross_entropy, data=(data, data[1]), cuda=False)
    if routine == "top":
      values, _ = h.eigenvalues(maxIter=100, tol=TOL, top_n=1)
      value = float(values[0])
    else:
      nodes, _ = h.density(iter=STEPS, n_v=PROBES[routine])
      value = float(np.max(nodes))
    out[label] = time.perf_counter() - t
    del h
  out.update(value=value, matvecs=matvecs[0] // calls, threads=torch.get_num_threads())
  return out


def run_worker(side, preset, routine, path, cache=None, torch_calls=2):
  cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--preset", preset, "--routine", routine]
  cmd += ["--problem", path, "--torch_calls", str(torch_calls)] + (["--cache", cache] if cache else [])
  proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
  if proc.returncode != 0 or not lines:
    raise SystemExit(f"worker {' '.join(cmd[2:])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
  return json.loads(lines[-1])


def measure(preset, path, repeats, torch_ok, print_fn, routines=ROUTINES, torch_calls=2):
  """{routine: {"cold", "warm", "second", "torch_first", "torch_second": min seconds, ... diagnostics}}; with
  `torch_calls` 1, PyHessian's second call is its first (it compiles nothing)."""
  rows = {}
  for routine in routines:
    runs = {"cold": [], "warm": [], "torch": []}
    for _ in range(repeats):
      with tempfile.TemporaryDirectory() as cache:
        runs["cold"].append(run_worker("curvax", preset, routine, path, cache))
        runs["warm"].append(run_worker("curvax", preset, routine, path, cache))
      if torch_ok:
        runs["torch"].append(run_worker("pyhessian", preset, routine, path, torch_calls=torch_calls))
    best = lambda key, field: min(r[field] for r in runs[key])
    row = dict(
        cold=best("cold", "first"),
        warm=best("warm", "first"),
        second=min(best("cold", "second"), best("warm", "second")),
        cold_compiles=runs["cold"][0]["first_compiles"],
        cold_compile_s=min(r["first_compile_s"] for r in runs["cold"]),
        warm_compiles=runs["warm"][0]["first_compiles"],
        warm_cache_hits=runs["warm"][0]["first_cache_hits"],
        second_compiles=runs["cold"][0]["second_compiles"],
        value=runs["cold"][0]["value"],
        matvecs=runs["cold"][0]["matvecs"],
    )
    if torch_ok:
      second = "second" if torch_calls > 1 else "first"
      row.update(torch_first=best("torch", "first"), torch_second=best("torch", second))
      row.update(torch_value=runs["torch"][0]["value"], torch_matvecs=runs["torch"][0]["matvecs"])
    rows[routine] = row
    print_fn(
        f"  {preset} {routine}: {json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})}"
    )
  return rows


def table(results, torch_ok):
  head = (
      "| preset | routine (PyHessian's call) | curvax cold (a) | warm cache (b) | second (c) | (b)/(c) | "
      "PyHessian first | PyHessian second | (a)/PyH | (b)/PyH | (c)/PyH |"
  )
  lines = [head, "|" + "---|" * (head.count("|") - 1)]
  for preset, rows in results.items():
    for routine, r in rows.items():
      torch_cells = ["–"] * 5
      if torch_ok:
        f, s = r["torch_first"], r["torch_second"]
        torch_cells = [
            f"{f:.2f} s",
            f"{s:.2f} s",
            f"{r['cold'] / f:.2f}",
            f"{r['warm'] / f:.2f}",
            f"{r['second'] / s:.2f}",
        ]
      lines.append(
          f"| {preset} | {LABELS[routine]} ({PYHESSIAN_CALL[routine]}) | {r['cold']:.2f} s ({r['cold_compiles']} "
          f"compiles, {r['cold_compile_s']:.1f} s) | {r['warm']:.2f} s ({r['warm_cache_hits']} cache hits) | "
          f"{r['second']:.2f} s | {r['warm'] / r['second']:.2f} | " + " | ".join(torch_cells) + " |"
      )
  return "\n".join(lines)


def machine(torch_ok):
  import jax  # noqa: PLC0415

  load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
  versions = f"jax {jax.__version__}, {platform.python_implementation()} {platform.python_version()}"
  if torch_ok:
    import pyhessian  # noqa: F401, PLC0415
    import torch  # noqa: PLC0415

    versions += f", torch {torch.__version__}, pyhessian 0.1"
  return (
      f"{platform.machine()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} at the start; {versions}; "
      f"backend {jax.default_backend()}"
  )


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--presets", nargs="+", default=["small", "medium"], choices=list(problem.SIZES))
  ap.add_argument("--repeats", type=int, default=2)
  ap.add_argument("--markdown", default=None, help="also write the table and the machine to this file")
  ap.add_argument("--routines", nargs="+", default=list(ROUTINES), choices=ROUTINES)
  ap.add_argument(
      "--torch_calls", type=int, default=2, choices=[1, 2], help="1: PyHessian's first call stands for its second"
  )
  ap.add_argument("--worker", choices=["curvax", "pyhessian"], help=argparse.SUPPRESS)
  ap.add_argument("--preset", help=argparse.SUPPRESS)
  ap.add_argument("--routine", choices=ROUTINES, help=argparse.SUPPRESS)
  ap.add_argument("--problem", help=argparse.SUPPRESS)
  ap.add_argument("--cache", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker == "curvax":
    print(json.dumps(worker_curvax(args.preset, args.routine, args.problem, args.cache)))
    return
  if args.worker == "pyhessian":
    print(json.dumps(worker_pyhessian(args.preset, args.routine, args.problem, args.torch_calls)))
    return
  torch_ok = have_torch()
  if not torch_ok:
    print("torch or pyhessian not installed: the PyHessian side is skipped (bench/requirements-pyhessian.txt)")
  desc = machine(torch_ok)
  print(desc)
  results, checks = {}, []
  with tempfile.TemporaryDirectory() as tmp:
    for preset in args.presets:
      path = os.path.join(tmp, f"{preset}.npz")
      problem.write_problem(preset, path)
      if torch_ok:
        import vs_pyhessian_check  # noqa: PLC0415

        report = vs_pyhessian_check.check_port(preset, path)
        checks.append(
            f"{preset}: loss {report['loss']:.6f}; the torch port checked against the JAX model (float64 "
            f"reference), relative errors:\n{vs_pyhessian_check.summary(report)}"
        )
        print(checks[-1])
      results[preset] = measure(preset, path, args.repeats, torch_ok, print, args.routines, args.torch_calls)
  out = table(results, torch_ok)
  print(out)
  if args.markdown:
    with open(args.markdown, "w") as f:
      check_lines = "".join(f"```\n{c}\n```\n\n" for c in checks)
      f.write(f"Machine: {desc}\n\n{check_lines}{out}\n\n```\n{json.dumps(results, indent=1)}\n```\n")


if __name__ == "__main__":
  main()
