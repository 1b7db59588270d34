"""curvax.top_eigenvalues from a given start vector (`v0=`, `curvax.warm_start`): a nearby operator's Ritz vector
restarts Lanczos closer to the answer, with the same certificate, compiled once like a random start."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from tests.conftest import count_compiles


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _matrix(seed, n=200):
  rng = np.random.default_rng(seed)
  q, _ = np.linalg.qr(rng.normal(size=(n, n)))
  lam = np.linspace(-1.0, 10.0, n)
  lam[-1] = 12.0
  return (q * lam) @ q.T, rng


def test_a_warm_start_from_a_nearby_ritz_vector_certifies_the_same_eigenvalue_in_fewer_steps():
  a, rng = _matrix(0)
  first = curvax.top_eigenvalues(curvax.matrix_operator(jnp.asarray(a)), 1, num_steps=80, key=jax.random.key(0),
                                 tol=1e-8, return_basis=True)  # fmt: skip
  y = curvax.ritz_vector(curvax.matrix_operator(jnp.asarray(a)), first)
  b = a + 1e-3 * np.diag(rng.normal(size=a.shape[0]))  # the next checkpoint: a small move
  op = curvax.matrix_operator(jnp.asarray(b))
  want = np.linalg.eigvalsh(b)[-1]
  cold = curvax.top_eigenvalues(op, 1, num_steps=80, key=jax.random.key(2), tol=1e-8)
  warm = curvax.top_eigenvalues(op, 1, num_steps=80, v0=curvax.warm_start(y, jax.random.key(1)), tol=1e-8)
  assert abs(float(warm.values[0]) - want) <= float(warm.bounds[0]) + 1e-12
  assert int(warm.lanczos.num_steps_taken) < int(cold.lanczos.num_steps_taken)  # measured 19 vs 27
  v = curvax.warm_start(y, jax.random.key(1))
  assert float(jnp.linalg.norm(v)) == pytest.approx(1.0) and float(v @ curvax.ravel_leaves(y, v.dtype)) > 0.99
  with count_compiles() as compiles:  # another operator and start of the same shapes: nothing compiles
    curvax.top_eigenvalues(curvax.matrix_operator(jnp.asarray(a)), 1, num_steps=80, v0=v, tol=1e-8)
  assert compiles == []
  with pytest.raises(ValueError, match="exactly one of key= .* and v0="):
    curvax.top_eigenvalues(op, 1, num_steps=10, key=jax.random.key(0), v0=v)
  with pytest.raises(ValueError, match="v0 has 3 entries"):
    curvax.top_eigenvalues(op, 1, num_steps=10, v0=jnp.ones(3))
