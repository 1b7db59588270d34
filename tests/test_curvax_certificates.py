"""curvax's certified Ritz bounds on matrices whose eigenvalues are known to rounding, in float32 and float64: every
true eigenvalue lies within value ± bound, and no bound is below the rounding floor √k·(matvec_rtol + 4ε)·‖A‖
(`curvax.ritz.certified_bounds`), although the exact-arithmetic residual |β_k s_{k,i}| falls far below it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax

N = 48


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _spectrum():
  """Distinct eigenvalues in [-3, 10], exactly representable in float32 (multiples of 1/64)."""
  return np.round(np.linspace(-3.0, 10.0, N) * 64) / 64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["diagonal", "rotated"])
def test_every_eigenvalue_within_its_bound_and_no_bound_below_the_floor(dtype, kind):
  eigs = _spectrum()
  if kind == "diagonal":
    a = np.diag(eigs).astype(dtype)  # a product is exact to one rounding per entry
  else:
    u = np.linalg.qr(np.random.default_rng(0).standard_normal((N, N)))[0]
    a = (u @ np.diag(eigs) @ u.T).astype(dtype)
    a = (a + a.T) / 2
  true = np.linalg.eigvalsh(a.astype(np.float64))  # the eigenvalues of the stored matrix, to float64 rounding
  op = curvax.matrix_operator(jnp.asarray(a))
  res = curvax.lanczos(op, num_steps=N, key=jax.random.key(0))
  theta, bounds = res.valid_ritz()
  raw = np.asarray(res.residual_norms)[: len(theta)]
  eps, norm = float(np.finfo(dtype).eps), float(np.abs(true).max())
  assert len(theta) == N and theta.dtype == dtype
  # Every Ritz value certifies an eigenvalue, and every eigenvalue is certified by some Ritz value.
  dist = np.abs(theta[:, None].astype(np.float64) - true[None, :])
  assert np.all(dist.min(axis=1) <= bounds), (dist.min(axis=1) / bounds).max()
  assert np.all((dist <= bounds[:, None]).any(axis=0))
  # No bound below the floor; the raw residuals do fall below one matvec's rounding, the certificate does not.
  floor = np.sqrt(N) * (np.sqrt(N) * eps + 4 * eps) * float(res.norm_estimate)
  assert float(res.norm_estimate) <= norm * (1 + 10 * eps) and float(res.norm_estimate) >= 0.5 * norm
  assert np.all(bounds >= floor * (1 - 1e-6)) and np.all(bounds >= eps * norm)
  assert raw.min() < eps * norm
  # ... and it is not vacuous: the converged values are certified to a few hundred ε‖A‖.
  assert np.all(bounds[raw < eps * norm] <= 1e3 * eps * norm)


def test_top_eigenvalue_is_the_largest_algebraic_not_the_largest_in_magnitude():
  """Power iteration converges to the eigenvalue of largest |λ|, here −5; Lanczos' top is the largest λ (2)."""
  a = np.diag([-5.0, 1.0, 2.0, 0.5, -1.0])
  op = curvax.matrix_operator(jnp.asarray(a))
  v = np.ones(5)
  for _ in range(200):
    v = a @ v
    v /= np.linalg.norm(v)
  assert abs(v @ a @ v + 5.0) < 1e-10  # power iteration's "top eigenvalue"
  top = curvax.top_eigenvalues(op, 1, num_steps=5, key=jax.random.key(0))
  bottom = curvax.bottom_eigenvalues(op, 1, num_steps=5, key=jax.random.key(0))
  assert abs(float(top.values[0]) - 2.0) <= float(top.bounds[0]) and float(top.bounds[0]) < 1e-12
  assert abs(float(bottom.values[0]) + 5.0) <= float(bottom.bounds[0])


def test_lost_orthogonality_certifies_nothing_and_matvec_rtol_raises_the_floor():
  """Without reorthogonalization and without a stored basis, once k·ω ≥ 1 (Simon's estimate) ‖y_i‖ has no lower
  bound, so nothing is certified (the largest finite float); a declared matvec error raises the floor in proportion."""
  i = np.arange(1, 201)
  eigs = 0.1 + (i - 1) / 199 * 99.9 * 0.9 ** (200 - i)  # Strakoš (1991): orthogonality is lost fast
  op = curvax.matrix_operator(jnp.diag(jnp.asarray(eigs)))
  plain = curvax.lanczos(op, num_steps=60, v0=jnp.ones(200), reorthogonalize="none")
  assert np.all(plain.valid_ritz()[1] == np.finfo(np.float64).max)
  full = curvax.lanczos(op, num_steps=60, v0=jnp.ones(200))
  loose = curvax.lanczos(op, num_steps=60, v0=jnp.ones(200), matvec_rtol=1e-6)
  floor = np.sqrt(60) * 1e-6 * float(loose.norm_estimate)
  assert np.all(loose.valid_ritz()[1] >= floor) and full.valid_ritz()[1].min() < floor
  with pytest.raises(ValueError, match="matvec_rtol=2 must be None"):
    curvax.lanczos(op, num_steps=3, key=jax.random.key(0), matvec_rtol=2)


def _gapped(seed, n=80):
  """Three top eigenvalues 5, 4, 3.5 above a bulk in [-1, 1], rotated, in float32."""
  rng = np.random.default_rng(seed)
  u = np.linalg.qr(rng.standard_normal((n, n)))[0]
  eigs = np.concatenate([[5.0, 4.0, 3.5], rng.uniform(-1, 1, n - 3)])
  return curvax.matrix_operator(jnp.asarray((u * eigs) @ u.T, jnp.float32))


# (seed, k, tol, matvec_rtol, options): float32 with a loose matvec_rtol, where the rounding floor is much of the bound.
# The stop test once added the floor with ‖A‖ estimated by max_j ‖A q_j‖ alone and without the Ritz vector's measured
# norm, while the reported bound takes max(max_j ‖A q_j‖, max|θ|) and divides by ‖y_i‖: each of these cases then
# stopped a step early, reporting a bound 0.7% (k = 3) or 1.7% ("gap") above tol·|θ|.
STOP_CASES = [
    (0, 3, 3e-3, 1e-4, {}),
    (0, 3, 3e-3, 1e-4, dict(reorthogonalize="partial")),
    (0, 3, 3e-3, 1e-4, dict(reorthogonalize="none")),
    (0, 3, 3e-3, 1e-4, dict(max_vectors=10)),
    (2, 1, 3e-3, 1e-3, dict(bound="gap")),
]


@pytest.mark.parametrize("seed,k,tol,matvec_rtol,options", STOP_CASES)
def test_a_run_that_stops_at_tol_reports_bounds_within_tol(seed, k, tol, matvec_rtol, options):
  """`tol` stops on the bound that is reported (`curvax.ritz.ritz_converged` on `certified_bounds`)."""
  op = _gapped(seed)
  res = curvax.top_eigenvalues(
      op, k, num_steps=40, key=jax.random.PRNGKey(seed), tol=tol, matvec_rtol=matvec_rtol, **options
  )
  assert bool(res.lanczos.converged) and int(res.lanczos.num_steps_taken) < 40  # stopped early, on the criterion
  bounds = res.gap_bounds if options.get("bound") == "gap" else res.bounds
  values = np.asarray(res.values, np.float64)
  assert np.all(np.asarray(bounds) <= tol * np.abs(values)), np.asarray(bounds) / (tol * np.abs(values))
  # The certificate holds: an eigenvalue of the stored matrix within each bound.
  true = np.linalg.eigvalsh(np.asarray(op.a_nxn, np.float64))
  assert np.all(np.abs(values[:, None] - true[None, :]).min(axis=1) <= np.asarray(res.bounds))
