"""Intervals for the numbers a verdict reads, and the three-way reading of an interval against a threshold.

Every verdict of a claim or an atlas part reads an interval, never a point: a rule holds when the whole interval
satisfies it, fails when none of it does, and is undetermined (the verdict `inconclusive`) when the interval
straddles the threshold; the report then names the design change that would decide it (more seeds, more points).

  slope_interval(x, y, level)        least-squares slope of y on x with its Student-t interval (every (x, y) point
                                     counted: several seeds at one x are several points), as scipy.stats.linregress's
                                     standard error gives it;
  mean_interval(values, level)       the mean with its Student-t interval;
  bootstrap_interval(groups, stat)   percentile bootstrap of a statistic over resampled groups (e.g. methods);
  fisher_z_interval(r, n, level)     a correlation's interval by Fisher's z = atanh(r), standard error 1/√(n−3);
  proportion_interval(k, n, level)   a fraction k/n's exact binomial interval (Clopper & Pearson 1934);
  roc_auc(scores, labels)            the area under the ROC curve: the probability that a positive outranks a
                                     negative, ties counted ½ (Mann–Whitney's U / (n₊n₋), Hanley & McNeil 1982);
  finite(v)                          a real, finite number (not a bool): what a record's value must be to be read;
  reading(interval, low=, high=)     True (inside [low, high]) / False (disjoint) / None (straddles);
  repeats_to_decide(x, y, thresholds)   the fewest repeats of an undecided slope's x levels (seeds per width) whose
                                     interval would clear every threshold, were the slope and the scatter to hold;
  seeds_to_decide(interval, n, t)    the same for a mean's Student-t interval over n seeds: the fewest seeds whose
                                     interval would exclude t, were the mean and the seeds' spread to hold.

Written here (not taken from a library) because scipy.stats gives the pieces but not the three-way reading the
verdicts share; tests/test_stats.py checks each interval against scipy's own or a closed form.
"""

import math
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np
import scipy.stats

LEVEL = 0.95


def finite(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def slope_interval(x: Sequence[float], y: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
  """(slope, low, high) of the least-squares line of y on x; the interval is slope ± t_{n−2}·SE (n points)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) != len(y) or len(x) < 3 or np.ptp(x) == 0:
    raise ValueError(f"a slope interval needs ≥ 3 points at ≥ 2 distinct x; got {len(x)} points, x = {x.tolist()}")
  fit = scipy.stats.linregress(x, y)
  half = scipy.stats.t.ppf(0.5 + level / 2, len(x) - 2) * fit.stderr
  return float(fit.slope), float(fit.slope - half), float(fit.slope + half)


def mean_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
  """(mean, low, high): mean ± t_{n−1}·s/√n. ValueError for fewer than 2 values (no spread, no interval)."""
  v = np.asarray(values, np.float64)
  if len(v) < 2:
    raise ValueError(f"a mean interval needs ≥ 2 values; got {len(v)}")
  half = scipy.stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
  return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def bootstrap_interval(
    groups: Sequence, statistic: Callable[[list], float], *, n: int = 2000, level: float = LEVEL, seed: int = 0
) -> tuple[float, float, float]:
  """(statistic of `groups`, low, high): percentile interval of `statistic` over `n` resamples of the groups with
  replacement (resample what is independent: methods, seeds). Resamples whose statistic is not finite are dropped."""
  if len(groups) < 2:
    raise ValueError(f"a bootstrap needs ≥ 2 groups; got {len(groups)}")
  rng = np.random.default_rng(seed)
  draws = []
  for _ in range(n):
    value = statistic([groups[i] for i in rng.integers(0, len(groups), len(groups))])
    if value is not None and math.isfinite(value):
      draws.append(value)
  if not draws:
    raise ValueError("no resample gave a finite statistic")
  lo, hi = np.quantile(draws, [0.5 - level / 2, 0.5 + level / 2])
  return float(statistic(list(groups))), float(lo), float(hi)


def fisher_z_interval(r: float, n: int, level: float = LEVEL) -> tuple[float, float, float]:
  """(r, low, high) for a correlation of n pairs: tanh(atanh(r) ± z_{level}/√(n−3))."""
  if n < 4:
    raise ValueError(f"Fisher's z interval needs n ≥ 4 pairs; got {n}")
  z, half = math.atanh(max(min(r, 1 - 1e-15), -1 + 1e-15)), scipy.stats.norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
  return float(r), math.tanh(z - half), math.tanh(z + half)


def proportion_interval(k: int, n: int, level: float = LEVEL) -> tuple[float, float, float]:
  """(k/n, low, high): Clopper & Pearson 1934's exact interval, the Beta quantiles B(α/2; k, n−k+1) and
  B(1−α/2; k+1, n−k) (0 at k = 0, 1 at k = n), as scipy.stats.binomtest's `proportion_ci(method='exact')`."""
  if n < 1 or not 0 <= k <= n:
    raise ValueError(f"a proportion interval needs 0 ≤ k ≤ n, n ≥ 1; got k = {k}, n = {n}")
  alpha = 1 - level
  low = scipy.stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
  high = scipy.stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
  return k / n, float(low), float(high)


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
  """P(score of a positive > score of a negative) + ½·P(tie), over every (positive, negative) pair: 1 for scores
  that separate the classes perfectly, 0.5 for a constant score. ValueError without both classes."""
  s, y = np.asarray(scores, np.float64), np.asarray(labels, bool)
  if len(s) != len(y) or not y.any() or y.all():
    raise ValueError(f"an AUC needs both classes and one score per label; got {int(y.sum())} of {len(y)} positive")
  pos, neg = s[y][:, None], s[~y][None, :]
  return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def reading(interval: tuple[float, float, float], *, low: float = -math.inf, high: float = math.inf) -> Optional[bool]:
  """True if the interval (value, lo, hi) lies inside [low, high], False if it lies outside, None if it straddles."""
  _, lo, hi = interval
  if low <= lo and hi <= high:
    return True
  if hi < low or lo > high:
    return False
  return None


def fmt(interval: tuple[float, float, float], digits: int = 3) -> str:
  """'v [lo, hi]' with `digits` significant digits."""
  v, lo, hi = interval
  return f"{v:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def repeats_to_decide(
    x: Sequence[float], y: Sequence[float], thresholds: Sequence[float], level: float = LEVEL, most: int = 100
) -> Optional[int]:
  """The fewest repeats r of the design's distinct x levels (r points at each, e.g. r seeds per width) whose slope
  interval, t_{rL−2}·s/√(r·Σ(x_l − x̄)²) about the measured slope (L levels, s the residual standard deviation of the
  measured fit), would clear every threshold: a power extrapolation that holds the slope and the scatter fixed. None
  when the slope sits on a threshold or more than `most` repeats would be needed."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  fit = scipy.stats.linregress(x, y)
  s = math.sqrt(float(np.sum((y - fit.intercept - fit.slope * x) ** 2)) / (len(x) - 2))
  levels = np.unique(x)
  sxx = float(np.sum((levels - levels.mean()) ** 2))
  gap = min(abs(fit.slope - t) for t in thresholds)
  for r in range(1, most + 1):
    dof = r * len(levels) - 2
    if dof > 0 and scipy.stats.t.ppf(0.5 + level / 2, dof) * s / math.sqrt(r * sxx) < gap:
      return r
  return None


def seeds_to_decide(
    interval: Sequence[float], n: int, threshold: float, level: float = LEVEL, most: int = 100
) -> Optional[int]:
  """The fewest seeds m whose Student-t interval of a mean, (value, lo, hi) measured over n seeds, would exclude
  `threshold` were the mean and the seeds' standard deviation to hold: half-width t_{m−1}·s/√m with s recovered
  from the measured interval (s = (hi − value)·√n / t_{n−1}); n itself when it already does; None when the value is
  the threshold or more than `most` are needed. A projection of a t interval (which covers at any n for normal
  seeds), not of a percentile bootstrap."""
  v, lo, hi = interval
  if v == threshold or n < 2:
    return None
  sd = (hi - v) * math.sqrt(n) / scipy.stats.t.ppf(0.5 + level / 2, n - 1)
  for m in range(n, most + 1):
    if scipy.stats.t.ppf(0.5 + level / 2, m - 1) * sd / math.sqrt(m) < abs(v - threshold):
      return m
  return None
