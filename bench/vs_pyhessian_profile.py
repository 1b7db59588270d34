"""Where a curvax Lanczos step goes against PyHessian's, on bench/vs_pyhessian.py's identical encoder-decoder.

Timing of separately-jitted pieces (not jax.profiler): each piece is its own jitted program taking the operator as
an argument, compiled before timing, run `--repeats` times interleaved with the other pieces and the torch side, the
minimum kept (the machine may be shared), every result blocked on (`jax.block_until_ready`):

  * build: `curvax.hessian(loss_fn, params, batch)`, the linearization of the gradient (one forward and backward);
  * product: one Hessian-vector product `H.flat_matvec(v)` on a flat vector;
  * reorthogonalization: `curvax.orthogonality.cgs_reorthogonalize` (what full reorthogonalization runs every
    step) on the real 30-step basis at steps 0, 15 and 29 (its cost grows with the step; their mean stands for a step);
  * orthogonality measure: `gram_deviation` of the basis, once per call (the certified bounds need it);
  * Lanczos: the whole `curvax.lanczos(H, num_steps=30)` on a built operator (full reorthogonalization, the
    default, and `reorthogonalize="partial"`), and the transfer of its result to the host (`jax.device_get`);
  * torch: PyHessian's constructor (a forward and a backward with `create_graph=True`), one product (its
    `hessian_vector_product`: `torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)`, the
    double backward) and its whole `density(30, 1)` (unless `--no_torch_lanczos`).

Lanczos overhead = (Lanczos − 30 × product) / (30 × product), on each side. Run (torch and pyhessian in the bench
venv, bench/requirements-pyhessian.txt):
  python bench/vs_pyhessian_profile.py --presets small medium [--repeats 3] [--json out.json]
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


def _timed(fn):
  t = time.perf_counter()
  fn()
  return time.perf_counter() - t


def jax_pieces(preset, path):
  """{piece name: zero-argument callable that runs it to completion}, compiled (each run once)."""
  import jax  # noqa: PLC0415

  import curvax  # noqa: PLC0415
  from curvax.orthogonality import cgs_reorthogonalize, gram_deviation  # noqa: PLC0415

  loss_fn, params, batch, _ = problem.jax_side(preset, path)
  H = curvax.hessian(loss_fn, params, batch)
  n = H.size
  v = jax.random.normal(jax.random.key(3), (n,), H.dtype)
  res = curvax.lanczos(H, num_steps=vs.STEPS, key=jax.random.key(1), return_basis=True)
  basis = res.basis
  product = jax.jit(lambda op, x: op.flat_matvec(x))
  reorth = jax.jit(cgs_reorthogonalize, static_argnums=3)
  gram = jax.jit(gram_deviation)

  def residual(i):  # the vector step i orthogonalizes: A q_i − β_{i−1} q_{i−1} − α_i q_i
    beta = res.betas[i - 1] if i else 0.0
    return product(H, basis[i]) - beta * basis[max(i - 1, 0)] - res.alphas[i] * basis[i]

  ws = {i: jax.block_until_ready(residual(i)) for i in (0, vs.STEPS // 2, vs.STEPS - 1)}
  lanczos = lambda op, r="full": curvax.lanczos(op, num_steps=vs.STEPS, key=jax.random.key(1), reorthogonalize=r)
  out = lanczos(H)
  pieces = {
      "build": lambda: jax.block_until_ready(curvax.hessian(loss_fn, params, batch)),
      "product": lambda: jax.block_until_ready(product(H, v)),
      **{f"reorth_{i}": (lambda i=i: jax.block_until_ready(reorth(basis, ws[i], i, "auto"))) for i in ws},
      "gram": lambda: jax.block_until_ready(gram(basis, vs.STEPS)),
      "lanczos": lambda: jax.block_until_ready(lanczos(H)),
      "lanczos_partial": lambda: jax.block_until_ready(lanczos(H, "partial")),
      "to_host": lambda: jax.device_get(out),
  }
  for fn in pieces.values():
    fn()
  return pieces, n


def torch_pieces(preset, path, with_lanczos):
  import torch  # noqa: PLC0415
  import torch_transformer  # noqa: PLC0415
  from pyhessian import hessian  # noqa: PLC0415

  vs._install_torch_eig(torch)
  flat, inputs, targets = problem.read_problem(path)
  model, data = problem.torch_side(preset, flat, inputs, targets)
  params = [p for p in model.parameters() if p.requires_grad]
  v = [torch.randn_like(p) for p in params]
  state = {}

  def build():
    model.zero_grad(set_to_none=True)
    loss = torch_transformer.token_cross_entropy(model(data), data[1])
    loss.backward(create_graph=True)
    state["grads"] = [p.grad for p in params]

  def product():
    torch.autograd.grad(state["grads"], params, grad_outputs=v, only_inputs=True, retain_graph=True)

  def density():
    model.zero_grad(set_to_none=True)
    h = hessian(model, torch_transformer.token_cross_entropy, data=(data, data[1]), cuda=False)
    h.density(iter=vs.STEPS, n_v=1)

  build()
  pieces = {"torch_build": build, "torch_product": product}
  if with_lanczos:
    pieces["torch_lanczos"] = density
  product()
  return pieces


def profile(preset, path, repeats, torch_lanczos=True):
  pieces, n = jax_pieces(preset, path)
  have = vs.have_torch()
  if have:
    pieces.update(torch_pieces(preset, path, torch_lanczos))
  times = {k: [] for k in pieces}
  for _ in range(repeats):
    for k, fn in pieces.items():
      times[k].append(_timed(fn))
  best = {k: min(v) for k, v in times.items()}
  reorth = float(np.mean([best[k] for k in best if k.startswith("reorth_")]))
  products = vs.STEPS * best["product"]
  row = dict(
      params=n,
      build=best["build"],
      product=best["product"],
      reorth_mean=reorth,
      **{k: best[k] for k in best if k.startswith("reorth_")},
      gram=best["gram"],
      to_host=best["to_host"],
      lanczos=best["lanczos"],
      lanczos_overhead=(best["lanczos"] - products) / products,
      lanczos_partial=best["lanczos_partial"],
      partial_overhead=(best["lanczos_partial"] - products) / products,
      step_rest=(best["lanczos"] - products - vs.STEPS * reorth - best["gram"]) / vs.STEPS,
  )
  if have:
    t_products = vs.STEPS * best["torch_product"]
    row.update(
        torch_build=best["torch_build"],
        torch_product=best["torch_product"],
        product_ratio=best["product"] / best["torch_product"],
    )
    if "torch_lanczos" in best:
      row.update(
          torch_lanczos=best["torch_lanczos"],
          torch_overhead=(best["torch_lanczos"] - best["torch_build"] - t_products) / t_products,
      )
  return row


def table(rows):
  head = (
      "| size | params | build | product | reorth. (mean of steps 0/15/29) | Gram | to host | Lanczos 30 | overhead "
      "| Lanczos 30, partial | overhead "
      "| torch build | torch product | torch density(30,1) | torch overhead | product curvax/torch |"
  )
  lines = [head, "|" + "---|" * (head.count("|") - 1)]
  ms = lambda x: f"{1e3 * x:.1f} ms"
  for preset, r in rows.items():
    cells = [
        f"{r['params'] / 1e6:.2f}M",
        ms(r["build"]),
        ms(r["product"]),
        ms(r["reorth_mean"]),
        ms(r["gram"]),
        ms(r["to_host"]),
        f"{r['lanczos']:.2f} s",
        f"{100 * r['lanczos_overhead']:.1f} %",
        f"{r['lanczos_partial']:.2f} s",
        f"{100 * r['partial_overhead']:.1f} %",
    ]
    if "torch_product" in r:
      lanczos = "torch_lanczos" in r
      cells += [
          ms(r["torch_build"]),
          ms(r["torch_product"]),
          f"{r['torch_lanczos']:.2f} s" if lanczos else "–",
          f"{100 * r['torch_overhead']:.1f} %" if lanczos else "–",
          f"{r['product_ratio']:.3f}",
      ]
    else:
      cells += ["–"] * 5
    lines.append(f"| {preset} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--presets", nargs="+", default=["small", "medium"], choices=list(problem.SIZES))
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--json", default=None, help="also write the rows to this file")
  ap.add_argument(
      "--no_torch_lanczos", action="store_true", help="skip PyHessian's density(30, 1) (bench/vs_pyhessian.py has it)"
  )
  args = ap.parse_args()
  print(vs.machine(vs.have_torch()), flush=True)
  rows = {}
  with tempfile.TemporaryDirectory() as tmp:
    for preset in args.presets:
      path = os.path.join(tmp, f"{preset}.npz")
      problem.write_problem(preset, path)
      rows[preset] = profile(preset, path, args.repeats, not args.no_torch_lanczos)
      print(f"{preset}: " + json.dumps({k: round(v, 5) for k, v in rows[preset].items()}), flush=True)
  print(table(rows))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(rows, f, indent=1)


if __name__ == "__main__":
  main()
