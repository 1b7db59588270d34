"""Top eigenvalue at equal accuracy: curvax's stop rules against PyHessian's power iteration, each method's error
against a long reference Lanczos, beside its products and time, on bench/vs_pyhessian.py's identical model.

  * reference: `curvax.top_eigenvalues(H, 1, num_steps=REF_STEPS, max_vectors=REF_VECTORS)`, thick-restart Lanczos
    with full reorthogonalization from another start (key 2) than the methods (key 1), float32; its certified bound
    is printed, and every error below is against its value;
  * curvax: `top_eigenvalues(H, 1, num_steps=CAP, key=key(1), tol=TOL, bound=b)` for b in "residual", "gap",
    "change" (docs/curvax.md, stop rules), each with its certified bound; and the products plain Lanczos (the
    Ritz values of its leading blocks of T, from one `CAP`-step run) needs to reach PyHessian's actual error;
  * PyHessian: `hessian(...).eigenvalues(maxIter=100, tol=TOL, top_n=1)` (power iteration to a relative
    change of TOL; no bound), torch.set_num_threads(2).

Times are a call with the operator's (or PyHessian's constructor's) build included, curvax's a second call in the
process (compiled), each the minimum of `--repeats` interleaved runs. Run (torch in the bench venv):
  python bench/vs_pyhessian_accuracy.py --presets small medium [--repeats 2] [--json out.json]
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pyhessian_problem as problem  # noqa: E402
import vs_pyhessian as vs  # noqa: E402

TOL, CAP, REF_STEPS, REF_VECTORS = 1e-3, 60, 100, 50
BOUNDS = ("residual", "gap", "change")


def ritz_by_step(lanczos_result):
  """The top Ritz value of the leading j×j block of T for j = 1..k (numpy, float64)."""
  k = int(lanczos_result.num_steps_taken)
  a = np.asarray(lanczos_result.alphas, np.float64)[:k]
  b = np.asarray(lanczos_result.betas, np.float64)[: k - 1]
  return np.array(
      [
          np.linalg.eigvalsh(np.diag(a[:j]) + np.diag(b[: j - 1], 1) + np.diag(b[: j - 1], -1))[-1]
          for j in range(1, k + 1)
      ]
  )


def run_preset(preset, path, repeats, have_torch):
  import jax  # noqa: PLC0415

  import curvax  # noqa: PLC0415

  loss_fn, params, batch, flat = problem.jax_side(preset, path)
  H = curvax.hessian(loss_fn, params, batch)
  ref = curvax.top_eigenvalues(H, 1, num_steps=REF_STEPS, key=jax.random.key(2), max_vectors=REF_VECTORS)
  lam, lam_bound = float(ref.values[0]), float(ref.bounds[0])
  err = lambda value: abs(value - lam) / abs(lam)

  def curvax_call(bound):
    op = curvax.hessian(loss_fn, params, batch)
    res = curvax.top_eigenvalues(op, 1, num_steps=CAP, key=jax.random.key(1), tol=TOL, bound=bound)
    return float(res.values[0]), float(res.bounds[0]), int(res.lanczos.num_steps_taken)

  calls = {f"curvax {b}": (lambda b=b: curvax_call(b)) for b in BOUNDS}
  if have_torch:
    calls["PyHessian power"] = torch_call(preset, path)
  for fn in calls.values():  # compile (curvax), warm up (torch)
    fn()
  times, out = {k: [] for k in calls}, {}
  for _ in range(repeats):
    for name, fn in calls.items():
      t = time.perf_counter()
      out[name] = fn()
      times[name].append(time.perf_counter() - t)
  rows = {"reference": dict(value=lam, error=0.0, bound=lam_bound / abs(lam), products=REF_STEPS, time=None)}
  for name, (value, bound, products) in out.items():
    rows[name] = dict(value=value, error=err(value), bound=bound / abs(lam), products=products, time=min(times[name]))
  curve = ritz_by_step(curvax.top_eigenvalues(H, 1, num_steps=CAP, key=jax.random.key(1)).lanczos)
  if have_torch:
    target = rows["PyHessian power"]["error"]
    reached = np.nonzero(np.abs(curve - lam) / abs(lam) <= target)[0]
    rows["Lanczos to PyHessian's error"] = dict(
        value=float(curve[reached[0]]) if reached.size else None,
        error=float(abs(curve[reached[0]] - lam) / abs(lam)) if reached.size else None,
        bound=None,
        products=int(reached[0]) + 1 if reached.size else None,
        time=None,
    )
  return rows


def torch_call(preset, path):
  import torch  # noqa: PLC0415
  import torch_transformer  # noqa: PLC0415
  from pyhessian import hessian  # noqa: PLC0415

  flat, inputs, targets = problem.read_problem(path)
  model, data = problem.torch_side(preset, flat, inputs, targets)
  module = sys.modules["pyhessian.hessian"]
  product, count = module.hessian_vector_product, [0]

  def counted(*args):
    count[0] += 1
    return product(*args)

  module.hessian_vector_product = counted

  def call():
    count[0] = 0
    torch.manual_seed(1)
    model.zero_grad(set_to_none=True)
    h = hessian(model, torch_transformer.token_cross_entropy, data=(data, data[1]), cuda=False)
    values, _ = h.eigenvalues(maxIter=100, tol=TOL, top_n=1)
    return float(values[0]), float("nan"), count[0]

  return call


def table(results):
  head = "| size | method | value | error vs reference | certified bound (relative) | products | time |"
  lines = [head, "|" + "---|" * (head.count("|") - 1)]
  fmt = lambda x, f: "–" if x is None or x != x else f.format(x)
  for preset, rows in results.items():
    for name, r in rows.items():
      lines.append(
          f"| {preset} | {name} | {fmt(r['value'], '{:.6g}')} | {fmt(r['error'], '{:.2e}')} | "
          f"{fmt(r['bound'], '{:.2e}')} | {fmt(r['products'], '{}')} | {fmt(r['time'], '{:.2f} s')} |"
      )
  return "\n".join(lines)


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--presets", nargs="+", default=["small", "medium"], choices=list(problem.SIZES))
  ap.add_argument("--repeats", type=int, default=2)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  have = vs.have_torch()
  print(vs.machine(have), flush=True)
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for preset in args.presets:
      path = os.path.join(tmp, f"{preset}.npz")
      problem.write_problem(preset, path)
      results[preset] = run_preset(preset, path, args.repeats, have)
      print(f"{preset}: {json.dumps(results[preset])}", flush=True)
  print(table(results))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
