"""The rules of study 11 (experiments/claims/edge.py), fixed before its runs: cells, predictors, scores, the grid.

A cell is (method, peak lr η, warmup T_w), run with several seeds, each run read by analysis/outcomes.py early
(`early_class` over the warmup and `EARLY_WINDOW` steps after it) and finally (`classify`). A cell is unstable early
when any seed is, stable when every seed is; finally it fails when any seed diverged or collapsed, trains when every
seed trained, and is otherwise undetermined (an undertrained seed: not scored).
Predictors (analysis/stability.py): a step-0 curvature λ₀, its theory's threshold c; unstable iff η·λ₀ > c (no warmup):
  gd      λ_max(H), c = 2: gradient descent on the quadratic model (Cohen et al. 2021; `max_stable_lr_gd`)
  adam    λ_max(P⁻¹H), P = diag(|g| + ε), c = (2 + 2β₁)/(1 − β₁): EMA momentum on it (Cohen et al. 2022, Eq. 2)
  update  dᵀHd / gᵀd along Adam's first update d, c = 2: a step beyond 2gᵀd/dᵀHd raises the quadratic model's loss
  ggn     λ_max(G), the Gauss–Newton, c = 2: gradient descent on the GGN's quadratic model
  batch   E_B[g_Bᵀ H_B g_B / ‖g_B‖²], c = 2: the batch sharpness SGD holds at 2/η (Andreyev & Beneventano 2024)
A predictor whose λ₀ Adam's ε decides (`eps_decides`, `EPS_FACTOR`) is not scored for that method.
Scores over the scored cells without warmup, with intervals by a bootstrap over methods (a method's cells share one
λ₀): the ROC AUC of the margin log(η·λ₀/c) for the unstable class against that of log η (within a method η·λ₀ orders
cells as η does: only λ₀ across methods can beat the lr), and the accuracy against the majority class's. A
predictor beats a baseline (reproduced) when the interval of the difference lies above 0, fails below 0, and is
inconclusive when it straddles 0 or fewer than `MIN_METHODS` methods, or cells of one class, are scored. Warmup
alike: a (method, η) whose cell without warmup is unstable (early) or fails is rescued when its cell with warmup is
stable (early) or trains; scored by the AUC of −margin against that of −log η.
The grid, per method (`extend`): a factor-2 lr grid extended by ×2 while no cell without warmup is unstable and by ÷2
while none is stable, for up to `MAX_ROUNDS` rounds, so that every boundary is bracketed; ≥ `SEEDS` = 2 seeds per cell
and `BOUNDARY_SEEDS` = 3 on either side of each boundary (cpu and paper run 3 everywhere; a boundary cell with fewer
is inconclusive). Why the ε flag, and `MAX_ROUNDS`'s history: docs/design_log.md.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Optional

from analysis import outcomes
from analysis.stability import momentum_stability_threshold
from experiments import stats, study

PREDICTORS = ("gd", "adam", "update", "ggn", "batch")
EARLY_WINDOW = outcomes.EARLY_WINDOW
MIN_METHODS = 4
SEEDS, BOUNDARY_SEEDS = 2, 3
MAX_ROUNDS = 7  # grid extensions before a method is reported unbracketed (4 until the cpu run: docs/design_log.md)
EARLY, FINAL = "early", "final"


@dataclasses.dataclass(frozen=True)
class Cell:
  """One cell and its seeds' outcomes: `early` classes (stable / unstable) and `final` classes (analysis/outcomes)."""

  method: str
  lr: float
  warmup: int
  early: tuple[str, ...]
  final: tuple[str, ...]


def extend(cells: Sequence[Cell], which: str = EARLY) -> dict[str, dict]:
  """Per method, from its cells without warmup: {"add": lrs to run next (×2 above the largest while none is
  unstable, ÷2 below the smallest while none is stable), "boundary": the largest stable and the smallest unstable lr
  above it (each needs `BOUNDARY_SEEDS` seeds), "seeds": {lr: seeds it has}, "bracketed": both found}. Cells whose
  outcome is undetermined count as neither."""
  out: dict[str, dict] = {}
  for method in sorted({c.method for c in cells}):
    mine = {c.lr: c for c in cells if c.method == method and not c.warmup}
    labels = {lr: unstable(c, which) for lr, c in mine.items()}
    stable = sorted(lr for lr, y in labels.items() if y is False)
    bad = sorted(lr for lr, y in labels.items() if y is True)
    add = []
    if not bad:
      add.append(max(mine) * 2)
    if not stable:
      add.append(min(mine) / 2)
    above = [lr for lr in bad if stable and lr > stable[-1]]
    boundary = [stable[-1], above[0]] if stable and above else []
    seeds = {lr: len(c.early if which == EARLY else c.final) for lr, c in mine.items()}
    out[method] = {"add": add, "boundary": boundary, "seeds": seeds, "bracketed": bool(stable and bad)}
  return out


def threshold(predictor: str, beta1: float) -> float:
  """c of `predictor` (module docstring): (2 + 2β₁)/(1 − β₁) for 'adam', 2 for the others."""
  if predictor not in PREDICTORS:
    raise ValueError(f"predictor {predictor!r} is not one of {list(PREDICTORS)}")
  return momentum_stability_threshold(beta1) if predictor == "adam" else 2.0


def margin(lr: float, lam0: float, c: float) -> float:
  """log(η·λ₀/c): > 0 predicts unstable. λ₀ ≤ 0 (no positive curvature) predicts stable at every η (−∞)."""
  return math.log(lr * lam0 / c) if lam0 > 0 else -math.inf


def unstable(cell: Cell, which: str) -> Optional[bool]:
  """The cell's label: True unstable (early) / fails (final), False stable / trains, None undetermined."""
  if which == EARLY:
    return None if not cell.early else outcomes.UNSTABLE in cell.early
  if which != FINAL:
    raise ValueError(f"which={which!r} is not one of {[EARLY, FINAL]}")
  if any(c in (outcomes.DIVERGED, outcomes.COLLAPSED) for c in cell.final):
    return True
  return False if cell.final and all(c == outcomes.TRAINED for c in cell.final) else None


def _verdict(interval: Optional[tuple[float, float, float]]) -> str:
  """Reproduced when the whole interval of a gap lies above 0, not reproduced when it lies below, else inconclusive
  (an interval that touches 0 has not shown a gain)."""
  if interval is None:
    return study.INCONCLUSIVE
  _, lo, hi = interval
  return study.REPRODUCED if lo > 0 else study.NOT_REPRODUCED if hi < 0 else study.INCONCLUSIVE


def _auc(rows) -> Optional[float]:
  labels = [y for _, _, y in rows]
  return stats.roc_auc([s for s, _, _ in rows], labels) if 0 < sum(labels) < len(labels) else None


def _auc_lr(rows) -> Optional[float]:
  """The baseline: the AUC of the cells' lr term (log η, or −log η for the rescue) alone."""
  return _auc([(x, None, y) for _, x, y in rows])


def _scored(groups, stat, n_boot, seed):
  """(point, interval or None) of `stat` over the method groups; None where it cannot be read."""
  point = stat([r for g in groups for r in g])
  if point is None or len(groups) < MIN_METHODS:
    return point, None
  try:
    return point, stats.bootstrap_interval(groups, lambda gs: stat([r for g in gs for r in g]), n=n_boot, seed=seed)
  except ValueError:
    return point, None


def _diff(a, b):
  return lambda rows: None if a(rows) is None or b(rows) is None else a(rows) - b(rows)


def score(
    cells: Sequence[Cell],
    lam0: Mapping[str, Mapping[str, float]],
    predictor: str,
    *,
    beta1: float,
    which: str = EARLY,
    flagged: Mapping[str, Sequence[str]] = {},
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
  """How well `predictor` predicts the cells without warmup (module docstring). `lam0[method][predictor]` is λ₀;
  `flagged[method]` the predictors ε decides there. Returns the numbers, their intervals and the two verdicts."""
  c = threshold(predictor, beta1)
  by_method: dict[str, list] = {}
  for cell in cells:
    y = unstable(cell, which)
    lam = lam0.get(cell.method, {}).get(predictor)
    if cell.warmup or y is None or lam is None or predictor in flagged.get(cell.method, ()):
      continue
    by_method.setdefault(cell.method, []).append((margin(cell.lr, lam, c), math.log(cell.lr), y))
  groups = list(by_method.values())
  rows = [r for g in groups for r in g]
  accuracy = lambda rs: sum((m > 0) == y for m, _, y in rs) / len(rs)
  majority = lambda rs: max(sum(y for *_, y in rs), sum(not y for *_, y in rs)) / len(rs)
  out = {"predictor": predictor, "threshold": c, "outcome": which, "methods": len(groups), "cells": len(rows)}
  if not rows:
    return {**out, "verdicts": {"beats the lr": study.INCONCLUSIVE, "beats the majority": study.INCONCLUSIVE}}
  auc_gap, auc_gap_ci = _scored(groups, _diff(_auc, _auc_lr), n_boot, seed)
  acc_gap, acc_gap_ci = _scored(groups, _diff(accuracy, majority), n_boot, seed)
  return {
      **out,
      "unstable": sum(y for *_, y in rows),
      "accuracy": accuracy(rows),
      "majority": majority(rows),
      "auc": _auc(rows),
      "auc_lr": _auc_lr(rows),
      "auc_gap": auc_gap,
      "auc_gap_interval": auc_gap_ci,
      "accuracy_gap": acc_gap,
      "accuracy_gap_interval": acc_gap_ci,
      "verdicts": {"beats the lr": _verdict(auc_gap_ci), "beats the majority": _verdict(acc_gap_ci)},
  }


def rescue_score(
    cells: Sequence[Cell],
    lam0: Mapping[str, Mapping[str, float]],
    predictor: str,
    *,
    beta1: float,
    warmup: int,
    which: str = EARLY,
    flagged: Mapping[str, Sequence[str]] = {},
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
  """The warmup question (module docstring) for warmup length `warmup`: which (method, η) unstable without warmup
  does it rescue, and does a smaller overshoot predict it better than a smaller lr does."""
  c = threshold(predictor, beta1)
  at = {(x.method, x.lr, x.warmup): x for x in cells}
  by_method: dict[str, list] = {}
  for (method, lr, w), cell in at.items():
    warm = at.get((method, lr, warmup))
    lam = lam0.get(method, {}).get(predictor)
    if w or warm is None or lam is None or predictor in flagged.get(method, ()) or unstable(cell, which) is not True:
      continue
    after = unstable(warm, which)
    if after is not None:
      by_method.setdefault(method, []).append((-margin(lr, lam, c), -math.log(lr), not after))
  groups = list(by_method.values())
  rows = [r for g in groups for r in g]
  gap, gap_ci = _scored(groups, _diff(_auc, _auc_lr), n_boot, seed)
  return {
      "predictor": predictor,
      "warmup": warmup,
      "outcome": which,
      "methods": len(groups),
      "unstable without warmup": len(rows),
      "rescued": sum(y for *_, y in rows),
      "auc": _auc(rows) if rows else None,
      "auc_lr": _auc_lr(rows) if rows else None,
      "auc_gap": gap,
      "auc_gap_interval": gap_ci,
      "verdict": _verdict(gap_ci),
  }
