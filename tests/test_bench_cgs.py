"""bench/cgs_layouts.py: every layout it times computes what its row says (against numpy), and a run at a toy size
prints every row and the floor of the pass."""

import os
import sys

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import cgs_layouts  # noqa: E402


def test_each_layout_computes_what_its_row_names():
  rows, n, i = 17, 40, 8
  rng = np.random.default_rng(0)
  V, w, q = rng.standard_normal((rows, n)), rng.standard_normal(n), rng.standard_normal(n)
  V[i + 1 :] = 0.0  # rows beyond i unfilled, as in a Lanczos basis at step i
  V, w, q = (np.asarray(x, np.float32) for x in (V, w, q))
  Vb = V[: rows // 8 * 8].reshape(-1, 8, n)
  got = {k: np.asarray(f(*map(jnp.asarray, (V, Vb, w, q)))) for k, f in cgs_layouts.layouts(rows, i).items()}
  want = [
      V.sum(),
      V @ w,
      V[:8] @ w,
      V[:16] @ w,
      Vb[i // 8] @ w,
      V @ np.stack([w, q], 1),
      w - np.where(np.arange(rows) <= i, 1.0, 0.0) @ V,
      w - V[: i + 1].T @ (V[: i + 1] @ w),  # one classical Gram-Schmidt pass against q_0..q_i
      (V @ V.T - np.eye(rows)) * np.outer(np.arange(rows) < rows, np.arange(rows) < rows),
  ]
  assert len(got) == len(want)
  for (name, g), x in zip(got.items(), want):
    np.testing.assert_allclose(g, x, rtol=2e-4, atol=2e-4, err_msg=name)


def test_a_toy_run_prints_every_row_and_the_floor(capsys):
  cgs_layouts.main(["--n", "4096", "--rows", "9", "--repeats", "1"])
  out = capsys.readouterr().out
  rows = [line for line in out.splitlines() if line.startswith("  ") and line.endswith(" ms")]
  assert len(rows) == len(cgs_layouts.layouts(9, 4)) and "floor" in out.splitlines()[-1] and "GB/s" in out
