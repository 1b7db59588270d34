"""Benchmark of the curvature operators on the `small` preset (float32, random tokens, no data pipeline).

Prints, with the raw times:
  1. HVP time / gradient time            (target <= 2.0: linearize-once makes a product one tangent pass)
  2. Lanczos time / (num_steps x HVP time) (target <= 1.1: reorthogonalization and bookkeeping are cheap)
  3. compile time of 10 vs 100 Lanczos steps (target: equal within 20%; the loop is one while_loop body),
     each the minimum of two compilations, interleaved

Run: python bench/hessian.py [--vocab_size 1000 --batch 16 64 --length 32 --steps 20 --repeats 4]

The run-time ratios are printed per batch size. The first (16 sequences) is `analysis.batch_size`'s default; the
second shows how the ratio moves with the batch: the HVP's cost grows with the tokens, the reorthogonalization's
does not (it streams the [num_steps + 1, n] basis through memory twice per step: one gemv for the coefficients
over the whole buffer, one fused update over the filled rows), so on a memory-bound CPU the Lanczos overhead is a
fixed number of milliseconds per step that a larger batch amortizes. "no reorthogonalization" isolates it, and
"partial" (Simon's PRO, `reorthogonalize="partial"`) shows what running the CGS pass only when the ω estimate asks
for it saves.
Compile times are measured by lowering and compiling `lanczos` under jit with the linearized operator as an
argument (so its residuals are operands, not constants embedded in the program); run times exclude compilation.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

from analysis.hessian import _linearized_grad  # noqa: E402
from analysis.lanczos import lanczos  # noqa: E402
from models import ModelConfig, get_model  # noqa: E402
from train.loss import make_loss_fn  # noqa: E402


def _best(fn, repeats):
    """Minimum wall time of `repeats` calls of fn (blocked until ready)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def _interleaved_times(lin, v, steps, repeats):
    """Minimum wall time of one HVP and of `steps` Lanczos steps per reorthogonalization, measured in interleaved
    rounds (HVP, full, partial, none, HVP, ...) so that a slow phase of a shared machine hits every mode alike."""
    progs = {"hvp": jax.jit(lambda lin, v: lin(v)).lower(lin, v).compile()}
    for mode in ("full", "partial", "none"):
        run = jax.jit(lambda lin, v0: lanczos(lambda x: lin(x), v0, steps, reorthogonalize=mode))
        progs[mode] = run.lower(lin, v).compile()
    for prog in progs.values():
        jax.block_until_ready(prog(lin, v))
    best = {name: float("inf") for name in progs}
    for _ in range(repeats):
        for name, prog in progs.items():
            best[name] = min(best[name], _best(lambda: prog(lin, v), 1))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab_size", type=int, default=1000)
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 64],
                    help="sequences per batch; the first is the analysis default (analysis.batch_size = 16)")
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="Lanczos steps for the run-time ratio")
    ap.add_argument("--repeats", type=int, default=4, help="interleaved rounds; the minimum of each is kept")
    args = ap.parse_args()

    model = get_model(ModelConfig.from_config({"preset": "small"}, vocab_size=args.vocab_size))
    loss_fn = make_loss_fn(model)
    rng = np.random.default_rng(0)
    rows = []
    for b, batch_size in enumerate(args.batch):
        batch = {k: jnp.asarray(rng.integers(1, args.vocab_size, (batch_size, args.length)), jnp.int32)
                 for k in ("inputs", "targets")}
        if b == 0:
            params = jax.jit(model.init)(jax.random.key(0), batch)["params"]
            n = ravel_pytree(params)[0].size
            print(f"small preset: {n} parameters, float32, backend {jax.default_backend()}, "
                  f"Lanczos basis {(args.steps + 1) * n * 4 / 2**20:.0f} MiB at {args.steps} steps")

        grad = jax.jit(jax.grad(loss_fn))
        jax.block_until_ready(grad(params, batch))
        t_grad = _best(lambda: grad(params, batch), args.repeats)
        lin = _linearized_grad(loss_fn, params, batch)
        v = jax.tree.map(jnp.ones_like, params)
        t_lin = _best(lambda: _linearized_grad(loss_fn, params, batch), 2)
        t = _interleaved_times(lin, v, args.steps, args.repeats)
        t_hvp = t["hvp"]
        rows.append((batch_size, t_grad, t_hvp, t_lin, t))

        if b == 0:
            def lanczos_program(steps):
                return jax.jit(lambda lin, v0: lanczos(lambda x: lin(x), v0, steps))

            # Interleaved and repeated, minimum kept: the first compile of a process pays one-time warm-up costs.
            compile_times = {10: float("inf"), 100: float("inf")}
            for steps in (10, 100, 10, 100):
                t0 = time.perf_counter()
                lanczos_program(steps).lower(lin, v).compile()
                compile_times[steps] = min(compile_times[steps], time.perf_counter() - t0)
        del lin

    for batch_size, t_grad, t_hvp, t_lin, t in rows:
        per_step, per_step_plain = t["full"] / args.steps, t["none"] / args.steps
        per_step_partial = t["partial"] / args.steps
        print(f"\nbatch {batch_size}x{args.length} ({batch_size * args.length} tokens)")
        print(f"  gradient                           {t_grad * 1e3:9.2f} ms")
        print(f"  HVP (linearized)                   {t_hvp * 1e3:9.2f} ms   (one-time linearization "
              f"{t_lin * 1e3:.2f} ms)")
        print(f"  Lanczos, full reorthogonalization  {per_step * 1e3:9.2f} ms per step ({args.steps} steps)")
        print(f"  Lanczos, partial (Simon's PRO)     {per_step_partial * 1e3:9.2f} ms per step")
        print(f"  Lanczos, no reorthogonalization    {per_step_plain * 1e3:9.2f} ms per step "
              f"(full reorthogonalization costs {(per_step - per_step_plain) * 1e3:.1f} ms per step)")
        print(f"  HVP / gradient                       = {t_hvp / t_grad:.2f}   (target <= 2.0)")
        print(f"  Lanczos / (num_steps x HVP)          = {per_step / t_hvp:.2f}   (target <= 1.1), full")
        print(f"  Lanczos / (num_steps x HVP)          = {per_step_partial / t_hvp:.2f}   (target <= 1.1), partial")
    print(f"\ncompile 10 steps    {compile_times[10]:9.2f} s   (min of 2, interleaved with 100)")
    print(f"compile 100 steps   {compile_times[100]:9.2f} s")
    print(f"compile(100 steps) / compile(10)     = {compile_times[100] / compile_times[10]:.2f}   (target 0.8-1.2)")


if __name__ == "__main__":
    main()
