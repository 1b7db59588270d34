"""curvax's operators on a plain JAX MLP classifier with tuple batches (x, y), labels including 0, float64: the
Hessian, the weighted average over batches, blocks, the GGN for both named losses and a callable loss, and the
empirical Fisher, each against its dense reference (jax.hessian, Jᵀ H_out J, Σ g gᵀ / N) to 1e-10."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import curvax
from tests import curvax_mlp as mlp

TOL = 1e-10


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def setup(x64):
  params = mlp.init_params(0)
  b1, b2 = mlp.make_batch(1), mlp.make_batch(2, rows=4)
  return dict(params=params, b1=b1, b2=b2, h1=mlp.dense_hessian(params, b1), h2=mlp.dense_hessian(params, b2))


def _rel(a, b):
  return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def test_hessian_of_a_tuple_batch_with_label_zero_equals_jax_hessian(setup):
  s = setup
  op = curvax.hessian(mlp.loss_fn, s["params"], s["b1"])
  n = ravel_pytree(s["params"])[0].size
  assert op.size == n and op.dtype == jnp.float64
  assert _rel(mlp.dense(op, s["params"]), s["h1"]) < TOL
  assert _rel(mlp.dense(curvax.hessian(mlp.loss_fn, s["params"], s["b1"], linearize=False), s["params"]), s["h1"]) < TOL
  np.testing.assert_allclose(curvax.dense_matrix(op), s["h1"], atol=TOL * np.abs(s["h1"]).max())


def test_a_list_of_batches_is_their_weighted_average(setup):
  s = setup
  equal = curvax.hessian(mlp.loss_fn, s["params"], [s["b1"], s["b2"]])
  assert _rel(mlp.dense(equal, s["params"]), (s["h1"] + s["h2"]) / 2) < TOL
  weighted = curvax.hessian(mlp.loss_fn, s["params"], [s["b1"], s["b2"]], weights=[3.0, 1.0])
  assert _rel(mlp.dense(weighted, s["params"]), 0.75 * s["h1"] + 0.25 * s["h2"]) < TOL


def test_block_by_path_and_by_boolean_pytree_is_the_dense_sub_block(setup):
  s = setup
  op = curvax.hessian(mlp.loss_fn, s["params"], s["b1"])
  assert curvax.leaf_paths(s["params"]) == ["hidden/b", "hidden/w", "out/b", "out/w"]
  by_path = curvax.block(op, lambda path: path.startswith("out/"))
  mask = {"hidden": {"w": False, "b": True}, "out": {"w": True, "b": False}}
  by_mask = curvax.block(op, mask)
  for blk, select in ((by_path, lambda path: path.startswith("out/")), (by_mask, mask)):
    idx = curvax.block_indices(op, select)
    example = blk.spec.zeros()
    assert blk.size == idx.size
    assert _rel(mlp.dense(blk, example), s["h1"][np.ix_(idx, idx)]) < TOL
  assert sorted(by_mask.spec.zeros()) == ["hidden/b", "out/w"]
  with pytest.raises(ValueError, match="matches no leaf; the leaf paths are"):
    curvax.block(op, lambda path: path == "nope")
  with pytest.raises(ValueError, match="pytree of booleans"):
    curvax.block(op, {"hidden": True})


def _dense_ggn(fn, params, batch, h_out_per_row):
  jac = mlp.dense_jacobian(fn, params, batch)  # [rows, C, n]
  return sum(jac[i].T @ h_out_per_row(i) @ jac[i] for i in range(jac.shape[0]))


def test_ggn_softmax_cross_entropy_is_dense_jt_h_j(setup):
  s = setup
  params, batch = s["params"], s["b1"]
  p = np.asarray(jax.nn.softmax(mlp.logits_fn(params, batch)))
  rows = p.shape[0]
  ref = _dense_ggn(mlp.logits_fn, params, batch, lambda i: (np.diag(p[i]) - np.outer(p[i], p[i])) / rows)
  op = curvax.ggn(mlp.logits_fn, params, batch, loss="softmax_cross_entropy")
  g = mlp.dense(op, params)
  assert _rel(g, ref) < TOL
  assert np.linalg.eigvalsh(g).min() >= -TOL * np.abs(g).max()  # PSD
  # The callable fallback (JVP of the loss's gradient in the outputs) gives the same matrix.
  ce = lambda z, b: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(z), b[1][:, None], axis=1))
  assert _rel(mlp.dense(curvax.ggn(mlp.logits_fn, params, batch, loss=ce), params), ref) < TOL
  # Position weights: only rows with weight count, normalized by their sum.
  w = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0])
  ref_w = _dense_ggn(mlp.logits_fn, params, batch, lambda i: w[i] * (np.diag(p[i]) - np.outer(p[i], p[i])) / w.sum())
  weighted = curvax.ggn(mlp.logits_fn, params, batch, output_weights=lambda b: jnp.asarray(w))
  assert _rel(mlp.dense(weighted, params), ref_w) < TOL


def test_ggn_mse_is_dense_jt_h_j_and_the_hessian_of_a_linear_model(setup):
  s = setup
  params = s["params"]
  x, _ = s["b1"]
  y = jnp.asarray(np.random.default_rng(7).standard_normal((x.shape[0], mlp.CLASSES)))
  batch = (x, y)
  rows, c = y.shape
  ref = _dense_ggn(mlp.logits_fn, params, batch, lambda i: 2.0 * np.eye(c) / (rows * c))
  op = curvax.ggn(mlp.logits_fn, params, batch, loss="mse")
  assert _rel(mlp.dense(op, params), ref) < TOL
  # For a model linear in its parameters the GGN of the MSE is its Hessian.
  lin_params = params["out"]
  lin_fn = lambda q, b: b[0] @ q["w"][: mlp.IN] + q["b"]
  mse = lambda q, b: jnp.mean((lin_fn(q, b) - b[1]) ** 2)
  hess = mlp.dense(curvax.hessian(mse, lin_params, batch), lin_params)
  assert _rel(mlp.dense(curvax.ggn(lin_fn, lin_params, batch, loss="mse"), lin_params), hess) < TOL


def test_empirical_fisher_is_the_mean_outer_product_of_per_example_gradients(setup):
  s = setup
  params = s["params"]
  g = mlp.dense_jacobian(mlp.per_example_loss_fn, params, s["b1"])  # [N, n]
  ref = g.T @ g / g.shape[0]
  op = curvax.empirical_fisher(mlp.per_example_loss_fn, params, s["b1"])
  assert _rel(mlp.dense(op, params), ref) < TOL
  g2 = mlp.dense_jacobian(mlp.per_example_loss_fn, params, s["b2"])
  both = curvax.empirical_fisher(mlp.per_example_loss_fn, params, [s["b1"], s["b2"]], weights=[1.0, 3.0])
  assert _rel(mlp.dense(both, params), 0.25 * ref + 0.75 * g2.T @ g2 / g2.shape[0]) < TOL


def test_matrix_operator_and_as_operator():
  a = np.random.default_rng(0).standard_normal((5, 5))
  a = a + a.T
  op = curvax.matrix_operator(a)
  assert op.size == 5 and op.dtype == jnp.float64
  np.testing.assert_allclose(curvax.dense_matrix(op), a, atol=1e-14)
  wrapped = curvax.as_operator(lambda v: {"x": jnp.asarray(a) @ v["x"]}, {"x": jnp.zeros(5)})
  np.testing.assert_allclose(wrapped({"x": jnp.ones(5)})["x"], a @ np.ones(5), atol=1e-14)
  with pytest.raises(ValueError, match="carries no shapes: pass example="):
    curvax.as_operator(lambda v: v)
  with pytest.raises(ValueError, match="square"):
    curvax.matrix_operator(np.ones((2, 3)))


def test_bad_inputs_fail_before_compute(setup):
  s = setup
  p, b = s["params"], s["b1"]
  with pytest.raises(ValueError, match="empty list of batches"):
    curvax.hessian(mlp.loss_fn, p, [])
  with pytest.raises(ValueError, match="one entry per batch \\(2\\)"):
    curvax.hessian(mlp.loss_fn, p, [b, b], weights=[1.0])
  with pytest.raises(ValueError, match="non-negative with a positive sum"):
    curvax.hessian(mlp.loss_fn, p, [b, b], weights=[1.0, -1.0])
  with pytest.raises(ValueError, match="loss_fn must be a callable"):
    curvax.hessian("loss", p, b)
  with pytest.raises(ValueError, match="real floating arrays"):
    curvax.hessian(mlp.loss_fn, {"w": jnp.ones(3, jnp.int32)}, b)
  with pytest.raises(ValueError, match="is not a named loss; valid: \\['softmax_cross_entropy', 'mse'\\]"):
    curvax.ggn(mlp.logits_fn, p, b, loss="hinge")
  with pytest.raises(ValueError, match="one weight per output position"):
    curvax.ggn(mlp.logits_fn, p, b, output_weights=lambda b: jnp.ones(3))
  with pytest.raises(ValueError, match="per-example losses"):
    curvax.empirical_fisher(mlp.loss_fn, p, b)
