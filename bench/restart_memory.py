"""Benchmark: memory and products of `curvax.top_eigenvalues(H, 5)` with and without thick restart (`max_vectors`),
with the basis in host memory (`basis_memory="host"`), and of SLQ without a basis (`reorthogonalize="none"`).

    python bench/restart_memory.py                      # compile-only memory at ~19M parameters, runs at ~0.3M
    python bench/restart_memory.py --run-width=256 --tol=1e-3
    python bench/restart_memory.py --memory-only        # the compile-only part alone

Two parts, one JSON line each:
  * memory: a plain two-hidden-layer MLP of `--width` units (~19M parameters at 4096), its Hessian as a curvax
    operator, and the program of `top_eigenvalues(H, 5, num_steps=--steps)` unrestarted and with
    `max_vectors=--max-vectors` and with `basis_memory="host"`, and of `spectral_density(H, num_steps=--steps,
    num_probes=--probes, reorthogonalize="none")`, compiled but not run: XLA's buffer assignment (temp + output bytes;
    its host_* fields apart; the operator's arguments, i.e. parameters, batch and linearization residuals, are
    reported apart) against `curvax.memory.lanczos_memory`'s count (device peak, and the basis kept on the host).
  * products: the same MLP at `--run-width`, run to a relative residual bound `--tol` on the top 5: the products each
    variant takes, its wall time and its certified values.
"""

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import curvax  # noqa: E402
from curvax import density, memory, operators, spectrum  # noqa: E402

IN, CLASSES, ROWS = 512, 10, 64


def mlp(width, seed=0):
  """(loss_fn, params, batch) of a tanh MLP IN → width → width → CLASSES, cross-entropy on a random batch."""
  rng = np.random.default_rng(seed)
  dims = (IN, width, width, CLASSES)
  params = [
      {"w": jnp.asarray(rng.standard_normal((a, b)) / np.sqrt(a), jnp.float32), "b": jnp.zeros(b, jnp.float32)}
      for a, b in zip(dims[:-1], dims[1:])
  ]
  batch = (jnp.asarray(rng.standard_normal((ROWS, IN)), jnp.float32), jnp.asarray(rng.integers(0, CLASSES, ROWS)))
  return params, batch


def loss_fn(params, batch):
  x, y = batch
  for layer in params[:-1]:
    x = jnp.tanh(x @ layer["w"] + layer["b"])
  logits = x @ params[-1]["w"] + params[-1]["b"]
  return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


LANCZOS = dict(reorth_passes="auto", breakdown_tol=None, return_basis=False, callback_every=10, basis_sharding=None)


def _bytes(stats):
  """(device temp + output, host temp + output, arguments) bytes of a compiled program's memory analysis."""
  host = stats.host_temp_size_in_bytes + stats.host_output_size_in_bytes
  return stats.temp_size_in_bytes + stats.output_size_in_bytes, host, stats.argument_size_in_bytes


def program_bytes(op, n, k, steps, max_vectors, basis_memory="device"):
  """XLA's buffer assignment of the `top_eigenvalues` program (compiled, not run)."""
  kw = dict(k=k, largest=True, n=n, dtype=jnp.dtype("float32"), warm=False, num_steps=steps, stop=None, **LANCZOS)
  kw.update(matvec_rtol=None)
  if basis_memory != "device":  # passed only when asked: the same call measures a checkout without the option
    kw.update(basis_memory=basis_memory)
  if max_vectors is None:
    names, kw = spectrum._EXTREME_STATIC, dict(kw, reorthogonalize="full")
  else:
    names = spectrum._RESTART_STATIC
    kw = dict(kw, max_vectors=max_vectors, keep=spectrum.kept_vectors(k, max_vectors))
  fn = operators._jitted(spectrum._extreme_program, names)
  return _bytes(fn.lower(op.flat_operator(), jax.random.key(0), None, **kw).compile().memory_analysis())


def slq_bytes(op, n, steps, probes):
  """XLA's buffer assignment of `spectral_density(op, reorthogonalize="none")`'s program (compiled, not run)."""
  names = ("grid_size", "num_bootstrap", "band_percentiles", *density._SLQ_STATIC)
  kw = dict(grid_size=512, num_bootstrap=200, band_percentiles=(5.0, 95.0), num_probes=probes, n=n, probe_batch=1)
  kw.update(dtype=jnp.dtype("float32"), probe="rademacher", reorthogonalize="none", num_steps=steps, **LANCZOS)
  kw.update(matvec_rtol=None)
  fn = operators._jitted(density._slq_program, names)
  return _bytes(fn.lower(op.flat_operator(), jax.random.key(0), None, None, None, **kw).compile().memory_analysis())


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--width", type=int, default=4096)
  parser.add_argument("--run-width", type=int, default=384)
  parser.add_argument("--steps", type=int, default=100)
  parser.add_argument("--max-vectors", type=int, default=20)
  parser.add_argument("--tol", type=float, default=1e-3)
  parser.add_argument("--probes", type=int, default=4)
  parser.add_argument("--memory-only", action="store_true")
  parser.add_argument("--before", action="store_true", help="a checkout without basis_memory: skip that variant")
  args = parser.parse_args()
  k = 5
  params, batch = mlp(args.width)
  op = curvax.hessian(loss_fn, params, batch)
  n = op.size
  out = dict(part="memory", num_params=n, num_steps=args.steps, backend=jax.default_backend())
  variants = [("unrestarted", None, "device"), (f"max_vectors={args.max_vectors}", args.max_vectors, "device")]
  variants += [] if args.before else [("basis_memory=host", None, "host")]
  for name, mv, where in variants:
    measured, host, operator_args = program_bytes(op, n, k, args.steps, mv, where)
    keep = 0 if mv is None else spectrum.kept_vectors(k, mv)
    placed = {} if where == "device" else dict(basis_memory=where)
    counted = memory.lanczos_memory(n, jnp.float32, num_steps=args.steps, max_vectors=mv, keep=keep, **placed)
    out[name] = dict(xla_bytes=measured, xla_host_bytes=host, counted_peak=counted["peak"])
    out[name].update(basis_bytes=counted["basis"], host_basis_bytes=counted.get("host_basis", 0))
    out["operator_argument_bytes"] = operator_args
  measured, host, _ = slq_bytes(op, n, args.steps, args.probes)
  counted = memory.lanczos_memory(n, jnp.float32, num_steps=args.steps, reorthogonalize="none", num_probes=args.probes)
  out[f"slq none, {args.probes} probes"] = dict(
      xla_bytes=measured, xla_host_bytes=host, counted_peak=counted["peak"], basis_bytes=counted["basis"]
  )
  print(json.dumps(out), flush=True)
  if args.memory_only:
    return

  params, batch = mlp(args.run_width)
  op = curvax.hessian(loss_fn, params, batch)
  out = dict(part="products", num_params=op.size, tol=args.tol, max_steps=args.steps)
  for name, mv in (("unrestarted", None), (f"max_vectors={args.max_vectors}", args.max_vectors)):
    run = lambda: curvax.top_eigenvalues(
        op, k, num_steps=args.steps, key=jax.random.key(0), tol=args.tol, max_vectors=mv
    )
    jax.block_until_ready(run())  # compile
    start = time.perf_counter()
    res = jax.block_until_ready(run())
    out[name] = dict(
        products=int(res.lanczos.num_steps_taken),
        converged=bool(res.lanczos.converged),
        seconds=time.perf_counter() - start,
        values=np.asarray(res.values).tolist(),
        bounds=np.asarray(res.bounds).tolist(),
    )
  print(json.dumps(out), flush=True)


if __name__ == "__main__":
  main()
