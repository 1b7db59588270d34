"""Benchmark of the curvature operators on the `small` preset (float32, random tokens, no data pipeline).

Prints, with the raw times:
  1. HVP time / gradient time            (target <= 2.0: linearize-once makes a product one tangent pass)
  2. Lanczos time / (num_steps x HVP time) (target <= 1.1: reorthogonalization and bookkeeping are cheap)
  3. compile time of 10 vs 100 Lanczos steps (target: equal within 20%; the loop is one while_loop body),
     each the minimum of two compilations, interleaved

Run: python bench/hessian.py [--vocab_size 1000 --batch 16 64 --length 32 --steps 20 --repeats 4]

Ratio 1 compares two standalone calls (each a compiled program called once). The denominator of ratio 2 is the
HVP as Lanczos runs it: `num_steps` products inside one compiled loop (a power iteration: product, then
normalization). A standalone call also pays for allocating its output and temporaries (≈ 90 ms of a 230-ms call
at batch 16 on a 2-core CPU, measured), which a loop body reuses; dividing by it would flatter Lanczos.

The run-time ratios are printed per batch size. The first (16 sequences) is `analysis.batch_size`'s default; the
second shows how the ratio moves with the batch: the HVP's cost grows with the tokens, the reorthogonalization's
does not. Full reorthogonalization streams the filled rows of the [num_steps + 1, n] basis through memory twice
per step (coefficients, then update); averaged over the steps that is one read of the whole basis per step, so
the time of one gemv over the whole basis is printed as the memory-bandwidth floor of full reorthogonalization,
and the floor of the ratio it implies: where the floor alone exceeds 1.1, no implementation of full
reorthogonalization on this machine meets the target at that batch. "none" (three-term recurrence) isolates the
bookkeeping, and "partial" (Simon's PRO, `reorthogonalize="partial"`) runs the CGS pass only when the ω estimate
asks for it (the number of such steps is printed).
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


def _power_loop(lin, v, steps):
    """`steps` HVPs in one compiled loop, each followed by a normalization (no Lanczos bookkeeping)."""
    def body(_, x):
        y = lin(x)
        norm = jnp.sqrt(sum(jnp.vdot(leaf, leaf) for leaf in jax.tree.leaves(y)))
        return jax.tree.map(lambda leaf: leaf / norm, y)

    return jax.lax.fori_loop(0, steps, body, v)


def _interleaved_times(lin, v, steps, repeats):
    """Minimum wall time of each program over `repeats` interleaved rounds (HVP, HVP loop, full, partial, none,
    HVP, ...) so that a slow phase of a shared machine hits every one alike. Returns (times, Lanczos results)."""
    progs = {"hvp": jax.jit(lambda lin, v: lin(v)).lower(lin, v).compile(),
             "hvp_loop": jax.jit(_power_loop, static_argnums=2).lower(lin, v, steps).compile()}
    args = {"hvp": (lin, v), "hvp_loop": (lin, v)}
    for mode in ("full", "partial", "none"):
        run = jax.jit(lambda lin, v0: lanczos(lambda x: lin(x), v0, steps, reorthogonalize=mode))
        progs[mode], args[mode] = run.lower(lin, v).compile(), (lin, v)
    flat = ravel_pytree(v)[0]
    basis = jnp.ones((steps + 1, flat.size), flat.dtype)
    progs["gemv"], args["gemv"] = jax.jit(lambda b, w: b @ w).lower(basis, flat).compile(), (basis, flat)
    results = {name: jax.block_until_ready(prog(*args[name])) for name, prog in progs.items()}
    best = {name: float("inf") for name in progs}
    for _ in range(repeats):
        for name, prog in progs.items():
            best[name] = min(best[name], _best(lambda: prog(*args[name]), 1))
    return best, results


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
        t, results = _interleaved_times(lin, v, args.steps, args.repeats)
        reorths = {mode: int(results[mode].num_reorthogonalizations) for mode in ("full", "partial")}
        rows.append((batch_size, t_grad, t_lin, t, reorths))

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

    for batch_size, t_grad, t_lin, t, reorths in rows:
        steps = args.steps
        hvp, hvp_loop = t["hvp"], t["hvp_loop"] / steps
        full, partial, plain = t["full"] / steps, t["partial"] / steps, t["none"] / steps
        print(f"\nbatch {batch_size}x{args.length} ({batch_size * args.length} tokens)")
        print(f"  gradient                           {t_grad * 1e3:9.2f} ms")
        print(f"  HVP (linearized), one call         {hvp * 1e3:9.2f} ms   "
              f"(one-time linearization {t_lin * 1e3:.2f} ms)")
        print(f"  HVP in a loop of {steps}                {hvp_loop * 1e3:9.2f} ms per product")
        print(f"  Lanczos, full reorthogonalization  {full * 1e3:9.2f} ms per step ({steps} steps, "
              f"{reorths['full']} CGS steps)")
        print(f"  Lanczos, partial (Simon's PRO)     {partial * 1e3:9.2f} ms per step ({reorths['partial']} CGS steps)")
        print(f"  Lanczos, no reorthogonalization    {plain * 1e3:9.2f} ms per step")
        print(f"  floor of full reorthogonalization  {t['gemv'] * 1e3:9.2f} ms per step (one read of the "
              f"[{steps + 1}, n] basis: a gemv)")
        print(f"  HVP / gradient                       = {hvp / t_grad:.2f}   (target <= 2.0)")
        print(f"  Lanczos / (num_steps x HVP)          = {full / hvp_loop:.2f}   (target <= 1.1), full")
        print(f"  Lanczos / (num_steps x HVP)          = {partial / hvp_loop:.2f}   (target <= 1.1), partial")
        print(f"  Lanczos / (num_steps x HVP)          = {plain / hvp_loop:.2f}   no reorthogonalization")
        print(f"  floor for full: (none + gemv) / HVP  = {(plain + t['gemv']) / hvp_loop:.2f}")
    print(f"\ncompile 10 steps    {compile_times[10]:9.2f} s   (min of 2, interleaved with 100)")
    print(f"compile 100 steps   {compile_times[100]:9.2f} s")
    print(f"compile(100 steps) / compile(10)     = {compile_times[100] / compile_times[10]:.2f}   (target 0.8-1.2)")


if __name__ == "__main__":
    main()
