"""The boundary rules (issue 40, stated before study 14's fresh-seed runs; applied to study 11's record as a
re-reading, labelled so), shared by studies 11 (edge.py) and 14 (edge_boundary.py).

Outcome: a run *fails* when it diverges, spikes or ends collapsed (analysis/outcomes.py `combine` of its early and
final classes, read by `failed`); undertrained runs are neither. A cell's failing fraction is k/n over its seeds
with an outcome, with Clopper & Pearson's exact interval: a boundary cell may land either side on another CPU, so a
cell *fails* when k/n ≥ 1/2, a rule on the fraction, not "all seeds alike".
Boundary of a method (without warmup): η_hi the smallest lr whose cell fails, η_lo the largest lr run below it;
η* = √(η_lo·η_hi) and its bracket [η_lo, η_hi]. Open below when the smallest lr run fails, above when none fails.
Test, per predictor (λ₀ from the step-0 analysis, c its threshold): the least-squares slope of log η* on
log(c/λ₀) across methods, with a percentile bootstrap over methods (≥ `MIN_BOUNDARY_METHODS` methods, so the
resampled units are enough for a percentile interval to cover) beside the Student-t interval of the slope and
Spearman's ρ with its Fisher-z interval. η* = c/λ₀ is slope 1 (and intercept 0):
  reproduced      the slope's bootstrap interval excludes 0 and contains 1 (step-0 curvature predicts the boundary
                  as the theory scales it);
  not reproduced  the interval excludes 1 and lies at or below 0 (hi ≤ 0: smaller curvature does not mean a
                  later boundary);
  inconclusive    otherwise, naming the fewest methods whose Student-t slope interval would exclude 0 were the
                  slope and the scatter about the line to hold (`methods_to_decide`: a projection of an OLS
                  standard error, not of a percentile bootstrap), or that the interval excludes both 0 and 1 (curvature orders the
                  boundaries, not as c/λ₀ scales them: more methods do not change that reading).
Warmup (Kalra & Barkeshli 2024 §4): at each method's η_hi, the fraction of warmup-T_w seeds that do not fail
(rescued); Spearman's ρ of the rescued fraction on log λ₀ across methods with its Fisher-z interval: rises (> 0),
falls (< 0) or undecided. Reported, not decisive.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import scipy.stats

from analysis import outcomes
from experiments import stats, study
from experiments.claims.shared.edge_rules import PREDICTORS, threshold

FAIL_FRACTION = 0.5
MIN_BOUNDARY_METHODS = 8
BOUNDARY_THRESHOLDS = {  # the boundary rules in words, as studies 11 and 14 state them in their records
    "outcome": "a run fails if it diverges, spikes (> 1 nat within the warmup + 50 steps) or ends collapsed (within "
    "0.1 nat of the unigram entropy); undertrained runs are neither (analysis/outcomes.py combine, failed)",
    "boundary": "a cell fails at a failing fraction k/n ≥ 1/2 (Clopper–Pearson intervals reported); η_hi the smallest "
    "failing lr, η_lo the largest lr below it, η* = √(η_lo·η_hi)",
    "verdict": "the least-squares slope of log η* on log(c/λ₀) for λ₀ = λ_max(P⁻¹H), c = 38 (a method whose λ₀ ε "
    f"decides is left out), percentile bootstrap over ≥ {MIN_BOUNDARY_METHODS} methods: reproduced if it excludes 0 "
    "and contains 1; not reproduced if it lies at or below 0; else inconclusive, naming the methods a Student-t "
    "interval would need",
    "warmup": "Spearman ρ of the fraction of warmup seeds at η_hi that do not fail on log λ₀, Fisher z: reported, not "
    "decisive",
}


def cell_failing(rows: Sequence[Mapping]) -> Optional[tuple[int, int]]:
  """(k failing, n with an outcome) of one cell's runs (dicts with 'early' and 'final' classes); None if n = 0."""
  read = [outcomes.failed(outcomes.combine(r.get("early"), r.get("final"))) for r in rows]
  read = [y for y in read if y is not None]
  return (sum(read), len(read)) if read else None


def boundaries(runs: Sequence[Mapping], warmup: int = 0) -> dict[str, dict]:
  """Per method, from its runs at `warmup` (rows: method, lr, warmup, seed, early, final): {"cells": {lr: [k, n, lo,
  hi]} (the failing fraction's Clopper–Pearson interval), "lo", "hi" (the bracket, None on an open side), "eta"
  (√(lo·hi), None unless both), "open" ('below', 'above', None, or a sentence when no run has an outcome)}."""
  by: dict[str, dict[float, list]] = {}
  for r in runs:
    if int(r["warmup"]) == warmup:
      by.setdefault(r["method"], {}).setdefault(float(r["lr"]), []).append(r)
  out = {}
  for method, cells in sorted(by.items()):
    read = {lr: cell_failing(rs) for lr, rs in sorted(cells.items())}
    read = {lr: kn for lr, kn in read.items() if kn is not None}
    table = {lr: [k, n, *stats.proportion_interval(k, n)[1:]] for lr, (k, n) in read.items()}
    fails = [lr for lr, (k, n) in read.items() if k / n >= FAIL_FRACTION]
    hi = min(fails) if fails else None
    below = [lr for lr in read if hi is None or lr < hi]
    lo = max(below) if below else None
    opened = None if lo is not None and hi is not None else ("above" if hi is None else "below")
    if not read:
      opened = "nowhere: no run with an outcome"  # every run undertrained: nothing to bracket
    out[method] = {
        "cells": table,
        "lo": lo,
        "hi": hi,
        "eta": math.sqrt(lo * hi) if not opened else None,
        "open": opened,
    }
  return out


def slope_reading(interval: Optional[Sequence[float]]) -> str:
  """The three-way reading of the slope's interval (the rules above)."""
  if interval is None:
    return study.INCONCLUSIVE
  _, lo, hi = interval
  if (lo > 0 or hi < 0) and lo <= 1 <= hi:
    return study.REPRODUCED
  if hi <= 0:
    return study.NOT_REPRODUCED
  return study.INCONCLUSIVE


def _ols_slope(points: Sequence[tuple[float, float]]) -> Optional[float]:
  x = [p[0] for p in points]
  if len(points) < 3 or max(x) == min(x):
    return None
  return stats.slope_interval(x, [p[1] for p in points])[0]


def regression(
    bounds: Mapping[str, Mapping],
    lam0: Mapping[str, Mapping[str, float]],
    predictor: str,
    *,
    beta1: float,
    flagged: Mapping[str, Sequence[str]] = {},
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
  """The test of `predictor` (the rules above): log η* on log(c/λ₀) over the methods with a closed bracket, a λ₀ > 0
  and the predictor not decided by ε; every interval the verdict or the report reads."""
  c = threshold(predictor, beta1)
  points, skipped = {}, {}
  for method, b in bounds.items():
    lam = lam0.get(method, {}).get(predictor)
    if predictor in flagged.get(method, ()):
      skipped[method] = "ε decides λ₀"
    elif lam is None or lam <= 0:
      skipped[method] = "no λ₀ > 0"
    elif b["eta"] is None:
      skipped[method] = f"bracket open {b['open']}"
    else:
      points[method] = (math.log(c / lam), math.log(b["eta"]))
  out = {"predictor": predictor, "threshold": c, "methods": len(points), "points": points, "skipped": skipped}
  pts = list(points.values())
  if len(pts) < 3 or len({x for x, _ in pts}) < 2:
    return {**out, "verdict": study.INCONCLUSIVE}
  x, y = [p[0] for p in pts], [p[1] for p in pts]
  out["slope_t"] = stats.slope_interval(x, y)
  out["intercept"] = float(np.mean(y) - out["slope_t"][0] * np.mean(x))
  rho = float(scipy.stats.spearmanr(x, y).statistic)
  out["spearman"] = stats.fisher_z_interval(rho, len(pts)) if len(pts) >= 4 and math.isfinite(rho) else None
  if len(pts) >= MIN_BOUNDARY_METHODS:
    try:
      out["slope_boot"] = stats.bootstrap_interval([[p] for p in pts], lambda gs: _ols_slope([g[0] for g in gs]),
                                                   n=n_boot, seed=seed)  # fmt: skip
    except ValueError:
      out["slope_boot"] = None
  out["verdict"] = slope_reading(out.get("slope_boot"))
  if out["verdict"] == study.INCONCLUSIVE and out.get("slope_boot"):
    out["methods_to_decide"] = methods_to_decide(x, y)
  return out


def methods_to_decide(x: Sequence[float], y: Sequence[float], most: int = 500) -> Optional[int]:
  """The fewest methods m whose Student-t slope interval, slope ± t_{m−2}·SE·√(n/m) (n the methods measured, SE the
  measured fit's), would exclude 0, were the slope and the scatter about the line and across methods to hold: a
  projection, not a promise (the design that would decide). None when the slope is 0 or more than `most` are needed."""
  slope, lo, hi = stats.slope_interval(x, y)
  n = len(x)
  se = (hi - slope) / scipy.stats.t.ppf(0.5 + stats.LEVEL / 2, n - 2)
  if slope == 0 or se == 0:
    return None
  for m in range(max(n, 3), most + 1):
    if scipy.stats.t.ppf(0.5 + stats.LEVEL / 2, m - 2) * se * math.sqrt(n / m) < abs(slope):
      return m
  return None


def rescue(
    runs: Sequence[Mapping],
    bounds: Mapping[str, Mapping],
    lam0: Mapping[str, Mapping[str, float]],
    predictor: str,
    *,
    warmup: int,
) -> dict:
  """The warmup question (the rules above) at each method's smallest failing lr: {"cells": {method: [rescued, n,
  λ₀, η]}, "spearman": ρ of the rescued fraction on log λ₀ with its Fisher-z interval (None under 4 methods),
  "reading"}. η is the method's one warmup lr where its design ran one (study 14 runs it at study 11's η_hi, fixed
  before its runs), else its bracket's η_hi; a method whose cell without warmup does not fail there has nothing to
  rescue and is left out."""
  cells = {}
  for method, b in bounds.items():
    lam = lam0.get(method, {}).get(predictor)
    warm_lrs = {float(r["lr"]) for r in runs if r["method"] == method and int(r["warmup"]) == warmup}
    lr = warm_lrs.pop() if len(warm_lrs) == 1 else b["hi"]
    if lr is None or lam is None or lam <= 0:
      continue
    cold = cell_failing([r for r in runs if r["method"] == method and not int(r["warmup"]) and float(r["lr"]) == lr])
    if cold is None or cold[0] / cold[1] < FAIL_FRACTION:
      continue
    kn = cell_failing(
        [r for r in runs if r["method"] == method and int(r["warmup"]) == warmup and float(r["lr"]) == lr]
    )
    if kn is not None:
      cells[method] = [kn[1] - kn[0], kn[1], lam, lr]
  out = {"predictor": predictor, "warmup": warmup, "cells": cells, "spearman": None, "reading": "undecided"}
  frac = [c[0] / c[1] for c in cells.values()]
  if len(cells) >= 4 and len(set(frac)) > 1:
    rho = float(scipy.stats.spearmanr(frac, [math.log(c[2]) for c in cells.values()]).statistic)
    out["spearman"] = stats.fisher_z_interval(rho, len(cells))
    _, lo, hi = out["spearman"]
    out["reading"] = "rises with λ₀" if lo > 0 else "falls with λ₀" if hi < 0 else "undecided"
  return out


def row(run: study.Run, warmup: int) -> dict:
  """A grid run's method, lr, warmup, seed, early class (from its training losses) and final class (its record's)."""
  train = [(m["step"], m["loss"]) for m in run.metrics("train") if "loss" in m]
  try:
    early = outcomes.early_class(train, warmup_steps=warmup).cls
  except ValueError:  # nothing logged in the window
    early = None
  return dict(
      method=run.arm,
      lr=float(run.params["optim.learning_rate"]),
      warmup=warmup,
      seed=run.seed,
      early=early,
      final=run.record.get("class"),
  )


BOUNDARY_PRIMARY = "adam"  # the predictor the boundary verdict reads: Cohen et al. 2022's (study 11's statement)


def boundary_measure(
    runs: Sequence[Mapping],
    lam0: Mapping[str, Mapping[str, float]],
    flagged: Mapping[str, Sequence[str]],
    *,
    beta1: float,
) -> dict:
  """The boundary rules over `runs` (rows): every method's bracket without warmup, every predictor's regression, and
  the warmup question at each warmup the runs have; JSON-able once through `study.jsonable`."""
  bounds = boundaries(runs, 0)
  warmups = sorted({int(r["warmup"]) for r in runs if int(r["warmup"])})
  return {
      "bounds": bounds,
      "regressions": {p: regression(bounds, lam0, p, beta1=beta1, flagged=flagged) for p in PREDICTORS},
      "rescue": {str(w): {p: rescue(runs, bounds, lam0, p, warmup=w) for p in PREDICTORS} for w in warmups},
  }


def boundary_verdict(b: Mapping) -> tuple[str, str]:
  """(verdict, reason) of the boundary rules (above) on `BOUNDARY_PRIMARY`'s regression in `b`
  (`boundary_measure`)."""
  r = b["regressions"][BOUNDARY_PRIMARY]
  boot, t, rho = r.get("slope_boot"), r.get("slope_t"), r.get("spearman")
  if not boot:
    return study.INCONCLUSIVE, (
        f"{r['methods']} methods with a closed bracket and a λ₀ not decided by ε (at least {MIN_BOUNDARY_METHODS} "
        f"needed for the bootstrap over methods); skipped: {r['skipped']}"
    )
  numbers = (
      f"slope of log η* on log(c/λ₀), λ₀ = λ_max(P⁻¹H), c = {r['threshold']:.3g}: {stats.fmt(tuple(boot))} (bootstrap "
      f"over {r['methods']} methods; Student-t {stats.fmt(tuple(t))}); Spearman ρ "
      + (stats.fmt(tuple(rho)) if rho else "—")
  )
  verdict = r["verdict"]
  if verdict == study.REPRODUCED:
    return verdict, f"{numbers}: the interval excludes 0 and contains 1, as η* = c/λ₀ says"
  if verdict == study.NOT_REPRODUCED:
    return (
        verdict,
        f"{numbers}: the interval lies at or below 0: a smaller step-0 curvature does not move the boundary up",
    )
  _, lo, hi = boot
  if lo > 0 or hi < 0:
    return verdict, (
        f"{numbers}: the interval excludes 0 and 1: the step-0 curvature orders the boundaries, not as η* = c/λ₀ "
        "scales them (more methods do not change that reading)"
    )
  need = r.get("methods_to_decide")
  side = "excludes 1 (η* does not scale as c/λ₀), but " if hi < 1 or lo > 1 else ""
  decide = (
      f"at least ≈ {need} methods would exclude 0 were the slope and scatter to hold (a projection of the OLS "
      f"standard error; the registry has {r['methods'] + len(r['skipped'])})"
      if need
      else "no number of methods up to 500 would exclude 0 were the slope and scatter to hold: at this scale the "
      "boundary does not depend detectably on λ₀; only a wider spread of λ₀ could decide it, and the one-seed pilot "
      "of init scale and width (docs/design_log.md, study 14) found Adam's λ₀ set by ε in half its arms and spread "
      "past half a decade by one arm alone: the paper scale, untried, is the design left"
  )
  return verdict, f"{numbers}: the interval {side}contains 0; {decide}"


def boundary_summary(b: Mapping) -> dict:
  """The headline numbers of the boundary rules: per predictor the slope's bootstrap interval and its methods, then
  the warmup question's ρ for the primary predictor and λ_max(H)."""
  out = {}
  for p, r in b["regressions"].items():
    if r.get("slope_boot"):
      out[f"slope log η* on log(c/λ₀), {p}"] = f"{stats.fmt(tuple(r['slope_boot']))} ({r['methods']} methods)"
  for w, by_p in b.get("rescue", {}).items():
    for p in (BOUNDARY_PRIMARY, "gd"):
      r = by_p.get(p) or {}
      if r.get("spearman"):
        out[f"warmup {w} rescue at η_hi vs λ₀ ({p}), Spearman ρ"] = stats.fmt(tuple(r["spearman"]))
  return out


def _g(v: Optional[float]) -> str:
  return "—" if v is None else f"{v:g}"


def boundary_tables(b: Mapping) -> list[dict]:
  """The boundary rules' tables: per method its bracket and failing fractions; per predictor its regression; per
  warmup and predictor the rescue reading."""
  methods = {
      "title": "Per method, without warmup: the failing fraction k/n of each lr (collapse-aware: diverged, spiked or "
      "collapsed; Clopper–Pearson 95%), and the boundary bracket [η_lo, η_hi] (a cell fails at k/n ≥ 1/2)",
      "header": ["method", "cells (η: k/n)", "η_lo", "η_hi", "η*"],
      "rows": [
          [method, "; ".join(f"{float(lr):g}: {k}/{n}" for lr, (k, n, *_) in bb["cells"].items()), _g(bb["lo"]),
           _g(bb["hi"]), _g(bb["eta"]) if bb["eta"] else f"open {bb['open']}"]  # fmt: skip
          for method, bb in b["bounds"].items()
      ],
  }
  regs = {
      "title": "Every predictor: least-squares slope of log η* on log(c/λ₀) across methods (η* = c/λ₀ is slope 1), "
      "with the bootstrap over methods (the verdict reads λ_max(P⁻¹H)'s), the Student-t interval and Spearman's ρ "
      "(Fisher z)",
      "header": ["λ₀", "c", "methods", "slope (bootstrap)", "slope (Student-t)", "Spearman ρ", "reading",
                 "methods to exclude 0"],  # fmt: skip
      "rows": [
          [p, round(r["threshold"], 3), r["methods"],
           stats.fmt(tuple(r["slope_boot"])) if r.get("slope_boot") else "—",
           stats.fmt(tuple(r["slope_t"])) if r.get("slope_t") else "—",
           stats.fmt(tuple(r["spearman"])) if r.get("spearman") else "—", r["verdict"],
           r.get("methods_to_decide") or "—"]  # fmt: skip
          for p, r in b["regressions"].items()
      ],
  }
  rescue_rows = {
      "title": "The warmup question at each method's η_hi: the fraction of warmup seeds that do not fail, against "
      "log λ₀ across methods (Spearman's ρ, Fisher z 95%)",
      "header": ["warmup", "λ₀", "methods", "rescued / seeds", "Spearman ρ", "reading"],
      "rows": [
          [int(w), p, len(r["cells"]), f"{sum(k for k, *_ in r['cells'].values())}/"
           f"{sum(c[1] for c in r['cells'].values())}",
           stats.fmt(tuple(r["spearman"])) if r.get("spearman") else "—", r["reading"]]  # fmt: skip
          for w, by_p in b.get("rescue", {}).items()
          for p, r in by_p.items()
      ],
  }
  return [regs, methods, rescue_rows]
