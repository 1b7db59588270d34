"""The stop rules of `curvax.top_eigenvalues` / `bottom_eigenvalues` (curvax/spectrum.py), here the relative change
`bound="change"`: on matrices of known spectrum it stops at the first product where the change is ≤ tol (checked
against the Ritz values of the leading blocks of T computed by numpy), its values are plain Lanczos's at that step,
and its certified bounds, still reported, contain the true eigenvalues."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax

N = 160


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _matrix(dtype, seed=0):
  """A gapped top (8, 12, 20) and bottom (−9, −6) above a bulk in [−4, 4], multiples of 1/64 (exact in float32)."""
  base = np.linspace(-4.0, 4.0, N)
  base[:2], base[-3:] = [-9.0, -6.0], [8.0, 12.0, 20.0]
  u = np.linalg.qr(np.random.default_rng(seed).standard_normal((N, N)))[0]
  a = (u * (np.round(base * 64) / 64)) @ u.T
  a = ((a + a.T) / 2).astype(dtype)
  return curvax.matrix_operator(jnp.asarray(a)), np.linalg.eigvalsh(a.astype(np.float64))


def _ritz_by_step(lanczos_result, largest):
  """The extreme Ritz value of the leading j×j block of T for j = 1..k (numpy, float64): independent of curvax's."""
  k = int(lanczos_result.num_steps_taken)
  a = np.asarray(lanczos_result.alphas, np.float64)[:k]
  b = np.asarray(lanczos_result.betas, np.float64)[: k - 1]
  out = []
  for j in range(1, k + 1):
    values = np.linalg.eigvalsh(np.diag(a[:j]) + np.diag(b[: j - 1], 1) + np.diag(b[: j - 1], -1))
    out.append(values[-1] if largest else values[0])
  return np.array(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("largest", [True, False])
def test_change_stops_at_the_first_product_within_tol_with_a_true_certificate(dtype, largest):
  op, true = _matrix(dtype)
  fn = curvax.top_eigenvalues if largest else curvax.bottom_eigenvalues
  tol, steps = 1e-4, 60
  res = fn(op, 1, num_steps=steps, key=jax.random.key(1), tol=tol, bound="change")
  k = int(res.lanczos.num_steps_taken)
  assert bool(res.lanczos.converged) and 3 <= k < steps
  # Plain Lanczos from the same start, run to the end, gives T; the rule holds first at step k.
  plain = fn(op, 1, num_steps=steps, key=jax.random.key(1))
  theta = _ritz_by_step(plain.lanczos, largest)
  change = np.abs(np.diff(theta)) / np.abs(theta[1:])  # change[j − 2]: between steps j − 1 and j
  assert np.argmax(change <= tol) + 2 == k, (k, change[: k + 1])
  # The same value as plain Lanczos stopped at k products, to rounding.
  np.testing.assert_allclose(float(res.values[0]), theta[k - 1], rtol=50 * np.finfo(dtype).eps)
  # Its certified bound is still reported and contains the true eigenvalue (20 on top, −9 at the bottom).
  want = true[-1] if largest else true[0]
  np.testing.assert_allclose(want, 20.0 if largest else -9.0, rtol=1e-5)  # the matrix rounded to dtype
  assert abs(float(res.values[0]) - want) <= float(res.bounds[0]) < 1e3 * tol * abs(want)


def test_change_needs_fewer_products_than_the_residual_bound_at_the_same_tol():
  """Once a Ritz value has converged its change decays like r²/gap: the change rule stops before the residual bound
  reaches tol, and here its actual error is still below tol."""
  op, true = _matrix(np.float64)
  tol = 1e-6
  by = {
      b: curvax.top_eigenvalues(op, 1, num_steps=60, key=jax.random.key(2), tol=tol, bound=b)
      for b in ("change", "residual")
  }
  steps = {b: int(r.lanczos.num_steps_taken) for b, r in by.items()}
  assert steps["change"] < steps["residual"] < 60, steps
  assert abs(float(by["change"].values[0]) - true[-1]) <= tol * true[-1]


def test_change_with_thick_restart_and_several_values():
  op, true = _matrix(np.float64)
  res = curvax.top_eigenvalues(op, 2, num_steps=120, key=jax.random.key(1), tol=1e-8, bound="change", max_vectors=8)
  assert bool(res.lanczos.converged) and int(res.lanczos.num_steps_taken) < 120
  np.testing.assert_array_less(np.abs(np.asarray(res.values) - true[::-1][:2]), np.asarray(res.bounds))


def test_change_is_refused_where_it_cannot_run():
  op, _ = _matrix(np.float64)
  with pytest.raises(ValueError, match="bound='change' needs reorthogonalize='full', got 'partial'"):
    curvax.top_eigenvalues(
        op, 1, num_steps=20, key=jax.random.key(1), tol=1e-3, bound="change", reorthogonalize="partial"
    )
  with pytest.raises(ValueError, match=r"valid choices: \['residual', 'gap', 'change'\]"):
    curvax.top_eigenvalues(op, 1, num_steps=20, key=jax.random.key(1), tol=1e-3, bound="relative")
  # `lanczos`'s own stop takes only the certified bounds (its loop tests them; the change rule is spectrum's).
  with pytest.raises(ValueError, match="stop="):
    curvax.lanczos(op, num_steps=20, key=jax.random.key(1), stop=(True, 1, 1e-3, "change"))
