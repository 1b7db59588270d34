"""A loss written as a fresh closure (a lambda a helper makes on every call) compiles once and is not kept alive:
`curvax.closures` keys the programs on the closure's code and captured values, with captured arrays as traced
leaves. Compilations are counted with JAX's backend-compile event (`tests.conftest.count_compiles`); the numbers
are checked against `numpy.linalg.eigvalsh` of the dense Hessian (float64)."""

import dataclasses
import functools
import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from curvax.closures import ClosureFn, as_pytree_fn
from tests import curvax_mlp as mlp
from tests.conftest import count_compiles


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def problem(x64):
  params, batch = mlp.init_params(0), mlp.make_batch(1)
  return params, batch, float(np.linalg.eigvalsh(mlp.dense_hessian(params, batch))[-1])


def _scaled_loss(scale, config):
  """What a user's helper does: a new closure per call, over an array and a hashable config."""
  return lambda p, b: scale * mlp.loss_fn(p, b) * config["weight"]


def _top(loss, params, batch, seed=0):
  op = curvax.hessian(loss, params, batch)
  return float(curvax.top_eigenvalues(op, 1, num_steps=24, key=jax.random.key(seed)).values[0])


def test_a_fresh_closure_per_call_compiles_once_and_frees_its_captures(problem):
  params, batch, lam = problem
  counts, refs = [], []
  for i, scale in enumerate((1.0, 2.0, 3.0)):
    captured = jnp.asarray(scale)
    loss = _scaled_loss(captured, {"weight": 0.5})
    refs.append((weakref.ref(loss), weakref.ref(captured)))
    with count_compiles() as compiles:
      top = _top(loss, params, batch, seed=i)
    counts.append(len(compiles))
    np.testing.assert_allclose(top, 0.5 * scale * lam, rtol=1e-9)  # the captured array is read, not a stale constant
    del loss, captured
  gc.collect()
  assert counts[0] > 0 and counts[1:] == [0, 0], counts
  assert all(f() is None and a() is None for f, a in refs), "a closure or its captured array was kept alive"


def test_a_changed_captured_value_is_a_new_program(problem):
  """A captured non-array value keys the program by value: changing it retraces (and gives its own numbers)."""
  params, batch, lam = problem
  _top(_scaled_loss(jnp.asarray(1.0), {"weight": 0.5}), params, batch)
  with count_compiles() as compiles:
    top = _top(_scaled_loss(jnp.asarray(1.0), {"weight": 0.25}), params, batch)
  assert len(compiles) > 0
  np.testing.assert_allclose(top, 0.25 * lam, rtol=1e-9)


def _weighted(weight, p, b):
  return weight * mlp.loss_fn(p, b)


def test_partials_and_nested_closures_compile_once(problem):
  params, batch, lam = problem

  def nested(weight):
    inner = functools.partial(_weighted, weight)
    return lambda p, b: inner(p, b) + 0.0 * jnp.sum(p["out"]["b"])

  for make in (lambda w: functools.partial(_weighted, jnp.asarray(w)), nested):
    _top(make(2.0), params, batch)
    with count_compiles() as compiles:
      top = _top(make(3.0 if make is nested else 2.0), params, batch)
    if make is not nested:  # a partial over an array: the same program
      assert len(compiles) == 0
    np.testing.assert_allclose(top, (3.0 if make is nested else 2.0) * lam, rtol=1e-9)


@dataclasses.dataclass
class _MutableConfig:  # eq=True without frozen: unhashable, so it cannot key a program by value
  weight: float


def test_an_unhashable_capture_falls_back_to_the_closure_identity(problem):
  params, batch, lam = problem
  config = _MutableConfig(2.0)
  loss = lambda p, b: config.weight * mlp.loss_fn(p, b)
  assert isinstance(as_pytree_fn(loss), jax.tree_util.Partial)
  np.testing.assert_allclose(_top(loss, params, batch), 2.0 * lam, rtol=1e-9)
  assert isinstance(as_pytree_fn(mlp.loss_fn), ClosureFn)


def test_a_fresh_matvec_closure_is_data_for_as_operator():
  a = np.diag(np.arange(1.0, 9.0))
  counts = []
  for shift in (0.0, 1.0):
    mat = jnp.asarray(a + shift * np.eye(8))
    op = curvax.as_operator(lambda v: mat @ v, jnp.zeros(8))
    with count_compiles() as compiles:
      top = curvax.top_eigenvalues(op, 1, num_steps=8, key=jax.random.key(0))
    counts.append(len(compiles))
    np.testing.assert_allclose(float(top.values[0]), 8.0 + shift, rtol=1e-9)
  assert counts[1] == 0, counts
