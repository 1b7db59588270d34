"""experiments/stats.py: each interval against a closed form or an independent computation, and the three-way reading."""

import math

import numpy as np
import pytest
import scipy.stats

from experiments import stats


def test_slope_interval_matches_the_closed_form():
  x = np.array([1.0, 2, 3, 4, 1, 2, 3, 4])
  y = np.array([0.1, 0.35, 0.52, 0.8, 0.05, 0.3, 0.6, 0.74])
  slope, lo, hi = stats.slope_interval(x, y)
  # Closed form: SE = sqrt(Σr²/(n−2) / Σ(x−x̄)²), t quantile at 0.975 with 6 degrees of freedom.
  b = np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2)
  resid = y - (y.mean() + b * (x - x.mean()))
  se = math.sqrt(np.sum(resid**2) / 6 / np.sum((x - x.mean()) ** 2))
  assert slope == pytest.approx(b, rel=1e-12)
  assert (hi - lo) / 2 == pytest.approx(2.446911851144969 * se, rel=1e-9)
  with pytest.raises(ValueError, match="3 points"):
    stats.slope_interval([1, 2], [1, 2])
  with pytest.raises(ValueError, match="distinct x"):
    stats.slope_interval([1, 1, 1], [1, 2, 3])


def test_mean_interval_and_fisher_z():
  m, lo, hi = stats.mean_interval([1.0, 2.0, 3.0])
  assert m == 2.0 and hi - m == pytest.approx(4.302652729911275 * 1 / math.sqrt(3), rel=1e-9)
  r, lo, hi = stats.fisher_z_interval(0.24, 10)
  half = 1.959963984540054 / math.sqrt(7)
  assert (lo, hi) == pytest.approx((math.tanh(math.atanh(0.24) - half), math.tanh(math.atanh(0.24) + half)))
  assert lo < 0 < hi  # the atlas's best Spearman ρ over 10 methods decides nothing
  with pytest.raises(ValueError, match="n ≥ 4"):
    stats.fisher_z_interval(0.5, 3)


def test_proportion_interval_is_clopper_pearson():
  # At k = 0 the upper bound has the closed form 1 − (α/2)^(1/n); at k = n the lower bound (α/2)^(1/n).
  v, lo, hi = stats.proportion_interval(0, 9)
  assert (v, lo) == (0.0, 0.0) and hi == pytest.approx(1 - 0.025 ** (1 / 9), rel=1e-12)
  v, lo, hi = stats.proportion_interval(9, 9)
  assert (v, hi) == (1.0, 1.0) and lo == pytest.approx(0.025 ** (1 / 9), rel=1e-12)
  ci = scipy.stats.binomtest(3, 10).proportion_ci(confidence_level=0.95, method="exact")
  assert stats.proportion_interval(3, 10) == pytest.approx((0.3, ci.low, ci.high), rel=1e-9)
  with pytest.raises(ValueError, match="0 ≤ k ≤ n"):
    stats.proportion_interval(4, 3)


def test_bootstrap_interval_of_a_mean_is_close_to_the_t_interval():
  rng = np.random.default_rng(1)
  values = list(rng.normal(3.0, 1.0, 200))
  v, lo, hi = stats.bootstrap_interval(values, lambda g: float(np.mean(g)), n=4000)
  _, tlo, thi = stats.mean_interval(values)
  assert (
      v == pytest.approx(np.mean(values)) and lo == pytest.approx(tlo, abs=0.03) and hi == pytest.approx(thi, abs=0.03)
  )
  # Resampling groups: a Spearman correlation over (x, y) pairs resampled as pairs.
  pairs = [(i, i + rng.normal(0, 3)) for i in range(12)]
  rho = lambda g: scipy.stats.spearmanr([a for a, _ in g], [b for _, b in g]).statistic
  v, lo, hi = stats.bootstrap_interval(pairs, rho, n=500)
  assert lo <= v <= hi


@pytest.mark.parametrize(
    "interval, bounds, expected",
    [
        ((2.0, 1.6, 2.4), dict(low=1.5), True),
        ((2.0, 1.4, 2.4), dict(low=1.5), None),
        ((1.0, 0.8, 1.2), dict(low=1.5), False),
        ((0.0, -0.1, 0.1), dict(low=-0.2, high=0.2), True),
        ((0.15, 0.1, 0.3), dict(low=-0.2, high=0.2), None),
        ((0.5, 0.3, 0.7), dict(low=-0.2, high=0.2), False),
        ((0.7, 0.5, 0.9), dict(high=1.5), True),
    ],
)
def test_reading_is_three_way(interval, bounds, expected):
  assert stats.reading(interval, **bounds) is expected


def test_roc_auc_is_mann_whitney_u_over_the_pairs():
  assert stats.roc_auc([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == 1.0  # a perfect separator
  assert stats.roc_auc([0.9, 0.8, 0.2, 0.1], [False, False, True, True]) == 0.0
  assert stats.roc_auc([3.0] * 5, [True, False, True, False, False]) == 0.5  # a constant score
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=40), rng.random(40) < 0.4
  u = scipy.stats.mannwhitneyu(x[y], x[~y]).statistic  # scipy's U of the positives
  assert stats.roc_auc(x, y) == pytest.approx(u / (y.sum() * (~y).sum()))
  assert stats.roc_auc([1, 2, 2, 3], [False, True, False, True]) == pytest.approx((1 + 0.5 + 1 + 1) / 4)
  with pytest.raises(ValueError, match="both classes"):
    stats.roc_auc([1.0, 2.0], [True, True])


def test_repeats_to_decide_is_the_closed_form_power_extrapolation():
  """x = 0, 0, 1, 1 and y = 0, 0.2, 1, 1.2: slope 1, residuals ±0.1, s² = 0.04 / 2, Σ(x_l − x̄)² = 0.5 over the two
  levels. Clearing 0.9 needs t_{2r−2}·√0.02 / √(0.5 r) < 0.1, i.e. t_{2r−2} / √r < 0.5: r = 16 gives
  t_30 / 4 = 2.042 / 4 = 0.511, r = 17 gives t_32 / √17 = 2.037 / 4.123 = 0.494."""
  x, y = [0, 0, 1, 1], [0, 0.2, 1, 1.2]
  assert stats.repeats_to_decide(x, y, [0.9]) == 17
  assert stats.repeats_to_decide(x, y, [0.9, 1.5]) == 17  # the nearest threshold decides
  assert stats.repeats_to_decide(x, y, [1.0]) is None  # the slope on its threshold: no number of seeds
  assert stats.repeats_to_decide(x, y, [0.9], most=16) is None
  assert stats.repeats_to_decide([0, 0, 1, 1], [0, 0.02, 1, 1.02], [0.0]) == 2  # narrow already at 2 repeats


def test_seeds_to_decide_projects_the_student_t_interval():
  """Against the t interval itself: 4 seeds with mean 1 and sd 2 straddle 0; the projected m is the first n whose
  interval from the same mean and sd excludes 0."""
  v = [1.0 - 2.0 * z for z in (1.3, -0.4, 0.5, -1.4)]
  v = [x - np.mean(v) + 1.0 for x in v]
  v = [1.0 + (x - 1.0) * 2.0 / np.std(v, ddof=1) for x in v]  # mean 1, sd 2
  interval = stats.mean_interval(v)
  m = stats.seeds_to_decide(interval, 4, 0.0)
  half = lambda k: scipy.stats.t.ppf(0.975, k - 1) * 2.0 / math.sqrt(k)
  assert half(m) < 1.0 <= half(m - 1) and m == 18
  assert stats.seeds_to_decide((1.0, 0.5, 1.5), 4, 0.0) == 4  # already decided
  assert stats.seeds_to_decide((0.0, -1.0, 1.0), 4, 0.0) is None
