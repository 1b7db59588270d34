"""Benchmark of the curvature operators on the `small` preset (float32, random tokens, no data pipeline).

Prints, with the raw times:
  1. HVP time / gradient time            (target <= 2.0: linearize-once makes a product one tangent pass)
  2. Lanczos time / (num_steps x HVP time) (target <= 1.1: reorthogonalization and bookkeeping are cheap)
  3. compile time of 10 vs 100 Lanczos steps (target: equal within 20%; the loop is one while_loop body),
     each the minimum of two compilations, interleaved

Run: python bench/hessian.py [--vocab_size 1000 --batch 16 --length 32 --steps 20 --repeats 5]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab_size", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="Lanczos steps for the run-time ratio")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    model = get_model(ModelConfig.from_config({"preset": "small"}, vocab_size=args.vocab_size))
    rng = np.random.default_rng(0)
    batch = {k: jnp.asarray(rng.integers(1, args.vocab_size, (args.batch, args.length)), jnp.int32)
             for k in ("inputs", "targets")}
    params = jax.jit(model.init)(jax.random.key(0), batch)["params"]
    loss_fn = make_loss_fn(model)
    n = ravel_pytree(params)[0].size
    print(f"small preset: {n} parameters, batch {args.batch}x{args.length}, float32, backend {jax.default_backend()}")

    grad = jax.jit(jax.grad(loss_fn))
    jax.block_until_ready(grad(params, batch))
    t_grad = _best(lambda: grad(params, batch), args.repeats)

    lin = _linearized_grad(loss_fn, params, batch)
    apply = jax.jit(lambda lin, v: lin(v))
    v = jax.tree.map(jnp.ones_like, params)
    jax.block_until_ready(apply(lin, v))
    t_hvp = _best(lambda: apply(lin, v), args.repeats)
    t_lin = _best(lambda: _linearized_grad(loss_fn, params, batch), 2)

    def lanczos_program(steps):
        return jax.jit(lambda lin, v0: lanczos(lambda x: lin(x), v0, steps))

    # Interleaved and repeated, minimum kept: the first compile of a process pays one-time warm-up costs.
    compile_times = {10: float("inf"), 100: float("inf")}
    for steps in (10, 100, 10, 100):
        t = time.perf_counter()
        lanczos_program(steps).lower(lin, v).compile()
        compile_times[steps] = min(compile_times[steps], time.perf_counter() - t)
    run = lanczos_program(args.steps).lower(lin, v).compile()
    jax.block_until_ready(run(lin, v))
    t_lanczos = _best(lambda: run(lin, v), max(2, args.repeats // 2))

    plain = jax.jit(lambda lin, v0: lanczos(lambda x: lin(x), v0, args.steps, reorthogonalize="none"))
    plain = plain.lower(lin, v).compile()
    jax.block_until_ready(plain(lin, v))
    t_plain = _best(lambda: plain(lin, v), max(2, args.repeats // 2))

    print(f"gradient            {t_grad * 1e3:9.2f} ms")
    print(f"HVP (linearized)    {t_hvp * 1e3:9.2f} ms   (one-time linearization {t_lin * 1e3:.2f} ms)")
    print(f"Lanczos {args.steps:3d} steps   {t_lanczos * 1e3:9.2f} ms")
    print(f"Lanczos {args.steps:3d} steps, no reorthogonalization {t_plain * 1e3:9.2f} ms (isolates the CGS2 cost)")
    print(f"compile 10 steps    {compile_times[10]:9.2f} s   (min of 2, interleaved with 100)")
    print(f"compile 100 steps   {compile_times[100]:9.2f} s")
    print(f"HVP / gradient                       = {t_hvp / t_grad:.2f}   (target <= 2.0)")
    print(f"Lanczos / (num_steps x HVP)          = {t_lanczos / (args.steps * t_hvp):.2f}   (target <= 1.1)")
    print(f"compile(100 steps) / compile(10)     = {compile_times[100] / compile_times[10]:.2f}   (target 0.8-1.2)")


if __name__ == "__main__":
    main()
