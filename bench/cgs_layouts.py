"""What one full-reorthogonalization step of `curvax.lanczos` costs on this backend, against the bytes it must read.

A step's classical Gram-Schmidt pass (`curvax.orthogonality.project_out`) reads the basis twice: h = V w, then
w −= V_iᵀh over the filled rows. Both are memory-bound, so no layout makes a pass cheaper than reading the i + 1
filled rows twice; this bench measures that floor (the stream bandwidth of a reduction over the buffer) beside the
pass as curvax runs it and the layouts that would read fewer rows (a static slice of the filled rows, one block of
a [blocks, 8, n] layout, the coefficients of two vectors in one product, the update as one product over the whole
buffer), on a [rows, n] float32 basis.

    python bench/cgs_layouts.py [--n 19600000] [--rows 31] [--repeats 5]

Prints one line per measurement (median of `--repeats`, interleaved) and the floor of the pass at step i = rows/2,
whose ratio to a product time gives the least overhead any full-reorthogonalization layout can reach
(reports/BENCH_PYHESSIAN.md).
"""

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from curvax import orthogonality  # noqa: E402


def layouts(rows: int, i: int) -> dict:
  """{name: jitted f(V, Vb, w, q)} of the measured ways to read the basis (module docstring); Vb: V's first 8⌊rows/8⌋
  rows as [blocks, 8, n]."""
  block = lambda V, Vb, w, q: jax.lax.dynamic_index_in_dim(Vb, jnp.int32(i // 8), keepdims=False) @ w
  return {
      "stream read of the buffer (jnp.sum)": jax.jit(lambda V, Vb, w, q: jnp.sum(V)),
      f"h = V w, whole buffer ({rows} rows)": jax.jit(lambda V, Vb, w, q: V @ w),
      "h = V[:8] w (static slice)": jax.jit(lambda V, Vb, w, q: V[:8] @ w),
      "h = V[:16] w (static slice)": jax.jit(lambda V, Vb, w, q: V[:16] @ w),
      "h = one [8, n] block of a blocked layout": jax.jit(block),
      "h for two vectors, V [w, q]": jax.jit(lambda V, Vb, w, q: V @ jnp.stack([w, q], axis=1)),
      "w − Vᵀh over the whole buffer (h of 16 rows)": jax.jit(
          lambda V, Vb, w, q: w - jnp.where(jnp.arange(rows) <= i, jnp.ones((rows,), V.dtype), 0.0) @ V
      ),
      f"curvax's CGS pass at step {i} (project_out)": jax.jit(
          lambda V, Vb, w, q: orthogonality.project_out(V, w, jnp.int32(i), orthogonality.REORTH_CHUNK)
      ),
      "curvax's Gram of the basis (once per call)": jax.jit(lambda V, Vb, w, q: orthogonality.gram_deviation(V, rows)),
  }


def main(argv=None) -> None:
  """Measures every layout at the given size and prints the table and the pass's floor."""
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--n", type=int, default=19_600_000, help="basis columns (19.6M: the `medium` bench model)")
  p.add_argument("--rows", type=int, default=31, help="basis rows (num_steps + 1)")
  p.add_argument("--repeats", type=int, default=5)
  a = p.parse_args(argv)
  keys = jax.random.split(jax.random.key(0), 3)
  V = jax.random.normal(keys[0], (a.rows, a.n), jnp.float32)
  w, q = (jax.random.normal(k, (a.n,), jnp.float32) for k in keys[1:])
  Vb = V[: a.rows // 8 * 8].reshape(-1, 8, a.n)
  i = a.rows // 2
  fns = layouts(a.rows, i)
  for f in fns.values():
    jax.block_until_ready(f(V, Vb, w, q))
  times = {k: [] for k in fns}
  for _ in range(a.repeats):
    for k, f in fns.items():
      t0 = time.perf_counter()
      jax.block_until_ready(f(V, Vb, w, q))
      times[k].append(time.perf_counter() - t0)
  print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__}, {jax.devices()[0].platform}")
  print(f"basis [{a.rows}, {a.n}] float32 ({a.rows * a.n * 4 / 1e9:.2f} GB), median of {a.repeats}")
  med = {k: float(np.median(v)) for k, v in times.items()}
  for k, t in med.items():
    print(f"  {k:<48} {t * 1e3:9.1f} ms")
  bandwidth = a.rows * a.n * 4 / med["stream read of the buffer (jnp.sum)"]
  floor = 2 * (i + 1) * a.n * 4 / bandwidth
  print(f"stream bandwidth {bandwidth / 1e9:.1f} GB/s; a CGS pass at step {i} reads {i + 1} rows twice: floor "
        f"{floor * 1e3:.1f} ms, curvax's pass {med[list(fns)[-2]] * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
  main()
