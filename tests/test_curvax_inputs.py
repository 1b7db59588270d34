"""What a user meets first: each bad input fails before any compute with one line naming the bad thing and the
valid range or the way out (leaf paths of non-float parameters, a non-scalar loss, batch leaves of different
lengths, a `[x, y]` list, num_steps and k out of range), `batches=` is the explicit form of a list of batches, and a
non-finite loss or product stops every routine with one FloatingPointError naming what was not finite."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from tests import curvax_mlp as mlp


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def setup(x64):
  return mlp.init_params(0), mlp.make_batch(1), mlp.make_batch(2, rows=4)


def _raises_one_line(exc, pattern, fn, *args, **kwargs):
  with pytest.raises(exc, match=pattern) as info:
    fn(*args, **kwargs)
  assert "\n" not in str(info.value), str(info.value)
  return str(info.value)


def test_non_float_params_are_named_by_path_with_the_way_out(setup):
  params, batch, _ = setup
  state = {"layer": dict(params["out"]), "rngs": {"default": {"count": jnp.zeros((), jnp.uint32)}}, "act": jnp.tanh}
  msg = _raises_one_line(ValueError, "real floating arrays", curvax.hessian, mlp.loss_fn, state, batch)
  assert "'rngs/default/count' (uint32[])" in msg and "'act' (" in msg and "'layer/w'" not in msg
  assert "nnx.split(model, nnx.Param" in msg and "eqx.partition(model, eqx.is_inexact_array)" in msg
  _raises_one_line(ValueError, "params has no array leaves", curvax.hessian, mlp.loss_fn, {"w": None}, batch)


def test_a_non_scalar_loss_is_refused_before_compute(setup):
  params, batch, _ = setup
  expected = re.escape("loss_fn(params, batch) must return a real floating scalar, got float64[6]")
  _raises_one_line(ValueError, expected, curvax.hessian, mlp.per_example_loss_fn, params, batch)
  # linearize=False traces the loss at the first product (building it traces nothing): the error comes there.
  lazy = curvax.hessian(mlp.per_example_loss_fn, params, batch, linearize=False)
  _raises_one_line(ValueError, expected, curvax.top_eigenvalues, lazy, 1, num_steps=3, key=jax.random.key(0))
  _raises_one_line(ValueError, expected, curvax.batch_sharpness, mlp.per_example_loss_fn, params, [batch])
  with_aux = lambda p, b: (mlp.loss_fn(p, b), 0.0)
  _raises_one_line(ValueError, "got tuple.*\\[0\\]", curvax.hessian, with_aux, params, batch)
  ce_per_row = lambda z, b: -jnp.take_along_axis(jax.nn.log_softmax(z), b[1][:, None], axis=1)[:, 0]
  _raises_one_line(
      ValueError,
      re.escape("loss(outputs, batch) must return"),
      curvax.ggn,
      mlp.logits_fn,
      params,
      batch,
      loss=ce_per_row,
  )


def test_batch_leaves_of_different_lengths_are_named(setup):
  params, (x, y), _ = setup
  msg = _raises_one_line(
      ValueError, "batch 0: its array leaves disagree", curvax.hessian, mlp.loss_fn, params, (x, y[:4])
  )
  assert "'0' has 6, '1' has 4" in msg


@pytest.mark.slow
def test_batches_keyword_and_the_list_of_two_arrays(setup):
  params, b1, b2 = setup
  explicit = curvax.dense_matrix(curvax.hessian(mlp.loss_fn, params, batches=[b1, b2], weights=[3.0, 1.0]))
  positional = curvax.dense_matrix(curvax.hessian(mlp.loss_fn, params, [b1, b2], weights=[3.0, 1.0]))
  np.testing.assert_array_equal(explicit, positional)  # a positional list is, as before, several batches
  reference = 0.75 * mlp.dense_hessian(params, b1) + 0.25 * mlp.dense_hessian(params, b2)
  np.testing.assert_allclose(explicit, reference, rtol=1e-10, atol=1e-12)
  one = curvax.dense_matrix(curvax.hessian(mlp.loss_fn, params, batches=(b1,)))
  np.testing.assert_allclose(one, mlp.dense_hessian(params, b1), rtol=1e-10, atol=1e-12)
  msg = _raises_one_line(ValueError, "read as 2 batches", curvax.hessian, mlp.loss_fn, params, list(b1))
  assert "float64[] vs int32[]" not in msg and "pass a tuple (x, y)" in msg and "batches=[...]" in msg
  _raises_one_line(ValueError, "not both", curvax.hessian, mlp.loss_fn, params, b1, batches=[b1])
  _raises_one_line(ValueError, "no batch given", curvax.ggn, mlp.logits_fn, params)
  _raises_one_line(
      ValueError, "non-empty list of batches", curvax.empirical_fisher, mlp.per_example_loss_fn, params, batches=[]
  )


def test_num_steps_and_k_out_of_range_name_the_valid_range(setup):
  params, batch, _ = setup
  op = curvax.hessian(mlp.loss_fn, params, batch)
  n = op.size
  key = jax.random.key(0)
  valid_steps = (
      re.escape(f"num_steps={n + 1} exceeds the dimension n={n} of the operator") + f".*valid: 1 ≤ num_steps ≤ {n}"
  )
  _raises_one_line(ValueError, valid_steps, curvax.top_eigenvalues, op, 1, num_steps=n + 1, key=key)
  _raises_one_line(ValueError, valid_steps, curvax.lanczos, op, num_steps=n + 1, key=key)
  _raises_one_line(ValueError, valid_steps, curvax.spectral_density, op, num_steps=n + 1, num_probes=2, key=key)
  _raises_one_line(
      ValueError, "k=6 exceeds num_steps=5.*valid: 1 ≤ k ≤ 5", curvax.bottom_eigenvalues, op, 6, num_steps=5, key=key
  )


def _nan_loss(p, b):
  return mlp.loss_fn(p, b) + jnp.log(-jnp.sum(p["out"]["b"] ** 2) - 1.0)  # NaN, with a finite derivative


def _nan_everywhere(p, b):
  return mlp.loss_fn(p, b) * jnp.sqrt(-1.0 - jnp.sum(p["out"]["b"] ** 2))  # NaN, and so are its derivatives


ROUTINES = {
    "lanczos": lambda op: curvax.lanczos(op, num_steps=5, key=jax.random.key(0)),
    "top_eigenvalues": lambda op: curvax.top_eigenvalues(op, 1, num_steps=5, key=jax.random.key(0)),
    "bottom_eigenvalues": lambda op: curvax.bottom_eigenvalues(op, 1, num_steps=5, key=jax.random.key(0)),
    "spectral_density": lambda op: curvax.spectral_density(op, num_steps=5, num_probes=2, key=jax.random.key(0)),
    "trace": lambda op: curvax.trace(op, num_probes=4, key=jax.random.key(0)),
    "diagonal": lambda op: curvax.diagonal(op, num_probes=4, key=jax.random.key(0)),
}


@pytest.mark.parametrize("routine", sorted(ROUTINES))
@pytest.mark.slow
def test_a_nan_loss_stops_every_routine_naming_the_loss(setup, routine):
  params, batch, _ = setup
  for loss, linearize in ((_nan_loss, True), (_nan_everywhere, True), (_nan_everywhere, False)):
    op = curvax.hessian(loss, params, [batch, batch], linearize=linearize)
    msg = _raises_one_line(FloatingPointError, f"^{routine}: ", ROUTINES[routine], op)
    assert "loss_fn(params, batch) is nan for batch(es) [0, 1]" in msg, msg
  # The same routine on a finite loss returns finite numbers (the check costs one transfer, no error).
  out = ROUTINES[routine](curvax.hessian(mlp.loss_fn, params, batch))
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(out) if np.asarray(x).dtype.kind == "f")


def test_a_non_finite_product_names_its_step_and_source():
  a = np.diag(np.arange(1.0, 9.0))
  a[7, 7] = np.inf
  msg = _raises_one_line(
      FloatingPointError,
      "alphas has .* from Lanczos step 0",
      curvax.top_eigenvalues,
      curvax.matrix_operator(a),
      1,
      num_steps=4,
      key=jax.random.key(0),
  )
  assert "the matrix has 1 non-finite entries" in msg
  ggn = curvax.ggn(lambda p, b: mlp.logits_fn(p, b) * jnp.nan, mlp.init_params(0), mlp.make_batch(1))
  msg = _raises_one_line(FloatingPointError, "^trace: ", ROUTINES["trace"], ggn)
  assert "the model's outputs" in msg and "batch(es) [0]" in msg


def test_batch_sharpness_of_a_nan_loss_names_the_batch(setup):
  params, b1, b2 = setup
  loss = lambda p, b: mlp.loss_fn(p, b) * jnp.where(b[0].shape[0] == 4, jnp.nan, 1.0)
  _raises_one_line(
      FloatingPointError, "not finite for batch\\(es\\) \\[1\\]", curvax.batch_sharpness, loss, params, [b1, b2]
  )


@pytest.mark.slow
def test_an_nnx_state_names_its_rng_leaves_and_the_split_state_works():
  """A real NNX model: the unsplit State is refused naming its RNG count and key; split with nnx.Param, the loss
  (a closure over the GraphDef and the rest of the State) gives the closed-form top eigenvalue of Σ_rows ‖Wx + b‖²
  at x = 1 (3 inputs, 4 rows): 2·4·(3 + 1) = 32."""
  nnx = pytest.importorskip("flax.nnx")

  class Model(nnx.Module):

    def __init__(self):
      self.lin = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
      self.drop = nnx.Dropout(0.1, rngs=nnx.Rngs(1))

    def __call__(self, x):
      return self.drop(self.lin(x), deterministic=True)

  model, x = Model(), jnp.ones((4, 3))
  graphdef, state = nnx.split(model)
  unsplit = lambda s, b: jnp.sum(nnx.merge(graphdef, s)(b) ** 2)
  msg = _raises_one_line(ValueError, "real floating arrays", curvax.hessian, unsplit, state, x)
  assert "'drop/rngs/count/value' (uint32[])" in msg and "'drop/rngs/key/value' (key<fry>[])" in msg
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  loss = lambda p, b: jnp.sum(nnx.merge(graphdef, p, rest)(b) ** 2)
  top = curvax.top_eigenvalues(curvax.hessian(loss, params, x), 1, num_steps=8, key=jax.random.key(0))
  np.testing.assert_allclose(float(top.values[0]), 32.0, rtol=1e-5)  # float32 parameters
