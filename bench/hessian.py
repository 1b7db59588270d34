"""Benchmark of the curvature tools on the path a user takes (the README's calls), on the `small` preset, float32.

Section 1, the public path, per batch size: `hvp_fn` -> `lanczos` / `top_eigenvalues` / `spectral_density` / `trace`,
each timed on its first call and on a second call with a NEW operator of the same structure (what a second
checkpoint, seed or batch costs), as ratios to the same process's gradient and HVP times:
  * 1-step Lanczos, second call / one HVP                          (target <= 1.5: no compile on a second call)
  * 30-step Lanczos, partial reorth., second call / (30 x HVP)     (target <= 1.15)
  * 30-step Lanczos, full reorth. / (none + 30 gemv floors)        (target <= 1.1: one read of the basis per step)
  * Hutchinson trace per probe / HVP                               (target <= 1.1)
  * SLQ 8 probes x 30 steps / (240 x HVP), probes one after another and in lockstep    (target <= 1.15)
  * top eigenvalue to 1% (`tol=0.01`) by the residual bound (rigorous) and by its gap-theorem refinement
    (`bound="gap"`, an estimate): matvecs, time and error against power iteration to a relative change of 1e-3
    (PyHessian's criterion, no bound: the baseline, not a library feature)
  * HVP / gradient (target <= 1.6), with XLA's FLOP ratio of the two programs (the bound for matmul-dominated models),
    and the Gauss–Newton product beside it; in gradient units: 30-step Lanczos, the top eigenvalue, one trace probe
Short routines report the minimum of `--repeats` second calls, each on another operator; long ones one second call.

Section 2, per-block spectra of every block of `small`: total time against matvecs x product time + one compile
per block shape.

Section 3, low level: the HVP inside a compiled loop, Lanczos without reorthogonalization, the gemv floor of full
reorthogonalization, and the compile time of 10 vs 100 Lanczos steps (target: equal within 20%).

Run: python bench/hessian.py [--vocab_size 1000 --batch 16 32 --length 32 --steps 30 --repeats 3]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import curvax  # noqa: E402
from analysis import blocks, hessian  # noqa: E402
from curvax.lanczos import _lanczos_program  # noqa: E402  (bench/ times curvax's internals)
from models import ModelConfig, get_model  # noqa: E402
from train.loss import make_logits_fn, make_loss_fn  # noqa: E402

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: _COMPILES.append(duration) if event == _COMPILE_EVENT else None
)


def timed(fn):
  """(seconds, result, number of XLA compilations) of one call, blocked until ready."""
  before = len(_COMPILES)
  t = time.perf_counter()
  out = jax.block_until_ready(fn())
  return time.perf_counter() - t, out, len(_COMPILES) - before


def best(fn, repeats):
  return min(timed(fn)[0] for _ in range(repeats))


def first_and_second(make, repeats=1):
  """`make(i)` runs the routine on operator i: i = 0 first call (compiles), then `repeats` calls each with another
  operator than the call before (i = 1, 0, 1, ...; none may compile): their minimum is the "second call" time,
  their total compile count is reported, and the output is the last one's (operator 1 for odd `repeats`)."""
  t1, _, _ = timed(lambda: make(0))
  t2, c2, out = float("inf"), 0, None
  for j in range(repeats):
    t, out, c = timed(lambda: make(1 - j % 2))
    t2, c2 = min(t2, t), c2 + c
  return t1, t2, c2, out


def power_iteration(matvec, v, rel_tol=1e-3, max_iter=500):
  """Baseline: v <- Hv/|Hv| until the Rayleigh quotient changes by < rel_tol (PyHessian's stopping rule)."""
  lam = None
  for i in range(1, max_iter + 1):
    w = matvec(v)
    new = float(sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(v), jax.tree.leaves(w))))
    norm = float(jnp.sqrt(sum(jnp.vdot(x, x) for x in jax.tree.leaves(w))))
    v = jax.tree.map(lambda x: x / norm, w)
    if lam is not None and abs(new - lam) <= rel_tol * abs(lam):
      return new, i
    lam = new
  return lam, max_iter


def _power_loop(op, v, steps):
  """`steps` HVPs in one compiled loop, each followed by a normalization (the HVP as Lanczos runs it)."""

  def body(_, x):
    y = op.flat_matvec(x)
    return y / jnp.linalg.norm(y)

  return jax.lax.fori_loop(0, steps, body, v)


def flops(fn, *args):
  cost = jax.jit(fn).lower(*args).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost.get("flops", float("nan"))) if cost else float("nan")


class _Landed(dict):
  """A section's measurements, each printed as it lands (its numbers: seconds, or first call, second call,
  compiles), so a run stopped at a time limit (an accelerator's lease) still reports what it measured before the
  table (reports/BENCH_H200.md has a run the lease cut short)."""

  def __setitem__(self, name, value):
    super().__setitem__(name, value)
    numbers = [v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, (int, float))]
    print(f"  measured {name}: " + ", ".join(format(v, ".4g") for v in numbers), flush=True)


def section_public(model, params, batches, args, rows):
  loss_fn = make_loss_fn(model)
  n = curvax.FlatSpec.of(params).size
  grad = jax.jit(jax.grad(loss_fn))
  timed(lambda: grad(params, batches[0]))
  t_grad = best(lambda: grad(params, batches[0]), args.repeats)
  t_build1, _, _ = timed(lambda: hessian.hvp_fn(loss_fn, params, batches[0]))
  t_build2, _, _ = timed(lambda: hessian.hvp_fn(loss_fn, params, batches[1]))
  ops = [hessian.hvp_fn(loss_fn, params, b) for b in batches]
  v = jax.tree.map(lambda x: jax.random.normal(jax.random.key(1), x.shape, x.dtype), params)
  timed(lambda: ops[0](v))
  t_hvp = best(lambda: ops[1](v), args.repeats)
  m = args.steps
  key = jax.random.key(0)
  r = _Landed()
  r["grad"], r["hvp"], r["build"] = t_grad, t_hvp, (t_build1, t_build2)
  short = args.repeats if args.repeats % 2 else args.repeats + 1  # odd: the last short call is on operator 1
  r["lanczos1"] = first_and_second(lambda i: curvax.lanczos(ops[i], num_steps=1, v0=v), short)
  for mode in ("partial", "full", "none"):
    r[f"lanczos_{mode}"] = first_and_second(lambda i: curvax.lanczos(ops[i], num_steps=m, v0=v, reorthogonalize=mode))
  r["trace"] = first_and_second(lambda i: curvax.trace(ops[i], num_probes=args.probes, key=key), short)
  r["trace_lockstep"] = first_and_second(
      lambda i: curvax.trace(ops[i], num_probes=args.probes, key=key, probe_batch=args.probes)
  )
  r["slq"] = first_and_second(
      lambda i: curvax.spectral_density(ops[i], num_steps=m, num_probes=args.probes, key=key, probe_batch=1)
  )
  r["slq_lockstep"] = first_and_second(
      lambda i: curvax.spectral_density(
          ops[i], num_steps=m, num_probes=args.probes, key=key, probe_batch=args.probes, max_basis_bytes=2**36
      )
  )
  for bound in ("residual", "gap"):
    r[f"top_{bound}"] = first_and_second(
        lambda i: curvax.top_eigenvalues(ops[i], 1, num_steps=m, key=key, tol=0.01, bound=bound), short
    )
  t_power, (lam_power, n_power), _ = timed(lambda: power_iteration(ops[1], v))
  r["power"] = (t_power, lam_power, n_power)
  # FLOPs of the two programs as XLA counts them, and the Gauss–Newton product.
  lin_flops = flops(lambda op, v: op(v), ops[1], v)
  grad_flops = flops(jax.grad(loss_fn), params, batches[0])
  ggn = [hessian.ggn_vp_fn(make_logits_fn(model), params, b) for b in batches]
  timed(lambda: ggn[0](v))
  r["ggn"] = best(lambda: ggn[1](v), args.repeats)
  r["flops"] = (lin_flops, grad_flops)
  # Low level: the HVP inside a compiled loop, and the gemv floor of full reorthogonalization.
  flat_v = curvax.FlatSpec.of(v).ravel(v)
  loop = jax.jit(_power_loop, static_argnums=2)
  timed(lambda: loop(ops[1], flat_v, m))
  r["hvp_loop"] = best(lambda: loop(ops[1], flat_v, m), args.repeats) / m
  basis = jnp.ones((m + 1, n), flat_v.dtype)
  gemv = jax.jit(lambda b, w: b @ w)
  timed(lambda: gemv(basis, flat_v))
  r["gemv"] = best(lambda: gemv(basis, flat_v), args.repeats)
  rows.append(r)


def print_public(r, batch_size, args, n):
  m, p = args.steps, args.probes
  hvp, grad = r["hvp"], r["grad"]
  line = lambda label, t1, t2, c2, ratio, target="": print(
      f"  {label:<44} first {t1:8.2f} s  second {t2:8.3f} s  ({c2} compiles)  {ratio}{target}"
  )
  print(f"\nbatch {batch_size}x{args.length} ({batch_size * args.length} tokens), n = {n}")
  print(
      f"  gradient {grad * 1e3:.1f} ms   HVP (operator call) {hvp * 1e3:.1f} ms   HVP in a loop {r['hvp_loop'] * 1e3:.1f}"
      f" ms   GGN product {r['ggn'] * 1e3:.1f} ms   hvp_fn build first {r['build'][0]:.2f} s, second "
      f"{r['build'][1]:.3f} s"
  )
  lin_flops, grad_flops = r["flops"]
  print(
      f"  HVP / gradient = {hvp / grad:.2f} (target <= 1.6); FLOPs HVP / gradient = {lin_flops / grad_flops:.2f} "
      f"(XLA cost analysis); GGN / gradient = {r['ggn'] / grad:.2f}"
  )
  t1, t2, c2, _ = r["lanczos1"]
  line("lanczos, 1 step", t1, t2, c2, f"second / HVP = {t2 / hvp:.2f}", " (target <= 1.5)")
  for mode, target in (("partial", " (target <= 1.15)"), ("full", ""), ("none", "")):
    t1, t2, c2, out = r[f"lanczos_{mode}"]
    line(
        f"lanczos, {m} steps, {mode} ({int(out.num_reorthogonalizations)} CGS)",
        t1,
        t2,
        c2,
        f"/ ({m} x HVP) = {t2 / (m * hvp):.2f}, / ({m} x HVP in loop) = {t2 / (m * r['hvp_loop']):.2f}",
        target,
    )
  full, none = r["lanczos_full"][1], r["lanczos_none"][1]
  print(
      f"  full reorthogonalization over none: {(full - none) / m * 1e3:.1f} ms per step; gemv floor "
      f"{r['gemv'] * 1e3:.1f} ms per step ({(full - none) / m / r['gemv']:.2f} gemvs); full / (none + {m} gemvs) = "
      f"{full / (none + m * r['gemv']):.2f} (target <= 1.1)"
  )
  for name, label in (("trace", "trace, Hutchinson, sequential"), ("trace_lockstep", "trace, Hutchinson, lockstep")):
    t1, t2, c2, _ = r[name]
    line(f"{label} ({p} probes)", t1, t2, c2, f"per probe / HVP = {t2 / p / hvp:.2f}", " (target <= 1.1)")
  for name, label in (("slq", "SLQ, sequential"), ("slq_lockstep", "SLQ, probes in lockstep")):
    t1, t2, c2, _ = r[name]
    line(f"{label} ({p} x {m})", t1, t2, c2, f"/ ({p * m} x HVP) = {t2 / (p * m * hvp):.2f}", " (target <= 1.15)")
  # Reference: the largest Ritz value of the 30-step fully reorthogonalized Lanczos on the same operator (1).
  ref = float(np.max(np.asarray(r["lanczos_full"][3].ritz_values)))
  t_power, lam_power, n_power = r["power"]
  for bound in ("residual", "gap"):
    t1, t2, c2, top = r[f"top_{bound}"]
    k = int(top.lanczos.num_steps_taken)
    value, used = float(top.values[0]), float((top.bounds if bound == "residual" else top.gap_bounds)[0])
    line(
        f"top eigenvalue, {bound} bound <= 1%",
        t1,
        t2,
        c2,
        f"{k} matvecs ({k / n_power:.2f} x power), λ = {value:.5g} ± {used:.2g} ({used / abs(value) * 100:.2f}%), "
        f"error vs reference {abs(value - ref) / abs(ref) * 100:.3f}%",
    )
  print(
      f"  {'top eigenvalue, power iteration to 1e-3':<44} {t_power:8.2f} s, {n_power} matvecs, "
      f"λ = {lam_power:.5g} (no bound), error vs reference {abs(lam_power - ref) / abs(ref) * 100:.3f}%  "
      f"(reference: largest Ritz value of the {m}-step full Lanczos, {ref:.6g})"
  )
  top_time = min(r["top_residual"][1], r["top_gap"][1])
  print(
      f"  in gradients: {m}-step Lanczos (partial) {r['lanczos_partial'][1] / grad:.0f}, top eigenvalue "
      f"{top_time / grad:.0f}, one trace probe {r['trace'][1] / p / grad:.2f}  (targets <= 60, <= 40, <= 1.8)"
  )


def section_blocks(model, params, batches, args):
  loss_fn = make_loss_fn(model)
  ops = [hessian.hvp_fn(loss_fn, params, b) for b in batches]
  names = sorted(blocks.model_blocks(model))
  signatures = {}
  for name in names:
    sizes = tuple(int(np.size(x)) for _, x in sorted(blocks.block_params(params, name, model=model).items()))
    signatures.setdefault(sizes, []).append(name)
  steps = args.block_steps
  block0, example0 = blocks.block_operator(ops[1], params, names[0], model=model)
  v0 = jax.tree.map(jnp.ones_like, example0)
  timed(lambda: block0(v0))
  t_block = best(lambda: block0(v0), args.repeats)
  totals, compile_counts, matvecs = [], [], 0
  for i in range(2):  # first pass: compiles one program per signature; second pass (a new operator): none
    before = len(_COMPILES)
    t = time.perf_counter()
    matvecs = 0
    for j, name in enumerate(names):
      op, example = blocks.block_operator(ops[i], params, name, model=model)
      size = curvax.FlatSpec.of(example).size
      e = curvax.top_eigenvalues(op, 1, num_steps=min(steps, size), key=jax.random.key(j))
      matvecs += int(jax.block_until_ready(e).lanczos.num_steps_taken)
    totals.append(time.perf_counter() - t)
    compile_counts.append(len(_COMPILES) - before)
  print(
      f"\nper-block spectra: {len(names)} blocks, {len(signatures)} distinct block shapes, {steps} Lanczos steps "
      f"each ({matvecs} matvecs), block product {t_block * 1e3:.1f} ms"
  )
  print(f"  first pass  {totals[0]:8.2f} s ({compile_counts[0]} compiles)")
  print(
      f"  second pass {totals[1]:8.2f} s ({compile_counts[1]} compiles, a new operator)  / (matvecs x block product) "
      f"= {totals[1] / (matvecs * t_block):.2f} (target <= 1.2)"
  )
  print(
      f"  first pass - second pass = {totals[0] - totals[1]:.1f} s of compilation = "
      f"{(totals[0] - totals[1]) / len(signatures):.1f} s per distinct block shape"
  )


def section_compile(ops, v, args):
  """Trace + lower + compile of the public Lanczos program at 10 and 100 steps, each through a fresh `jax.jit`
  wrapper (so no in-memory cache answers), interleaved, minimum of two."""
  flat_v = curvax.FlatSpec.of(v).ravel(v)
  times = {10: float("inf"), 100: float("inf")}
  for steps in (10, 100, 10, 100):
    static = dict(
        num_steps=steps,
        reorthogonalize="full",
        reorth_passes="auto",
        breakdown_tol=None,
        return_basis=False,
        stop=None,
        callback_every=10,
        progress_total=None,
    )
    fresh = jax.jit(lambda op, x, cid: _lanczos_program(op, x, cid, **static))
    t = time.perf_counter()
    fresh.lower(ops[0], flat_v, jnp.int32(-1)).compile()
    times[steps] = min(times[steps], time.perf_counter() - t)
  print(
      f"\ncompile 10 steps {times[10]:.2f} s, 100 steps {times[100]:.2f} s: ratio {times[100] / times[10]:.2f} "
      "(target 0.8-1.2; min of 2, interleaved)"
  )


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--vocab_size", type=int, default=1000)
  ap.add_argument(
      "--batch",
      type=int,
      nargs="+",
      default=[16, 32],
      help="sequences per batch; the first is the analysis default (analysis.batch_size = 16)",
  )
  ap.add_argument("--length", type=int, default=32)
  ap.add_argument("--steps", type=int, default=30, help="Lanczos steps (and per SLQ probe)")
  ap.add_argument("--probes", type=int, default=8, help="SLQ and trace probes")
  ap.add_argument("--block_steps", type=int, default=10, help="Lanczos steps per block in the per-block section")
  ap.add_argument("--repeats", type=int, default=3, help="repeats of the short timings; the minimum is kept")
  ap.add_argument("--sections", default="public,blocks,compile")
  args = ap.parse_args()
  sections = set(args.sections.split(","))

  model = get_model(ModelConfig.from_config({"preset": "small"}, vocab_size=args.vocab_size))
  rng = np.random.default_rng(0)
  rows, first = [], None
  for b, batch_size in enumerate(args.batch):
    batches = [
        {
            k: jnp.asarray(rng.integers(1, args.vocab_size, (batch_size, args.length)), jnp.int32)
            for k in ("inputs", "targets")
        }
        for _ in range(2)
    ]
    if b == 0:
      params = jax.jit(model.init)(jax.random.key(0), batches[0])["params"]
      n = curvax.FlatSpec.of(params).size
      print(
          f"small preset: {n} parameters, float32, backend {jax.default_backend()} "
          f"({jax.devices()[0].device_kind}), {os.cpu_count()} CPUs"
      )
      first = batches
    if "public" in sections:
      section_public(model, params, batches, args, rows)
      print_public(rows[-1], batch_size, args, n)
    if b == 0 and "compile" in sections:
      ops = [hessian.hvp_fn(make_loss_fn(model), params, batches[0])]
      section_compile(ops, jax.tree.map(jnp.ones_like, params), args)
      del ops
  if "blocks" in sections:
    section_blocks(model, params, first, args)


if __name__ == "__main__":
  main()
