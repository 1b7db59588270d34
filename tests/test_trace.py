"""Tests for curvax/trace.py: Hutchinson and Hutch++ against the exact trace, each other and matfree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.flatten_util import ravel_pytree
from matfree import stochtrace

import curvax
from tests.test_spectrum import _with_spectrum, x64  # noqa: F401  x64: the autouse float64 fixture

# The two estimators of `analysis.trace_method`; matfree's XTrace is tested in tests/test_curvax_spectra.py.
METHODS = ("hutchinson", "hutch++")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_trace_within_three_standard_errors(method):
  eigs = np.random.default_rng(8).uniform(-1.0, 3.0, 100)
  a = _with_spectrum(eigs, 9)
  out = curvax.trace(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(100)), num_probes=30, key=jax.random.PRNGKey(2), method=method
  )
  assert out.num_matvecs == 30 and out.method == method and float(out.std_error) > 0
  assert abs(float(out.estimate) - eigs.sum()) < 3 * float(out.std_error)


def test_hutchpp_beats_hutchinson_on_decaying_spectrum():
  eigs = 1.0 / np.arange(1, 101) ** 2
  a = _with_spectrum(eigs, 10)
  keys = jax.random.split(jax.random.PRNGKey(0), 10)
  errors = {}
  for method in METHODS:
    estimate = lambda k: curvax.trace(
        curvax.as_operator(lambda x: a @ x, jnp.zeros(100)), num_probes=30, key=k, method=method
    ).estimate
    est = jax.jit(jax.vmap(estimate))(keys)  # one compilation for the 10 seeds
    errors[method] = float(jnp.mean(jnp.abs(est - eigs.sum())))
  assert errors["hutch++"] < 0.5 * errors["hutchinson"], errors


def test_hutchinson_matches_matfree():
  a = _with_spectrum(np.random.default_rng(11).uniform(0.0, 2.0, 50), 12)
  key = jax.random.PRNGKey(5)
  ours = curvax.trace(curvax.as_operator(lambda x: a @ x, jnp.zeros(50)), num_probes=16, key=key)
  z_pxn = jax.random.rademacher(key, (16, 50), dtype=jnp.float64)  # the probes `trace` draws from this key
  theirs = stochtrace.estimator_monte_carlo(stochtrace.monte_carlo_trace(), lambda k: z_pxn)(lambda x: a @ x, key)
  np.testing.assert_allclose(ours.estimate, theirs, rtol=1e-12)


def test_trace_on_pytree_equals_flat():
  n = 20
  a = _with_spectrum(np.linspace(1.0, 2.0, n), 13)
  tree = {"w": jnp.zeros((3, 4)), "b": jnp.zeros(8)}
  _, unravel = ravel_pytree(tree)
  tree_mv = lambda t: unravel(a @ ravel_pytree(t)[0])
  on_tree = curvax.trace(curvax.as_operator(tree_mv, tree), num_probes=8, key=jax.random.PRNGKey(1), method="hutch++")
  on_flat = curvax.trace(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(n)), num_probes=8, key=jax.random.PRNGKey(1), method="hutch++"
  )
  np.testing.assert_allclose(on_tree.estimate, on_flat.estimate, rtol=1e-13)


def test_trace_argument_errors():
  mv, example = (lambda x: x), jnp.zeros(10)
  with pytest.raises(ValueError, match=r"method='exact'.*\['hutch\+\+', 'hutchinson', 'xtrace'\]"):
    curvax.trace(curvax.as_operator(mv, example), num_probes=10, key=jax.random.PRNGKey(0), method="exact")
  assert sorted(curvax.TRACE_METHODS) == ["hutch++", "hutchinson", "xtrace"]
  with pytest.raises(ValueError, match="num_probes=3 must be ≥ 4 for method='hutch\\+\\+'"):
    curvax.trace(curvax.as_operator(mv, example), num_probes=3, key=jax.random.PRNGKey(0), method="hutch++")
  with pytest.raises(ValueError, match="num_probes=1 must be ≥ 2"):
    curvax.trace(curvax.as_operator(mv, example), num_probes=1, key=jax.random.PRNGKey(0))


@pytest.mark.parametrize("method,num_probes", [("hutchinson", 30), ("hutch++", 60)])
def test_standard_error_covers_the_trace_at_the_nominal_rate(method, num_probes):
  """Calibration over 400 independent keys on a matrix with known trace.

  The standard error is the sample standard error of the g quadratic forms that make the estimate's randomness
  (Hutchinson: all g = num_probes; Hutch++: the g = num_probes − 2·(num_probes // 3) deflated probes, conditional on
  the sketch, whose exact part tr(QᵀAQ) adds no error; tr(QᵀAQ) + tr((I−QQᵀ)A(I−QQᵀ)) = tr(A) for every Q). So
  (estimate − trace) / se is close to Student's t with g − 1 degrees of freedom, and |estimate − trace| ≤ 1.96·se
  holds with probability p0 = P(|t_{g−1}| ≤ 1.96): 0.940 for g = 30 and 0.935 for g = 20 (4000 keys measured 0.938
  and 0.939). Over 400 runs the covered count is Binomial(400, p0): its central 99.9% interval, ≈ p0 ± 0.04, is
  asserted. The mean of the estimates must be within 3 of its standard errors of the trace (unbiased), and the mean
  of se² must match the estimates' variance (by the law of total variance, for Hutch++ too, since the conditional
  mean is tr(A) for every sketch); for Hutchinson with Rademacher probes that variance is also known in closed form,
  2(‖A‖_F² − Σ a_ii²)/num_probes (Hutchinson 1989).
  """
  runs = 400
  eigs = np.random.default_rng(8).uniform(-1.0, 3.0, 100)
  a = _with_spectrum(eigs, 9)
  estimate = lambda k: curvax.trace(
      curvax.as_operator(lambda x: a @ x, jnp.zeros(100)), num_probes=num_probes, key=k, method=method
  )
  out = jax.jit(jax.vmap(estimate))(jax.random.split(jax.random.key(0), runs))
  est, se = np.asarray(out.estimate), np.asarray(out.std_error)
  exact = eigs.sum()

  g = num_probes if method == "hutchinson" else num_probes - 2 * (num_probes // 3)
  p0 = 2.0 * scipy.stats.t.cdf(1.96, g - 1) - 1.0
  low, high = scipy.stats.binom.interval(0.999, runs, p0)
  covered = int(np.sum(np.abs(est - exact) <= 1.96 * se))
  assert low <= covered <= high, (covered, low, high, p0)

  assert abs(est.mean() - exact) < 3.0 * est.std(ddof=1) / np.sqrt(runs), (est.mean(), exact)
  # The variance of 400 estimates has a relative standard error of about √(2/399) ≈ 7%: 25% is > 3 of them.
  np.testing.assert_allclose(np.mean(se**2), est.var(ddof=1), rtol=0.25)
  if method == "hutchinson":
    a_np = np.asarray(a)
    closed_form = 2.0 * (np.sum(a_np**2) - np.sum(np.diag(a_np) ** 2)) / num_probes
    np.testing.assert_allclose(np.mean(se**2), closed_form, rtol=0.1)  # 400 se² average to ~2% of their mean
    np.testing.assert_allclose(est.var(ddof=1), closed_form, rtol=0.25)
