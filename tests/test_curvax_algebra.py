"""Operators compose (`A @ v`, `A + B`, `A - B`, `c * A`, `A / c`, `-A`, `A + lam * identity_like(A)`) with matvecs
equal to the dense sums (float64, to 1e-12), a new coefficient or checkpoint compiles nothing, `to_scipy` gives a
`scipy.sparse.linalg.LinearOperator` whose `eigsh` agrees with `top_eigenvalues`, and results print a few lines."""

import json
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse.linalg

import curvax
from tests import curvax_mlp as mlp
from tests.conftest import count_compiles

TOL = 1e-12


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def ops(x64):
  params, batch = mlp.init_params(0), mlp.make_batch(1)
  h = curvax.hessian(mlp.loss_fn, params, batch)
  g = curvax.ggn(mlp.logits_fn, params, batch)
  return dict(
      params=params, batch=batch, h=h, g=g, H=np.asarray(curvax.dense_matrix(h)), G=np.asarray(curvax.dense_matrix(g))
  )


def _dense(op):
  return np.asarray(curvax.dense_matrix(op))


def test_sums_and_scalings_equal_the_dense_sums(ops):
  h, g, dense_h, dense_g = ops["h"], ops["g"], ops["H"], ops["G"]
  eye = np.eye(h.size)
  cases = {
      "A + B": (h + g, dense_h + dense_g),
      "2.5 A - B / 4": (2.5 * h - g / 4, 2.5 * dense_h - dense_g / 4),
      "-A": (-h, -dense_h),
      "A + lam I": (h + 0.3 * curvax.identity_like(h), dense_h + 0.3 * eye),
      "sum([A, B, A])": (sum([h, g, h]), 2 * dense_h + dense_g),
      "jax scalar (A + B) * c": ((h + g) * jnp.asarray(-1.5), -1.5 * (dense_h + dense_g)),
      "numpy scalar c A": (np.float64(2.0) * h, 2.0 * dense_h),
  }
  for name, (op, ref) in cases.items():
    assert isinstance(op, curvax.LinearCombination), name
    np.testing.assert_allclose(_dense(op), ref, atol=TOL * np.abs(ref).max(), err_msg=name)
  # A block of a sum is the sum's dense sub-block.
  blk = curvax.block(h + g, lambda path: path.startswith("out/"))
  idx = curvax.block_indices(h, lambda path: path.startswith("out/"))
  ref = (dense_h + dense_g)[np.ix_(idx, idx)]
  np.testing.assert_allclose(_dense(blk), ref, atol=TOL * np.abs(ref).max())


def test_matmul_takes_a_pytree_a_flat_vector_or_columns(ops):
  h, dense_h, params = ops["h"], ops["H"], ops["params"]
  rng = np.random.default_rng(0)
  x = rng.standard_normal(h.size)
  flat, unravel = jax.flatten_util.ravel_pytree(params)
  np.testing.assert_allclose(h @ x, dense_h @ x, atol=TOL)
  np.testing.assert_allclose(jax.flatten_util.ravel_pytree(h @ unravel(jnp.asarray(x)))[0], dense_h @ x, atol=TOL)
  cols = rng.standard_normal((h.size, 3))
  np.testing.assert_allclose(h @ cols, dense_h @ cols, atol=TOL)
  with pytest.raises(ValueError, match=f"a flat \\[{h.size}\\] vector"):
    h @ np.ones(h.size + 1)


def test_mismatched_operands_fail_with_one_line(ops):
  h = ops["h"]
  blk = curvax.block(h, lambda path: path.startswith("out/"))
  with pytest.raises(ValueError, match="operators act on different inputs"):
    h + blk
  with pytest.raises(TypeError):
    h * h  # a product of two symmetric operators is not symmetric: not offered
  with pytest.raises(TypeError):
    h + 1.0  # A + λ is ambiguous: A + λ·identity_like(A) says it
  with pytest.raises(TypeError, match="scalar only"):
    h * jnp.ones(2)


def test_a_new_shift_or_checkpoint_compiles_nothing(ops):
  params, batch = ops["params"], ops["batch"]
  values = []
  for i, lam in enumerate((0.1, 0.7)):
    p = jax.tree.map(lambda x: x * (1.0 + 0.1 * i), params)  # another checkpoint
    h = curvax.hessian(mlp.loss_fn, p, batch)
    with count_compiles() as compiles:
      top = curvax.top_eigenvalues(
          h + jnp.asarray(lam) * curvax.identity_like(h), 1, num_steps=20, key=jax.random.key(0)
      )
    ref = np.linalg.eigvalsh(mlp.dense_hessian(p, batch))[-1] + lam
    assert abs(float(top.values[0]) - ref) <= float(top.bounds[0]) + 1e-10
    values.append(len(compiles))
  assert values[0] > 0 and values[1] == 0, values


def test_scipy_eigsh_agrees_with_top_eigenvalues(ops):
  h, g = ops["h"], ops["g"]
  for op in (h, h + 0.5 * g):
    lo = curvax.to_scipy(op)
    assert isinstance(lo, scipy.sparse.linalg.LinearOperator) and lo.shape == (op.size, op.size)
    assert lo.dtype == np.float64
    ref = scipy.sparse.linalg.eigsh(lo, k=1, which="LA", tol=1e-12)[0][0]
    top = curvax.top_eigenvalues(op, 1, num_steps=op.size, key=jax.random.key(0))
    assert abs(float(top.values[0]) - ref) <= float(top.bounds[0]) + 1e-10 * abs(ref)
    np.testing.assert_allclose(lo.matmat(np.eye(op.size)), _dense(op), atol=TOL)


def test_results_print_a_few_lines_not_the_arrays(ops):
  h = ops["h"]
  key = jax.random.key(0)
  top = curvax.top_eigenvalues(h, 8, num_steps=25, key=key, return_basis=True)
  results = {
      "ExtremeEigenvalues(top k=8, 25 Lanczos steps = 25 products": top,
      "LanczosResult(25 of 25 steps = 25 products": top.lanczos,
      "SpectralDensity(3 probes x 10 Lanczos steps": curvax.spectral_density(h, num_steps=10, num_probes=3, key=key),
      "TraceEstimate(hutchinson: ": curvax.trace(h, num_probes=4, key=key),
      f"DiagonalEstimate(n={h.size} over 4 leaves, 4 products": curvax.diagonal(h, num_probes=4, key=key),
      "BatchSharpness(value=": curvax.batch_sharpness(mlp.loss_fn, ops["params"], [ops["batch"]] * 2),
  }
  for head, result in results.items():
    text = repr(result)
    assert text.startswith(head), text
    assert len(text.splitlines()) <= 4 and len(text) < 500, text
  text = repr(top)
  assert f"values: [{float(top.values[0]):.6g}, " in text and "... (8 in all, shape [8])" in text
  assert "bounds: [" in text and "separated=True" in text


DOC_CHECK = """
import json
from jax.flatten_util import ravel_pytree
flat, unravel = ravel_pytree(params)
dense = np.asarray(jax.hessian(lambda f: loss_fn(unravel(f), batch))(flat), np.float64)
eig_max = float(np.linalg.eigvalsh((dense + dense.T) / 2)[-1])
combo = curvax.top_eigenvalues(2.0 * H - 0.5 * damped, 1, num_steps=40, key=jax.random.key(5))
print("CHECK2 " + json.dumps(dict(
    shift=np.asarray(damped @ v - H @ v).tolist(), scipy=float(lam_scipy), eig_max=eig_max, top=float(top.values[0]),
    top_bound=float(top.bounds[0]), combo=float(combo.values[0]), combo_bound=float(combo.bounds[0]))))
"""


@pytest.mark.slow
def test_the_docs_composition_example_runs_and_agrees_with_dense(tmp_path):
  """docs/curvax.md's second python block, run after the first in a fresh process (its own compilation cache)."""
  from tests.test_curvax_docs import REPO, TIMEOUT_S, _env  # pylint: disable=import-outside-toplevel

  blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "curvax.md").read_text(), re.S)
  script = tmp_path / "example.py"
  script.write_text("import numpy as np\n" + blocks[0] + blocks[1] + DOC_CHECK)
  env = _env(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
  proc = subprocess.run(
      [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  r = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("CHECK2 "))[len("CHECK2 ") :])
  np.testing.assert_allclose(r["shift"], 1e-3, rtol=1e-3)  # float32: (H + λI)v − Hv = λv to rounding
  scale = abs(r["eig_max"])
  assert abs(r["scipy"] - r["eig_max"]) <= 1e-5 * scale, r
  assert abs(r["top"] - r["scipy"]) <= r["top_bound"] + 1e-5 * scale, r
  assert abs(r["combo"] - (1.5 * r["eig_max"] - 0.5e-3)) <= r["combo_bound"] + 1e-5 * scale, r
  assert "ExtremeEigenvalues(top k=1" in proc.stdout
