"""Tests for curvax/spectrum.py, curvax/density.py and curvax/probes.py: extreme eigenvalues, SLQ density
(quadrature exactness, matfree), probes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from matfree import decomp, funm

import curvax
from curvax.density import gaussian_kernel
from curvax.probes import PROBES, sample_probes
from curvax.ritz import gap_refined_bounds


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _with_spectrum(eigs, seed):
  n = len(eigs)
  u = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]
  return jnp.asarray(u @ np.diag(eigs) @ u.T)


def _outlier_matrix():
  bulk = np.random.default_rng(0).uniform(-1.0, 1.0, 75)
  eigs = np.concatenate([bulk, [10.0, 7.0, 5.0, -4.0, -3.0]])
  return _with_spectrum(eigs, 1), eigs


def test_top_and_bottom_eigenvalues_with_bounds():
  a, eigs = _outlier_matrix()
  example = jnp.zeros(len(eigs))
  top = curvax.top_eigenvalues(curvax.as_operator(lambda x: a @ x, example), 3, num_steps=30, key=jax.random.PRNGKey(0))
  np.testing.assert_allclose(top.values, [10.0, 7.0, 5.0], atol=1e-8)
  assert np.all(np.asarray(top.bounds) < 1e-6) and bool(top.separated) and bool(jnp.all(top.valid))
  bottom = curvax.bottom_eigenvalues(
      curvax.as_operator(lambda x: a @ x, example), 2, num_steps=30, key=jax.random.PRNGKey(1)
  )
  np.testing.assert_allclose(bottom.values, [-4.0, -3.0], atol=1e-8)
  assert bool(bottom.separated)


def test_separated_only_once_top_pair_is_resolved():
  eigs = np.concatenate([np.linspace(0.0, 1.0, 48), [1.1, 1.2]])
  a = _with_spectrum(eigs, 2)
  early = curvax.top_eigenvalues(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(50)), 2, num_steps=3, key=jax.random.PRNGKey(0)
  )
  assert not bool(early.separated)  # 3 steps: intervals [θ ± bound] of the top two overlap
  for value, bound in zip(np.asarray(early.values), np.asarray(early.bounds)):
    assert np.min(np.abs(eigs - value)) <= bound + 1e-12  # the residual bound encloses an eigenvalue
  late = curvax.top_eigenvalues(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(50)), 2, num_steps=25, key=jax.random.PRNGKey(0)
  )
  assert bool(late.separated)
  np.testing.assert_allclose(late.values, [1.2, 1.1], atol=1e-5)


def test_top_eigenvalues_after_breakdown_are_masked():
  u = np.random.default_rng(3).standard_normal(30)
  u /= np.linalg.norm(u)
  top = curvax.top_eigenvalues(
      curvax.as_operator(lambda x: 3.0 * u * (u @ x), jnp.zeros(30)), 3, num_steps=5, key=jax.random.PRNGKey(0)
  )
  assert list(np.asarray(top.valid)) == [True, True, False]  # Krylov space: u and one null direction
  np.testing.assert_allclose(top.values, [3.0, 0.0, 0.0], atol=1e-12)
  assert bool(top.lanczos.breakdown) and bool(top.separated)


def test_gap_refined_bounds_closed_form():
  theta = jnp.asarray([1.0, 5.0, 5.1, 0.0])
  bounds = jnp.asarray([0.1, 0.2, 0.3, 0.0])
  valid = jnp.asarray([True, False, True, False])  # only θ = 1 and θ = 5.1 count
  refined = gap_refined_bounds(theta, bounds, valid)
  # θ=1: gap = |1 − 5.1| − 0.3 = 3.8 > 0.1 → 0.1²/3.8; θ=5.1: gap = 4.1 − 0.1 = 4.0 > 0.3 → 0.3²/4.
  np.testing.assert_allclose(refined, [0.01 / 3.8, 0.0, 0.09 / 4.0, 0.0], rtol=1e-12)
  # Overlapping neighbours (gap ≤ r): the residual bound is kept; a single Ritz value has no gap: kept too.
  close = gap_refined_bounds(jnp.asarray([1.0, 1.05]), jnp.asarray([0.1, 0.1]), jnp.asarray([True, True]))
  np.testing.assert_allclose(close, [0.1, 0.1])
  alone = gap_refined_bounds(jnp.asarray([2.0, 0.0]), jnp.asarray([0.5, 0.0]), jnp.asarray([True, False]))
  np.testing.assert_allclose(alone, [0.5, 0.0])


@pytest.mark.parametrize("bound", ["residual", "gap"])
def test_tol_stops_at_the_first_step_that_meets_it(bound):
  a, eigs = _outlier_matrix()
  mv, example, key = (lambda x: a @ x), jnp.zeros(len(eigs)), jax.random.PRNGKey(4)
  tol = 1e-3
  top = curvax.top_eigenvalues(curvax.as_operator(mv, example), 1, num_steps=40, key=key, tol=tol, bound=bound)
  k = int(top.lanczos.num_steps_taken)
  used = top.bounds if bound == "residual" else top.gap_bounds
  assert bool(top.lanczos.converged) and 2 <= k < 40
  assert float(used[0]) <= tol * abs(float(top.values[0]))
  assert abs(float(top.values[0]) - 10.0) <= float(used[0]) + 1e-12  # the bound holds for the true λ_max
  before = curvax.top_eigenvalues(
      curvax.as_operator(mv, example), 1, num_steps=k - 1, key=key
  )  # same start: the k − 1 step prefix
  used_before = before.bounds if bound == "residual" else before.gap_bounds
  assert float(used_before[0]) > tol * abs(float(before.values[0]))


def test_gap_bound_needs_fewer_steps_than_the_residual_bound():
  a, eigs = _outlier_matrix()
  mv, example, key = (lambda x: a @ x), jnp.zeros(len(eigs)), jax.random.PRNGKey(4)
  steps = {
      b: int(
          curvax.top_eigenvalues(
              curvax.as_operator(mv, example), 1, num_steps=40, key=key, tol=1e-4, bound=b
          ).lanczos.num_steps_taken
      )
      for b in ("residual", "gap")
  }
  assert steps["gap"] < steps["residual"], steps
  bottom = curvax.bottom_eigenvalues(curvax.as_operator(mv, example), 1, num_steps=40, key=key, tol=1e-4, bound="gap")
  assert abs(float(bottom.values[0]) + 4.0) <= float(bottom.gap_bounds[0]) + 1e-12


def test_extreme_eigenvalue_argument_errors():
  mv, example = (lambda x: x), jnp.zeros(10)
  with pytest.raises(ValueError, match="k=6 exceeds num_steps=5"):
    curvax.top_eigenvalues(curvax.as_operator(mv, example), 6, num_steps=5, key=jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="num_steps=11 exceeds the dimension n=10"):
    curvax.bottom_eigenvalues(curvax.as_operator(mv, example), 1, num_steps=11, key=jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="k=0"):
    curvax.top_eigenvalues(curvax.as_operator(mv, example), 0, num_steps=5, key=jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match=r"bound='tight' is not valid; valid choices: \['residual', 'gap', 'change'\]"):
    curvax.top_eigenvalues(
        curvax.as_operator(mv, example), 1, num_steps=5, key=jax.random.PRNGKey(0), tol=0.1, bound="tight"
    )
  with pytest.raises(ValueError, match="tol=-1"):
    curvax.top_eigenvalues(curvax.as_operator(mv, example), 1, num_steps=5, key=jax.random.PRNGKey(0), tol=-1)


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_probes_unit_norm_pytrees(probe):
  tree = sample_probes({"w": jnp.zeros((4, 8)), "b": jnp.zeros(32)}, 8, jax.random.PRNGKey(0), probe=probe)
  assert tree["w"].shape == (8, 4, 8) and tree["b"].shape == (8, 32)
  v = jnp.concatenate([tree["b"], tree["w"].reshape(8, 32)], axis=1)
  np.testing.assert_allclose(jnp.linalg.norm(v, axis=1), 1.0, atol=1e-14)
  if probe == "rademacher":
    np.testing.assert_allclose(jnp.abs(v), 1 / 8.0)
  raw = sample_probes(jnp.zeros(64), 8, jax.random.PRNGKey(0), probe=probe, unit_norm=False)
  assert float(jnp.min(jnp.linalg.norm(raw, axis=1))) > 4.0  # not normalized: E‖v‖² = n
  with pytest.raises(ValueError, match=r"probe='sphere'.*\['gaussian', 'rademacher'\]"):
    sample_probes(jnp.zeros(4), 2, jax.random.PRNGKey(0), probe="sphere")


def test_slq_weights_quadrature_exactness_density_normalization_and_matfree():
  n, m, num_probes = 40, 5, 6
  a = _with_spectrum(np.random.default_rng(4).uniform(-1.0, 1.5, n), 5)
  key = jax.random.PRNGKey(7)
  out = curvax.spectral_density(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(n)), num_steps=m, num_probes=num_probes, key=key
  )
  np.testing.assert_allclose(jnp.sum(out.weights, axis=1), 1.0, atol=1e-13)
  # Regenerate the probes exactly as spectral_density draws them.
  v_pxn = np.asarray(sample_probes(jnp.zeros(n), num_probes, jax.random.split(key)[0]))
  a_np, theta, tau2 = np.asarray(a), np.asarray(out.nodes), np.asarray(out.weights)
  for v, th, w in zip(v_pxn, theta, tau2):
    a_j_v = v.copy()
    for j in range(2 * m + 1):
      exact, quad = v @ a_j_v, np.sum(w * th**j)
      if j <= 2 * m - 1:  # Gauss quadrature with m nodes is exact up to degree 2m − 1 (Golub & Meurant)
        assert abs(quad - exact) < 1e-10 * 1.5**j, (j, quad, exact)
      a_j_v = a_np @ a_j_v
  assert (
      max(
          abs(np.sum(w * th ** (2 * m)) - v @ np.linalg.matrix_power(a_np, 2 * m) @ v)
          for v, th, w in zip(v_pxn, theta, tau2)
      )
      > 1e-8
  )  # and not beyond: the check discriminates
  grid, dens = np.asarray(out.grid), np.asarray(out.density)
  np.testing.assert_allclose(np.trapezoid(dens, grid), 1.0, atol=1e-5)
  hutchinson_mean = np.mean([v @ a_np @ v for v in v_pxn])  # Gaussian smoothing keeps the first moment
  np.testing.assert_allclose(np.trapezoid(grid * dens, grid), hutchinson_mean, atol=1e-6)
  width = np.max(theta[np.asarray(out.node_mask)]) - np.min(theta[np.asarray(out.node_mask)])
  np.testing.assert_allclose(float(out.sigma), 0.01 * width, rtol=1e-12)
  band_lo, band_hi = np.asarray(out.band_low), np.asarray(out.band_high)
  assert np.all(band_lo <= band_hi) and np.mean((band_lo <= dens + 1e-12) & (dens <= band_hi + 1e-12)) > 0.95
  assert np.max(band_hi - band_lo) > 1e-3 and out.band_percentiles == (5.0, 95.0)
  # Independent implementation: matfree's SLQ integrand vᵀ f(A) v ≈ e1ᵀ f(T) e1 on the same probe, f = exp.
  quadform = funm.monte_carlo_funm_sym(funm.dense_funm_sym_eigh(jnp.exp), decomp.tridiag_sym(m, custom_vjp=False))
  theirs = jax.jit(lambda v: quadform(lambda x: a @ x, v))(jnp.asarray(v_pxn[0]))
  np.testing.assert_allclose(np.sum(tau2[0] * np.exp(theta[0])), theirs, rtol=1e-10)


def test_slq_of_scaled_identity_is_one_smoothed_spike():
  out = curvax.spectral_density(
      curvax.as_operator(lambda x: 2.0 * x, jnp.zeros(20)),
      num_steps=6,
      num_probes=4,
      key=jax.random.PRNGKey(0),
      sigma=0.1,
  )
  assert bool(jnp.all(out.breakdown))  # every probe is an eigenvector: one step, then an invariant subspace
  np.testing.assert_allclose(out.density, gaussian_kernel(out.grid - 2.0, 0.1), atol=1e-12)
  np.testing.assert_allclose(out.band_high - out.band_low, 0.0, atol=1e-12)  # identical probes: no uncertainty
  assert float(out.sigma) == 0.1 and all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(out))


def test_spectral_density_argument_errors():
  mv, example = (lambda x: x), jnp.zeros(10)
  with pytest.raises(ValueError, match="num_steps=11 exceeds the dimension n=10"):
    curvax.spectral_density(curvax.as_operator(mv, example), num_steps=11, num_probes=4, key=jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="num_probes=1"):
    curvax.spectral_density(curvax.as_operator(mv, example), num_steps=3, num_probes=1, key=jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="sigma=-1"):
    curvax.spectral_density(
        curvax.as_operator(mv, example), num_steps=3, num_probes=4, key=jax.random.PRNGKey(0), sigma=-1.0
    )
  with pytest.raises(ValueError, match="reorthogonalize='cgs'"):
    curvax.spectral_density(
        curvax.as_operator(mv, example), num_steps=3, num_probes=4, key=jax.random.PRNGKey(0), reorthogonalize="cgs"
    )
