"""Study 11, the atlas's question cell by cell (issue 28): does the curvature at step 0 predict where training breaks,
and where warmup rescues it? Its sweep: configs/claims/edge.py.

The statement tested (the verdict): Cohen et al. 2022 ("Adaptive Gradient Methods at the Edge of Stability",
arXiv:2207.14484, §3 and Eq. 1-2): for Adam with its preconditioner P frozen, the quadratic model is stable iff
η·λ_max(P⁻¹H) < (2 + 2β₁)/(1 − β₁) (38 at β₁ = 0.9), "the preconditioned sharpness" that Adam trains at the edge of.
Read at step 0, it predicts which cells (method, η) without warmup are unstable in their first steps. The verdict
is the `adam` predictor's, on the early outcome, against the lr alone (below: 'beats the lr'); every other predictor,
the final outcome and the warmup question are measured and reported with their own verdicts, none of them decisive.
Kalra & Barkeshli 2024 ("Why Warmup the Learning Rate?", NeurIPS 2024, §4) say warmup's benefit is that it lets the
sharpness fall before the lr peaks, so a cell that fails without warmup can train with it: the rescue scores below.

The unit of evidence is a cell: (method, peak lr η, warmup T_w), run with several seeds. Each run's outcomes are read
by rules stated before the runs (analysis/outcomes.py): the early one (`early_class`: stable or unstable over the
warmup and the `EARLY_WINDOW` steps after it, what a step-0 model can speak for) and the final one (`classify` at
the horizon). A cell is *unstable* early when any seed is, *stable* when every seed is; finally it *fails* when any
seed diverged or collapsed, *trains* when every seed trained, and is undetermined otherwise (an undertrained seed:
neither; not scored).

Predictors: a curvature λ₀ measured at step 0 and the threshold c that its own theory gives. A cell without warmup
is predicted unstable iff η·λ₀ > c, its margin is log(η·λ₀/c):
  gd      λ_max(H)                         c = 2                 gradient descent on the quadratic model (Cohen et
                                                                 al. 2021; analysis/stability.py `max_stable_lr_gd`)
  adam    λ_max(P⁻¹H), P = diag(|g| + ε)   c = (2 + 2β₁)/(1 − β₁)  EMA momentum on the preconditioned quadratic (Cohen
                                                                 et al. 2022; analysis/stability.py, Eq. 2)
  update  dᵀHd / gᵀd along Adam's first    c = 2                 a first step beyond 2gᵀd/dᵀHd raises the quadratic
          update direction d                                     model's loss (`first_step_critical_lr`)
  ggn     λ_max(G), the Gauss–Newton       c = 2                 gradient descent on the GGN's quadratic model
  batch   E_B[g_Bᵀ H_B g_B / ‖g_B‖²]       c = 2                 the batch sharpness that SGD holds at 2/η
                                                                 (Andreyev & Beneventano 2024)
A predictor whose λ₀ is decided by Adam's ε (λ₀ at the run's ε and at 1e-8·RMS(g) differ by more than a factor
`EPS_FACTOR`, analysis/stability.py `eps_decides`, recorded by the step-0 analysis: a branch whose gradient is
exactly zero at init, such as ReZero's, µP's hidden weights) is flagged for that method, whose cells are then not
scored for it.

Scores over the scored cells without warmup, each against its baseline, with intervals by a bootstrap over methods
(a method's cells share one λ₀: the methods are what is independent):
  AUC       the ROC AUC of the margin for the unstable class (experiments/stats.py `roc_auc`), against the lr alone
            (the AUC of log η). Within one method η·λ₀ orders the cells exactly as η does, so a predictor can beat
            the lr only through what λ₀ says across methods: that is the question;
  accuracy  the fraction of cells whose prediction matches, against the majority class's fraction.
Verdicts (thresholds fixed here, before any run): a predictor *beats* a baseline when the interval of its score
minus the baseline's lies above 0 (reproduced), fails when it lies below 0 (not reproduced), and is inconclusive
when it straddles 0 or when fewer than `MIN_METHODS` methods, or cells of only one class, are scored (more methods
decide: the registry's rules).

The grid, per method (`extend`): a factor-2 lr grid, extended upwards by ×2 while no cell without warmup is
unstable and downwards by ÷2 while none is stable (up to `MAX_ROUNDS` extensions), so that every method's boundary
is bracketed; the two cells on either side of each method's boundary (its largest stable and smallest unstable lr)
get `BOUNDARY_SEEDS` = 3 seeds, the others `SEEDS` = 2.

The warmup question, the same way: among the (method, η) whose cell without warmup is unstable (early) or fails
(final), *rescued* when its cell with warmup T_w is stable (early) or trains (final); scored by the AUC of −margin
for the rescued (a smaller overshoot η·λ₀/c predicts a rescue) against the lr alone (the AUC of −log η).
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from analysis import outcomes
from analysis.stability import momentum_stability_threshold
from experiments import report, stats, study
from experiments.claims import figures

PREDICTORS = ("gd", "adam", "update", "ggn", "batch")
EARLY_WINDOW = outcomes.EARLY_WINDOW
MIN_METHODS = 4
SEEDS, BOUNDARY_SEEDS = 2, 3
MAX_ROUNDS = 4  # grid extensions per direction before a method is reported unbracketed
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


# ------------------------------------------------------------------------------------------------ the study over a sweep
# λ₀ of each predictor from a step-0 analysis (analysis/run.py's stability.json and eigenvalues.json), with the
# residual bound where Lanczos gives one (the update sharpness is a Rayleigh quotient and the batch sharpness an
# average over batches: exact numbers, no bound).
def step0_lambdas(stability: Mapping, beta1: float) -> dict[str, dict]:
  """{predictor: {"lambda", "bound"}} of one at-init run's stability.json (a predictor it lacks is absent)."""
  del beta1  # the thresholds are applied by `threshold`; λ₀ itself does not depend on β₁
  s = stability
  out = {}
  if s.get("lambda_max") is not None:
    out["gd"] = {"lambda": s["lambda_max"], "bound": s.get("lambda_max_bound")}
  if s.get("preconditioned_lambda_max") is not None:
    out["adam"] = {"lambda": s["preconditioned_lambda_max"], "bound": s.get("preconditioned_lambda_max_bound")}
  critical = s.get("first_step_critical_lr")
  if critical is not None:  # c/λ₀ = the critical first step 2gᵀd/dᵀHd, so λ₀ = 2/it (0 when the step never overshoots)
    out["update"] = {"lambda": 2.0 / critical if math.isfinite(critical) and critical > 0 else 0.0, "bound": None}
  if s.get("ggn_lambda_max") is not None:
    out["ggn"] = {"lambda": s["ggn_lambda_max"], "bound": s.get("ggn_lambda_max_bound")}
  if s.get("batch_sharpness") is not None:
    out["batch"] = {"lambda": s["batch_sharpness"], "bound": None}
  return out


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
  v = [x for x in values if x is not None and math.isfinite(x)]
  return float(np.median(v)) if v else None


def _max(values: Sequence[Optional[float]], c: float) -> Optional[float]:
  v = [x for x in values if x is not None and math.isfinite(x)]
  return max(v) / c if v else None


def trace(run: study.Run, warmup: int) -> dict:
  """A trace run's records (`train.curvature_every`, analysis/tracking.py metric names) along its steps: λ_max(H),
  λ_max(P_t⁻¹H), η(t)·each, and both λ at the first record at or after the end of the warmup."""
  recs = [r for r in run.metrics("train") if "curvature/lambda_max" in r]
  out = dict(
      method=run.arm,
      lr=float(run.params["optim.learning_rate"]),
      warmup=warmup,
      seed=run.seed,
      steps=[r["step"] for r in recs],
      lambda_=[r["curvature/lambda_max"] for r in recs],
      p_lambda=[r.get("curvature/preconditioned_lambda_max") for r in recs],
      lr_lambda=[r.get("curvature/lr_times_lambda_max") for r in recs],
      lr_p_lambda=[r.get("curvature/lr_times_preconditioned_lambda_max") for r in recs],
  )
  after = [i for i, step in enumerate(out["steps"]) if step >= max(warmup, 1)]
  i = after[0] if after else None
  out["end_of_warmup"] = (
      {"step": out["steps"][i], "lambda": out["lambda_"][i], "p_lambda": out["p_lambda"][i]} if i is not None else {}
  )
  return out


def _cells_of(rows: Sequence[dict]) -> list[Cell]:
  grouped: dict[tuple, list[dict]] = {}
  for r in rows:
    grouped.setdefault((r["method"], r["lr"], r["warmup"]), []).append(r)
  return [
      Cell(m, lr, w, tuple(r["early"] for r in rs if r["early"]), tuple(r["final"] for r in rs if r["final"]))
      for (m, lr, w), rs in grouped.items()
  ]


def measure(results: study.Results) -> dict:
  """The runs read back: per method its step-0 λ₀ (the median over seeds of each predictor; `flagged`: the
  predictors ε decides in any seed), per training run its early and final class, and every score."""
  beta1 = float(results.config.optim.b1) if results.config is not None else 0.9
  crashed = study.crashed(results.runs)
  per_seed: dict[str, dict[int, dict]] = {}
  flagged: dict[str, set] = {}
  rows, traces = [], []
  for run in results.runs:
    if run.outcome == "crashed":
      continue
    if run.params.get("analysis.at_init"):
      stability = run.analysis("stability", 0, required=False) or {}
      per_seed.setdefault(run.arm, {})[run.seed] = step0_lambdas(stability, beta1)
      if stability.get("eps_decides"):
        flagged.setdefault(run.arm, set()).add("adam")
      continue
    warmup = int(run.params["optim.warmup_steps"])
    if run.params.get("train.curvature_every"):
      traces.append(trace(run, warmup))
      continue
    train = [(m["step"], m["loss"]) for m in run.metrics("train") if "loss" in m]
    try:
      early = outcomes.early_class(train, warmup_steps=warmup).cls
    except ValueError:  # nothing logged in the window
      early = None
    rows.append(
        dict(
            method=run.arm,
            lr=float(run.params["optim.learning_rate"]),
            warmup=warmup,
            seed=run.seed,
            early=early,
            final=run.record.get("class"),
        )
    )
  seeds = {method: list(by_seed.values()) for method, by_seed in per_seed.items()}
  lam0 = {
      method: {p: _median([s[p]["lambda"] for s in ss if p in s]) for p in PREDICTORS if any(p in s for s in ss)}
      for method, ss in seeds.items()
  }
  bounds = {
      method: {p: max((s[p]["bound"] or 0.0) for s in ss if p in s) for p in PREDICTORS if any(p in s for s in ss)}
      for method, ss in seeds.items()
  }
  for t in traces:  # Kalra & Barkeshli's mechanism: λ at the end of the warmup against the same seed's λ₀
    at_init = per_seed.get(t["method"], {}).get(t["seed"], {})
    for p, key in (("gd", "lambda"), ("adam", "p_lambda")):
      end = t["end_of_warmup"].get(key)
      lam = (at_init.get(p) or {}).get("lambda")
      t["end_of_warmup"][f"{p}_over_step0"] = end / lam if end is not None and lam else None
    t["max_over_c"] = {
        "gd": _max(t["lr_lambda"], threshold("gd", beta1)),
        "adam": _max(t["lr_p_lambda"], threshold("adam", beta1)),
    }
  cells = _cells_of(rows)
  flags = {m: sorted(f) for m, f in flagged.items()}
  warmups = sorted({c.warmup for c in cells if c.warmup})
  return dict(
      beta1=beta1,
      crashed=crashed,
      runs=rows,
      lam0=lam0,
      bounds=bounds,
      flagged=flags,
      thresholds={p: threshold(p, beta1) for p in PREDICTORS},
      grid=extend(cells),
      traces=traces,
      scores={
          which: {p: score(cells, lam0, p, beta1=beta1, which=which, flagged=flags) for p in PREDICTORS}
          for which in (EARLY, FINAL)
      },
      rescue={
          which: {
              str(w): {
                  p: rescue_score(cells, lam0, p, beta1=beta1, warmup=w, which=which, flagged=flags) for p in PREDICTORS
              }
              for w in warmups
          }
          for which in (EARLY, FINAL)
      },
  )


PRIMARY = ("adam", EARLY, "beats the lr")  # the predictor, outcome and score the verdict reads (module docstring)


def verdict(m: dict) -> study.Verdict:
  """The `adam` predictor's AUC gap over the lr alone on the early outcome (module docstring): reproduced when its
  bootstrap interval lies above 0, not reproduced below, inconclusive across 0 or when too few methods are scored."""
  bad = study.crashed_verdict(m)
  if bad:
    return bad
  predictor, which, name = PRIMARY
  s = m["scores"][which][predictor]
  result = s["verdicts"][name]
  gap = s.get("auc_gap_interval")
  numbers = (
      f"AUC of η·λ_max(P⁻¹H)/c {s.get('auc') if s.get('auc') is None else round(s['auc'], 3)} vs the lr alone "
      f"{s.get('auc_lr') if s.get('auc_lr') is None else round(s['auc_lr'], 3)}; gap "
      + (stats.fmt(tuple(gap)) if gap else "without an interval")
      + f" over {s['cells']} cells of {s['methods']} methods ({s.get('unstable', 0)} unstable)"
  )
  unbracketed = [k for k, g in m["grid"].items() if not g["bracketed"]]
  if result == study.INCONCLUSIVE:
    why = (
        f"fewer than {MIN_METHODS} methods scored, or cells of one class only"
        if gap is None
        else "the interval contains 0"
    )
    more = "; the grid does not bracket " + ", ".join(unbracketed) if unbracketed else ""
    return study.Verdict(
        result, f"{numbers}: {why}{more}. More methods (the registry's rules) or the extension rounds would decide it"
    )
  return study.Verdict(
      result,
      f"{numbers}: step-0 preconditioned sharpness {'beats' if result == study.REPRODUCED else 'is beaten by'} "
      "the lr alone across methods",
  )


MARKERS = {True: ("x", "unstable"), False: ("o", "stable")}


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  """Per predictor, each cell without warmup at its overshoot η·λ₀/c (log x; 1 is the prediction's threshold), one
  row per method, by its early class (× unstable, ○ stable); a method whose λ₀ ε decides is drawn grey."""
  del results
  cells = _cells_of(m.get("runs") or [])
  methods = sorted({c.method for c in cells if not c.warmup})
  if not methods or not m.get("lam0"):
    return []
  fig, axes = figures.plt.subplots(
      1, len(PREDICTORS), figsize=(3.2 * len(PREDICTORS), 2.2 + 0.35 * len(methods)), sharey=True, layout="constrained"
  )
  for ax, p in zip(axes, PREDICTORS):
    c = m["thresholds"][p]
    for row, method in enumerate(methods):
      lam = m["lam0"].get(method, {}).get(p)
      if not lam or lam <= 0:
        continue
      grey = p in m["flagged"].get(method, ())
      for cell in cells:
        y = unstable(cell, EARLY)
        if cell.method != method or cell.warmup or y is None:
          continue
        x = cell.lr * lam / c
        marker, _ = MARKERS[y]
        ax.plot(x, row, marker, color="0.6" if grey else ("C3" if y else "C0"), mfc="none", ms=7)
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    auc = m["scores"][EARLY][p].get("auc")
    ax.set_title(f"{p}: c = {c:.3g}" + (f", AUC {auc:.2f}" if auc is not None else ""), fontsize=9)
    ax.set_xlabel("η·λ₀ / c (no warmup)", fontsize=8)
  axes[0].set_yticks(range(len(methods)), methods, fontsize=8)
  axes[0].set_ylim(-0.6, len(methods) - 0.4)
  handles = [
      figures.plt.Line2D(
          [], [], marker=MARKERS[y][0], ls="", color="C3" if y else "C0", mfc="none", label=MARKERS[y][1]
      )
      for y in (False, True)
  ]
  handles.append(figures.plt.Line2D([], [], marker="o", ls="", color="0.6", mfc="none", label="λ₀ decided by ε"))
  report.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=3, fontsize=8)
  figures.suptitle(fig, "Study 11: does η·λ₀ at step 0 predict the early outcome, cell by cell?", settings)
  return [figures.save(fig, out_dir, "edge.png"), *_trace_figure(m, out_dir, settings)]


def _trace_figure(m: dict, out_dir: str, settings: str) -> list[str]:
  """trace.png: η(t)·λ(t)/c along the trace runs (log y; 1 is the threshold), gd's λ_max(H) and Adam's λ_max(P_t⁻¹H),
  one colour per warmup length (every seed), each warmup's end dotted."""
  traces = [t for t in m.get("traces") or [] if t["steps"]]
  if not traces:
    return []
  warmups = sorted({t["warmup"] for t in traces})
  colors = {w: f"C{i}" for i, w in enumerate(warmups)}
  fig, axes = figures.plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
  for ax, (p, key) in zip(axes, (("gd", "lr_lambda"), ("adam", "lr_p_lambda"))):
    c = m["thresholds"][p]
    for t in traces:
      pts = [(s, v / c) for s, v in zip(t["steps"], t[key]) if v is not None and v > 0]
      if pts:
        ax.plot(*zip(*pts), "-", color=colors[t["warmup"]], alpha=0.8)
    for w in warmups:
      if w:
        ax.axvline(w, color=colors[w], ls=":", lw=1)
    ax.axhline(1.0, color="k", ls="--", lw=0.8)
    ax.set_yscale("log")
    name = "λ_max(H)" if p == "gd" else "λ_max(Pₜ⁻¹H)"
    ax.set(xlabel="step", ylabel=f"η(t)·{name} / c", title=f"{p}: c = {c:.3g}")
  handles = [
      figures.plt.Line2D([], [], color=colors[w], label=f"warmup {w}" + (" (its end dotted)" if w else ""))
      for w in warmups
  ]
  method, lr = traces[0]["method"], traces[0]["lr"]
  report.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=3, fontsize=8)
  figures.suptitle(fig, f"Study 11's trace: {method} at η = {lr:g}, every seed", settings)
  return [figures.save(fig, out_dir, "trace.png")]


def summary(m: dict) -> dict:
  if m.get("crashed") or not m.get("scores"):
    return {}
  s = m["scores"][EARLY]["adam"]
  out = {"cells scored (adam, early)": s["cells"], "methods scored": s["methods"]}
  if s.get("auc") is not None:
    out["AUC η·λ(P⁻¹H)"] = round(s["auc"], 3)
    out["AUC lr alone"] = round(s["auc_lr"], 3)
  if s.get("auc_gap_interval"):
    out["AUC gap, 95% interval"] = stats.fmt(tuple(s["auc_gap_interval"]))
  for w in sorted({t["warmup"] for t in m.get("traces") or []}):
    ts = [t for t in m["traces"] if t["warmup"] == w]
    peak = [t["max_over_c"]["adam"] for t in ts if t["max_over_c"]["adam"] is not None]
    ratio = [t["end_of_warmup"].get("adam_over_step0") for t in ts]
    ratio = [r for r in ratio if r is not None]
    if peak:
      out[f"trace, warmup {w}: max η·λ(P⁻¹H)/c"] = round(max(peak), 3)
    if ratio and w:
      out[f"trace, warmup {w}: λ(P⁻¹H) at its end / λ₀"] = round(float(np.median(ratio)), 3)
  return out


def extensions(results: study.Results) -> dict[str, dict[str, list]]:
  """The next round of the grid (module docstring, `extend`): {method label: {"optim.learning_rate": lrs}} for every
  method whose boundary (early outcome, without warmup) is not bracketed yet; {} when every one is."""
  m = measure(results)
  return {method: {"optim.learning_rate": g["add"]} for method, g in m["grid"].items() if g["add"]}


CLAIM = study.Study(
    name="edge",
    number=11,
    statement=(
        "Adam is unstable at a learning rate η when η·λ_max(P⁻¹H) exceeds (2 + 2β₁)/(1 − β₁): read at step 0, the "
        "preconditioned sharpness predicts, cell by cell across methods, which (method, η) become unstable in their "
        "first steps, better than the learning rate alone."
    ),
    source=(
        "Cohen et al. 2022, Adaptive Gradient Methods at the Edge of Stability, §3, Eq. 1-2; warmup's mechanism: "
        "Kalra & Barkeshli 2024, Why Warmup the Learning Rate?, NeurIPS 2024, §4"
    ),
    paper_scale=(
        "Cohen et al. 2022: full-batch and minibatch Adam on CIFAR-10 networks and Transformers (WikiText-2), "
        "sharpness tracked along training; Kalra & Barkeshli 2024: CIFAR-10 ResNets and WikiText Transformers"
    ),
    thresholds={
        "early outcome": (
            f"unstable if any seed has a non-finite training loss or a spike > {outcomes.SPIKE:g} nat above the running "
            f"minimum within the warmup + {EARLY_WINDOW} steps (analysis/outcomes.py early_class); stable if every seed "
            "has neither"
        ),
        "prediction": "unstable iff η·λ₀ > c: c = (2 + 2β₁)/(1 − β₁) for λ_max(P⁻¹H), 2 for the others",
        "ε": "a method whose λ_max(P⁻¹H) changes by more than the stability module's EPS_FACTOR between ε and "
        "1e-8·RMS(g) is not scored for 'adam'",
        "verdict": (
            "the 'adam' predictor's ROC AUC minus the lr alone's, on cells without warmup, 95% bootstrap interval over "
            f"methods: reproduced above 0, not reproduced below 0, else inconclusive (or fewer than {MIN_METHODS} methods)"
        ),
    },
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    extend=extensions,
    max_rounds=MAX_ROUNDS,
)
