"""curvax.batch_sharpness (Andreyev & Beneventano 2024's Batch Sharpness) against closed forms on quadratics and
against the dense Hessian of a plain JAX MLP with tuple batches, float64; a second call compiles nothing."""

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from tests import curvax_mlp as mlp
from tests.conftest import count_compiles


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def test_quadratic_batches_give_the_closed_form_rayleigh_quotients():
  """L_b(θ) = ½θᵀA_bθ − c_bᵀθ: g_b = A_bθ − c_b, H_b = A_b, q_b = g_bᵀA_bg_b/g_bᵀg_b."""
  rng = np.random.default_rng(0)
  theta = {"x": jnp.asarray(rng.normal(size=5))}
  batches, q = [], []
  for _ in range(4):
    m = rng.normal(size=(5, 5))
    a, c = m @ m.T + np.eye(5), rng.normal(size=5)
    batches.append((jnp.asarray(a), jnp.asarray(c)))
    g = a @ np.asarray(theta["x"]) - c
    q.append(g @ a @ g / (g @ g))
  loss = lambda t, b: 0.5 * t["x"] @ (b[0] @ t["x"]) - b[1] @ t["x"]
  s = curvax.batch_sharpness(loss, theta, batches)
  np.testing.assert_allclose(s.per_batch, q, rtol=1e-12)
  assert s.value == pytest.approx(np.mean(q), rel=1e-12)
  assert s.std_error == pytest.approx(np.std(q, ddof=1) / 2, rel=1e-10)  # s/√B, B = 4
  w = [1.0, 2.0, 3.0, 4.0]
  weighted = curvax.batch_sharpness(loss, theta, batches, weights=w)
  assert weighted.value == pytest.approx(np.dot(w, q) / 10, rel=1e-12)
  ghg = [qi * np.sum((a @ np.asarray(theta["x"]) - c) ** 2) for qi, (a, c) in zip(q, batches)]
  gg = [np.sum((np.asarray(a) @ np.asarray(theta["x"]) - np.asarray(c)) ** 2) for a, c in batches]
  assert s.ratio_of_means == pytest.approx(np.sum(ghg) / np.sum(gg), rel=1e-10)
  one = curvax.batch_sharpness(loss, theta, batches[0])  # one batch, not a list: its own quotient, no spread
  assert one.value == pytest.approx(q[0], rel=1e-12) and one.std_error == 0.0


def test_mlp_tuple_batches_match_the_dense_hessian_and_a_second_call_compiles_nothing():
  params = mlp.init_params(0)
  batches = [mlp.make_batch(i) for i in range(3)]
  s = curvax.batch_sharpness(mlp.loss_fn, params, batches)
  for b, q in zip(batches, s.per_batch):
    g = np.asarray(jax.flatten_util.ravel_pytree(jax.grad(mlp.loss_fn)(params, b))[0])
    h = mlp.dense_hessian(params, b)
    assert q == pytest.approx(g @ h @ g / (g @ g), rel=1e-10)
  other = [mlp.make_batch(i + 10) for i in range(2)]
  moved = jax.tree.map(lambda x: x + 0.1, params)
  with count_compiles() as compiles:
    curvax.batch_sharpness(mlp.loss_fn, moved, other)
  assert compiles == []


def test_bad_input_is_named():
  loss = lambda t, b: jnp.sum(t["x"] * 0.0) + b  # a constant: zero gradient
  with pytest.raises(ValueError, match=r"batches \[0\] have a zero gradient"):
    curvax.batch_sharpness(loss, {"x": jnp.ones(3)}, [jnp.asarray(1.0)])
  with pytest.raises(ValueError, match="loss_fn must be a callable"):
    curvax.batch_sharpness("loss", {"x": jnp.ones(3)}, [1.0])
  with pytest.raises(ValueError, match="weights"):
    curvax.batch_sharpness(mlp.loss_fn, mlp.init_params(0), [mlp.make_batch(0)], weights=[1.0, 2.0])
