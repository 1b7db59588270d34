"""The atlas's measures and verdicts: pure functions of hand-checkable records, fixed before any atlas run.

A training record (`Point`) is one run: method, warmup T_w, peak lr η, seed, outcome and final validation loss. The
rules, stated before the sweep ran (issue 15) and not to be changed after seeing its data without saying so:

  * Stability of a cell (method, T_w, η), read by each run's outcome class (analysis/outcomes.py, stated before
    any run of the issue that introduced it): a run is *stable* if it trained (its final validation loss below the
    targets' unigram entropy H − δ), *unstable* if it diverged (non-finite, or above the loss at init) or collapsed
    (within δ of H: the plateau of a Post-LN run without warmup), and *undetermined* if it is undertrained (still
    above H + δ at the horizon: too small an lr or too few steps, neither a success nor a failure) or crashed (not a
    result). A cell is unstable if any of its runs is, stable if every run is stable, else undetermined.
  * Largest stable lr of (method, T_w): the largest η of the grid whose cell is stable. It is *censored* when the
    largest η of the grid is stable (the true value is ≥ it: 'above') or no η is (then it is < the smallest
    unstable η: 'below'; with no unstable η either, there is no measurement); censored values are reported, and
    counted at the grid's edge, never dropped.
    (Until 2026-11-26 a run was unstable when its final loss was more than 1 nat above the atlas's best run: that
    rule called Post-LN + Xavier "< 1e-4" although none of its runs diverged and it trains at 1e-3 (issue 24: runs
    are classified, never read off a raw final loss). The committed measurements were re-decided by this rule from
    atlas.json, `atlas.redecide`.)
  * Wortsman et al. 2023's lr sensitivity ("Small-scale proxies for large-scale Transformer training
    instabilities", §2.2, "LR vs. loss curves and learning rate sensitivity"): E_η[min(ℓ(η), ℓ₀) − min_η ℓ(η)], the
    expectation over the log-spaced grid of η, ℓ(η) the final validation loss, ℓ₀ the loss at initialization (a
    diverged run's loss is ∞, so it counts as ℓ₀). Per seed, then the mean over seeds. ℓ₀ here: the training loss
    of the initial parameters on the first training batch (the at-init run's step-1 `train/loss`, computed before
    its update), per method, the mean over seeds.
  * Warmup gain of a method: best mean loss without warmup − best with warmup (nats; > 0: warmup helps), and
    log₁₀ of (largest stable η with warmup / without).
  * Predictors (step 0, `analysis.stability`; the curvature depends on neither η nor T_w): 'gd' 2/λ_max(H) (Cohen et
    al. 2021); 'adam' (2 + 2β₁)/((1 − β₁)·λ_max(P⁻¹H)) = 38/λ_max(P⁻¹H) at β₁ = 0.9 (Cohen et al. 2022); 'update'
    the critical lr of Adam's first step along d = g/(|g| + ε), 2gᵀd/dᵀHd; 'block' 2/max_b λ_max(H_bb), the
    stiffest per-layer block. Each predictor's value per method is the geometric mean over seeds. The measured lr
    it is compared with is the largest stable η *without warmup* (a step-0 quantity can only speak for a run that
    starts at its peak lr).

Predictions and verdicts (`PREDICTIONS`; thresholds here, before the runs):
  P1 'accurate': the predictor's lr is within a factor `WITHIN` = 2 of the measured largest stable lr for at least
     `FRACTION` = half of the methods (factor = predicted / measured; a censored measurement counts as within 2× only
     if the bound is consistent: predicted ≥ measured/2 for 'above', predicted ≤ 2·measured for 'below').
  P2 'ranks': Spearman's ρ between the predictor and the measured largest stable lr (no warmup) ≥ `RHO_CRIT` =
     0.564, the one-sided 5% critical value for n = 10 methods (Zar 1972, Table 1); fewer methods: inconclusive.
  P3 'warmup': methods whose step-0 lr bound is smaller gain more from warmup: Spearman's ρ between the predictor
     and the warmup gain (nats) ≤ −`RHO_CRIT`.
Each is decided per predictor ('gd', 'adam', 'update', 'block'); reproduced / not reproduced / inconclusive (the
claims' vocabulary, experiments/study.py; inconclusive: fewer than `MIN_METHODS` methods with both numbers), and
every outcome is reported. Each reads a 95% interval, not a point (experiments/stats.py; issue 24, added
2026-11-26 after the first reading, which read points): the fraction within 2× its exact binomial (Clopper–Pearson)
interval over the methods, ρ its Fisher-z interval (standard error 1/√(n − 3)); the prediction holds
when the whole interval satisfies its threshold, fails when none of it does, and is inconclusive when the interval
straddles it (more methods decide: the registry's rules, issue 26).
"""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from analysis import outcomes
from experiments import stats, study

WITHIN = 2.0  # a predicted lr "within 2×" of the measured
FRACTION = 0.5  # P1: the fraction of methods that must be within 2×
RHO_CRIT = 0.564  # P2, P3: one-sided 5% critical Spearman ρ for n = 10 (Zar 1972)
MIN_METHODS = 5  # fewer methods with both numbers: inconclusive
PREDICTORS = {
    "gd": "2/λ_max(H)",
    "adam": "38/λ_max(P⁻¹H)",
    "update": "2gᵀd/dᵀHd (Adam's first step)",
    "block": "2/max_b λ_max(H_bb)",
}
PREDICTIONS = {
    "accurate": f"predicted lr within {WITHIN:g}× of the measured largest stable lr for ≥ {FRACTION:.0%} of methods",
    "ranks": f"Spearman ρ(predicted, measured largest stable lr) ≥ {RHO_CRIT}",
    "warmup": f"Spearman ρ(predicted, warmup gain) ≤ −{RHO_CRIT}",
}


@dataclasses.dataclass(frozen=True)
class Point:
  """One training run of the atlas."""

  method: str
  warmup: int
  lr: float
  seed: int
  outcome: str  # 'finished' | 'diverged' | 'crashed'
  loss: Optional[float]  # final validation loss (None if the run has none)
  cls: Optional[str] = None  # its outcome class (analysis/outcomes.py); None: not classified (crashed, no reference)


def _finite(x) -> bool:
  return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def best_loss(points: Sequence[Point]) -> Optional[float]:
  """The lowest final validation loss of any finished run (None if there is none)."""
  losses = [p.loss for p in points if p.outcome == "finished" and _finite(p.loss)]
  return min(losses) if losses else None


def run_stable(p: Point) -> Optional[bool]:
  """Whether one run is stable (module docstring): True if it trained, False if it diverged or collapsed, None if it
  is undertrained, crashed or has no class."""
  if p.outcome == "crashed":
    return None
  if p.outcome == "diverged" or p.cls in (outcomes.DIVERGED, outcomes.COLLAPSED):
    return False
  return True if p.cls == outcomes.TRAINED else None


def cell_stable(points: Sequence[Point]) -> Optional[bool]:
  """False if any run of the cell is unstable, True if every run is stable, None otherwise (module docstring)."""
  flags = [run_stable(p) for p in points]
  if False in flags:
    return False
  return True if flags and all(flags) else None


@dataclasses.dataclass(frozen=True)
class MaxLR:
  """The largest stable lr of one (method, warmup) and how it is censored ('' | 'above' | 'below')."""

  value: float
  censored: str


def max_stable_lr(stable_by_lr: dict[float, Optional[bool]]) -> Optional[MaxLR]:
  """The largest lr whose cell is stable; censored at the grid's edges (module docstring). None without a stable or
  an unstable cell."""
  stable = [lr for lr, s in stable_by_lr.items() if s is True]
  if stable:
    top = max(stable)
    return MaxLR(top, "above" if top == max(stable_by_lr) else "")
  unstable = [lr for lr, s in stable_by_lr.items() if s is False]
  return MaxLR(min(unstable), "below") if unstable else None


def lr_sensitivity(loss_by_lr: dict[float, Optional[float]], loss0: float) -> Optional[float]:
  """Wortsman et al. 2023, §2.2: mean over the grid of min(ℓ(η), ℓ₀) − min_η ℓ(η), a non-finite ℓ(η) counted as ℓ₀.

  Args:
    loss_by_lr: final loss per lr of one seed (None or non-finite: diverged).
    loss0: the loss at initialization.
  """
  if not loss_by_lr:
    return None
  capped = [min(v, loss0) if _finite(v) else loss0 for v in loss_by_lr.values()]
  return float(np.mean(capped) - min(capped))


def warmup_gain(best_without: Optional[float], best_with: Optional[float]) -> Optional[float]:
  """Best loss without warmup − best loss with warmup (nats; > 0: warmup helps)."""
  if not (_finite(best_without) and _finite(best_with)):
    return None
  return float(best_without - best_with)


def rank(x: Sequence[float]) -> np.ndarray:
  """Ranks 1..n of `x`, ties given the average of the ranks they span."""
  x = np.asarray(x, dtype=float)
  order = np.argsort(x, kind="mergesort")
  ranks = np.empty(len(x))
  i = 0
  while i < len(x):
    j = i
    while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
      j += 1
    ranks[order[i : j + 1]] = (i + j) / 2 + 1
    i = j + 1
  return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
  """Spearman's ρ: Pearson's correlation of the average ranks (ties allowed); None if n < 2 or a side is constant."""
  if len(x) != len(y):
    raise ValueError(f"spearman: {len(x)} x values but {len(y)} y values")
  if len(x) < 2:
    return None
  rx, ry = rank(x), rank(y)
  rx, ry = rx - rx.mean(), ry - ry.mean()
  denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
  return None if denom == 0 else float(rx @ ry / denom)


def within(predicted: float, measured: MaxLR, factor: float = WITHIN) -> bool:
  """Whether `predicted` is within `factor` of the measured largest stable lr, censoring respected (P1)."""
  if measured.censored == "above":
    return predicted >= measured.value / factor
  if measured.censored == "below":
    return predicted <= measured.value * factor
  return measured.value / factor <= predicted <= measured.value * factor


def geometric_mean(values: Sequence[Optional[float]]) -> Optional[float]:
  """The geometric mean of the positive finite values (None if there is none)."""
  v = [x for x in values if _finite(x) and x > 0]
  return float(np.exp(np.mean(np.log(v)))) if v else None


def _reading(interval: Optional[tuple[float, float, float]], n: int, **threshold) -> str:
  """A prediction's verdict from its interval (module docstring); fewer than MIN_METHODS methods: inconclusive."""
  if interval is None or n < MIN_METHODS:
    return study.INCONCLUSIVE
  holds = stats.reading(interval, **threshold)
  return study.INCONCLUSIVE if holds is None else study.REPRODUCED if holds else study.NOT_REPRODUCED


def _rho_interval(rho: Optional[float], n: int) -> Optional[tuple[float, float, float]]:
  return None if rho is None or n < 4 else stats.fisher_z_interval(rho, n)


def decide(
    predicted: dict[str, Optional[float]], measured: dict[str, Optional[MaxLR]], gain: dict[str, Optional[float]]
) -> dict:
  """The three predictions (module docstring) for one predictor.

  Args:
    predicted: method -> predicted largest stable lr.
    measured: method -> measured largest stable lr without warmup.
    gain: method -> warmup gain (nats).

  Returns:
    {factors, within_2x, fraction_within, fraction_within_interval, rho_lr, rho_lr_interval, rho_gain, rho_gain_interval,
    n_lr, n_gain, verdicts: {prediction: reproduced|not reproduced|inconclusive}}; an interval is [value, low, high]
    or None.
  """
  both = [m for m in predicted if _finite(predicted[m]) and measured.get(m) is not None]
  factors = {m: predicted[m] / measured[m].value for m in both}
  hits = {m: within(predicted[m], measured[m]) for m in both}
  fraction = sum(hits.values()) / len(both) if both else None
  fraction_interval = stats.proportion_interval(sum(hits.values()), len(both)) if both else None
  rho_lr = spearman([predicted[m] for m in both], [measured[m].value for m in both])
  with_gain = [m for m in predicted if _finite(predicted[m]) and _finite(gain.get(m))]
  rho_gain = spearman([predicted[m] for m in with_gain], [gain[m] for m in with_gain])
  rho_lr_interval, rho_gain_interval = _rho_interval(rho_lr, len(both)), _rho_interval(rho_gain, len(with_gain))
  return dict(
      factors=factors,
      within_2x=hits,
      fraction_within=fraction,
      fraction_within_interval=None if fraction_interval is None else list(fraction_interval),
      rho_lr=rho_lr,
      rho_lr_interval=None if rho_lr_interval is None else list(rho_lr_interval),
      rho_gain=rho_gain,
      rho_gain_interval=None if rho_gain_interval is None else list(rho_gain_interval),
      n_lr=len(both),
      n_gain=len(with_gain),
      verdicts=dict(
          accurate=_reading(fraction_interval, len(both), low=FRACTION),
          ranks=_reading(rho_lr_interval, len(both), low=RHO_CRIT),
          warmup=_reading(rho_gain_interval, len(with_gain), high=-RHO_CRIT),
      ),
  )
