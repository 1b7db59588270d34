"""Study 11, the atlas's question cell by cell (issue 28): does the curvature at step 0 predict where training breaks,
and where warmup rescues it? Its sweep: configs/claims/edge.py.

The statement tested (the verdict): Cohen et al. 2022 ("Adaptive Gradient Methods at the Edge of Stability",
arXiv:2207.14484, §3 and Eq. 1-2): for Adam with its preconditioner P frozen, the quadratic model is stable iff
η·λ_max(P⁻¹H) < (2 + 2β₁)/(1 − β₁) (38 at β₁ = 0.9), "the preconditioned sharpness" that Adam trains at the edge of.
Read at step 0 across methods, each method's boundary is η* = c/λ₀. The verdict reads the boundary rules
(experiments/claims/shared/boundary_rules.py: a run fails when it diverges, spikes or collapses; log η* regressed on log(c/λ₀))
on the `adam` predictor; they were stated after these runs were seen (issue 40: issue 28's early outcome could not
see collapse), so this study's verdict is a re-reading, and study 14 (experiments/claims/edge_boundary.py) decides
them on fresh seeds. Issue 28's cell-by-cell AUC scores on the early outcome stay as reported tables.
Kalra & Barkeshli 2024 ("Why Warmup the Learning Rate?", NeurIPS 2024, §4) say warmup's benefit is that it lets the
sharpness fall before the lr peaks, so a cell that fails without warmup can train with it: the rescue scores below.
Their mechanism is measured on the trace runs (one method, one lr, with and without warmup): λ(P⁻¹H) at the longest
warmup's end over the same seed's λ₀, for both, so the run without warmup is the control (reported, not decided).

The rules (cells and their early and final outcomes, the predictors and their thresholds, the scores against the lr
alone and the majority class, the warmup-rescue question and the adaptive grid) are in
experiments/claims/shared/edge_rules.py and boundary_rules.py, fixed before the runs; this module reads a sweep into them (`measure`), decides
(`verdict`), draws (`figure`) and names the next round of the grid (`extensions`).
"""

import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from analysis import outcomes
from experiments import plots, stats, study
from experiments.claims.shared import edge_figures
from experiments.claims.shared.boundary_rules import (
    BOUNDARY_THRESHOLDS,
    boundary_measure,
    boundary_summary,
    boundary_tables,
    boundary_verdict,
    row,
)
from experiments.claims.shared.edge_rules import (
    EARLY,
    FINAL,
    MAX_ROUNDS,
    PREDICTORS,
    Cell,
    extend,
    rescue_score,
    score,
    threshold,
)


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
  if critical is None and s.get("update_sharpness") is not None and s["update_sharpness"] <= 0:
    critical = math.inf  # dᵀHd ≤ 0: the critical lr is ∞, which stability.json (strict JSON) holds as null
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


def _is_cell(run: study.Run) -> bool:
  """A training run of the grid: not an at-init analysis, not a trace, not crashed."""
  return (
      run.outcome != "crashed"
      and not run.params.get("analysis.at_init")
      and not run.params.get("train.curvature_every")
  )


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
      for predictor, flag in (("adam", "eps_decides"), ("update", "update_eps_decides")):
        if stability.get(flag):
          flagged.setdefault(run.arm, set()).add(predictor)
      continue
    warmup = int(run.params["optim.warmup_steps"])
    if run.params.get("train.curvature_every"):
      traces.append(trace(run, warmup))
      continue
    rows.append(row(run, warmup))
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


def boundary_of(m: dict) -> dict:
  """The boundary rules' measurement of `m`, computed from the rows, λ₀ and flags it stores (never stored itself:
  a record re-decided by changed rules, experiments/reproduce.py --redecide, reads them afresh)."""
  return study.jsonable(boundary_measure(m["runs"], m["lam0"], m["flagged"], beta1=m.get("beta1", 0.9)))


REREADING = (
    "A re-reading of seeds 0–2 by the boundary rules (experiments/claims/shared/boundary_rules.py), stated after these runs "
    "were seen (issue 40); study 14 (edge_boundary) decides the same rules on fresh seeds 3–5, and its verdict is "
    "the one reported"
)


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  """The boundary rules on the `adam` predictor (edge_rules.boundary_verdict), said as a re-reading (`REREADING`)."""
  result, reason = boundary_verdict(boundary_of(m))
  return study.Verdict(result, f"{REREADING}. {reason}")


def _lrs(g: dict) -> list[float]:
  """The lrs a method's grid ran (`extend`'s "seeds" keys: strings once claim.json is read back), ascending."""
  return sorted(float(lr) for lr in g.get("seeds", {}))


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  """edge.png: per predictor, each run without warmup at its overshoot η·λ₀/c (log x; 1 is the prediction's
  threshold), one row per method, the seeds side by side, by its collapse-aware class (edge_figures.CLASS_MARKERS:
  trained, undertrained, unstable, collapsed, diverged); a method whose λ₀ ε decides is drawn grey. A row with λ₀ ≤ 0
  or without a λ₀ says so in words. boundary.png: the boundary rules' regression (figures.boundary). trace.png."""
  del results
  runs = [r for r in m.get("runs") or [] if not int(r["warmup"])]
  methods = sorted({r["method"] for r in runs})
  if not methods or not m.get("lam0"):
    return []
  fig, axes = plots.plt.subplots(
      1, len(PREDICTORS), figsize=(3.2 * len(PREDICTORS), 2.2 + 0.35 * len(methods)), sharey=True, layout="constrained"
  )
  for ax, p in zip(axes, PREDICTORS):
    c = threshold(p, m.get("beta1", 0.9))
    for i, method in enumerate(methods):
      lam = m["lam0"].get(method, {}).get(p)
      if lam is None or lam <= 0:
        note = "no λ₀" if lam is None else f"λ₀ = {lam:.2g} ≤ 0: every η predicted stable"
        ax.text(0.03, i, note, transform=ax.get_yaxis_transform(), fontsize=7, color="0.35", va="center")
        continue
      grey = p in m["flagged"].get(method, ())
      for r in runs:
        if r["method"] != method:
          continue
        cls = outcomes.combine(r.get("early"), r.get("final"))
        marker, color = edge_figures.CLASS_MARKERS.get(cls, edge_figures.CLASS_MARKERS[None])
        color = "0.6" if grey else color
        ax.plot(r["lr"] * lam / c, i + 0.18 * ((int(r["seed"]) % 3) - 1), marker, color=color,
                mfc="none" if marker not in ("x", ".") else color, ms=5)  # fmt: skip
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_title(f"{p}: c = {c:.3g}", fontsize=9)
    ax.set_xlabel("η·λ₀ / c (no warmup)", fontsize=8)
  axes[0].set_yticks(range(len(methods)), methods, fontsize=8)
  axes[0].set_ylim(-0.6, len(methods) - 0.4)
  handles = [
      plots.plt.Line2D([], [], marker=mk, ls="", color=col, mfc="none" if mk not in ("x", ".") else col, label=k)
      for k, (mk, col) in edge_figures.CLASS_MARKERS.items()
      if k is not None
  ]
  handles.append(plots.plt.Line2D([], [], marker="o", ls="", color="0.6", mfc="none", label="λ₀ decided by ε"))
  plots.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=6, fontsize=8)
  plots.headline_title(fig, "Study 11: each run at its step-0 overshoot η·λ₀/c, by its collapse-aware class", settings)
  headline = "Study 11 (re-reading of seeds 0–2): log η* against log(c/λ₀), one point per method"
  return [
      plots.save(fig, out_dir, "edge.png"),
      *edge_figures.boundary(boundary_of(m), out_dir, headline, settings),
      *_trace_figure(m, out_dir, settings),
  ]


def _trace_figure(m: dict, out_dir: str, settings: str) -> list[str]:
  """trace.png: η(t)·λ(t)/c along the trace runs (log y; 1 is the threshold), gd's λ_max(H) and Adam's λ_max(P_t⁻¹H),
  one colour per warmup length (every seed), each warmup's end dotted."""
  traces = [t for t in m.get("traces") or [] if t["steps"]]
  if not traces:
    return []
  warmups = sorted({t["warmup"] for t in traces})
  colors = {w: f"C{i}" for i, w in enumerate(warmups)}
  fig, axes = plots.plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
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
      plots.plt.Line2D([], [], color=colors[w], label=f"warmup {w}" + (" (its end dotted)" if w else ""))
      for w in warmups
  ]
  method, lr = traces[0]["method"], traces[0]["lr"]
  plots.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=3, fontsize=8)
  plots.headline_title(fig, f"Study 11's trace: {method} at η = {lr:g}, every seed", settings)
  return [plots.save(fig, out_dir, "trace.png")]


def summary(m: dict) -> dict:
  if m.get("crashed") or not m.get("scores"):
    return {}
  out = boundary_summary(boundary_of(m))
  longest = max((t["warmup"] for t in m.get("traces") or []), default=0)
  for w in sorted({t["warmup"] for t in m.get("traces") or []}):
    ts = [t for t in m["traces"] if t["warmup"] == w]
    peak = [t["max_over_c"]["adam"] for t in ts if t["max_over_c"]["adam"] is not None]
    ratio = [r for r in (_ratio_at(t, longest) for t in ts) if r is not None]
    if peak:
      out[f"trace, warmup {w}: max η·λ(P⁻¹H)/c"] = round(max(peak), 3)
    if ratio and longest:  # with and without warmup at the same step: what warmup itself changes (docstring)
      out[f"trace, warmup {w}: λ(P⁻¹H) at step {longest} / λ₀"] = (
          f"{np.median(ratio):.3g} (seeds {min(ratio):.3g}–{max(ratio):.3g})"
      )
  return out


def _ratio_at(t: dict, step: int) -> Optional[float]:
  """A trace's λ(P⁻¹H) at its first record at or after `step`, over the same seed's λ₀ (recovered from its end-of-
  warmup record and ratio); None without them. Read at the longest warmup's end for every trace, so that the trace
  without warmup is the control of Kalra & Barkeshli 2024's mechanism: the sharpness may fall as Adam's v̂ grows
  whether or not η warms up."""
  end = t.get("end_of_warmup") or {}
  if not end.get("p_lambda") or not end.get("adam_over_step0"):
    return None
  at = [p for s, p in zip(t["steps"], t["p_lambda"]) if s >= step and p is not None]
  return at[0] / (end["p_lambda"] / end["adam_over_step0"]) if at else None


PREDICTOR_NAMES = {
    "gd": "λ_max(H)",
    "adam": "λ_max(P⁻¹H)",
    "update": "dᵀHd/gᵀd (Adam's first update)",
    "ggn": "λ_max(G) (Gauss–Newton)",
    "batch": "batch sharpness",
}


def _interval(v) -> str:
  return stats.fmt(tuple(v)) if v else "—"


def _lr_range(g: dict) -> str:
  """'lowest – highest' of a method's lrs run (`_lrs`)."""
  lrs = _lrs(g)
  return f"{lrs[0]:g} – {lrs[-1]:g}" if lrs else "—"


def _r(v) -> Optional[float]:
  return None if v is None else round(v, 3)


def tables(m: dict) -> list[dict]:
  """The report's tables below the headline (Study.tables): every predictor on both outcomes against both baselines,
  the warmup question per predictor, and per method its λ₀ and where the grid put its boundary."""
  if m.get("crashed") or not m.get("scores"):
    return []
  scores = {
      "title": "Issue 28's reading, reported, not decided (its early outcome cannot see collapse): every predictor on "
      "the cells without warmup (η·λ₀ > c predicts unstable; gaps with percentile bootstrap intervals over methods)",
      "header": ["outcome", "λ₀", "c", "methods", "cells", "unstable", "AUC", "AUC lr alone", "AUC gap",
                 "vs the lr", "accuracy", "majority class", "accuracy gap", "vs the majority"],  # fmt: skip
      "rows": [
          [which, PREDICTOR_NAMES[p], _r(s["threshold"]), s["methods"], s["cells"], s.get("unstable", 0),
           _r(s.get("auc")), _r(s.get("auc_lr")), _interval(s.get("auc_gap_interval")), s["verdicts"]["beats the lr"],
           _r(s.get("accuracy")), _r(s.get("majority")), _interval(s.get("accuracy_gap_interval")),
           s["verdicts"]["beats the majority"]]  # fmt: skip
          for which in (EARLY, FINAL)
          for p, s in m["scores"][which].items()
      ],
  }
  rescue = {
      "title": "The warmup question: of the (method, η) unstable (early) or failing (final) without warmup, those "
      "the warmup rescues; does a smaller overshoot η·λ₀/c predict them better than a smaller lr (AUC gap, 95% "
      "interval over methods)?",
      "header": ["outcome", "warmup", "λ₀", "methods", "cells", "rescued", "AUC", "AUC lr alone", "AUC gap", "verdict"],
      "rows": [
          [which, int(w), PREDICTOR_NAMES[p], r["methods"], r["unstable without warmup"], r["rescued"], _r(r["auc"]),
           _r(r["auc_lr"]), _interval(r.get("auc_gap_interval")), r["verdict"]]  # fmt: skip
          for which in (EARLY, FINAL)
          for w, by_p in m["rescue"].get(which, {}).items()
          for p, r in by_p.items()
      ],
  }
  methods = {
      "title": "Per method: λ₀ at step 0 (median over seeds; float64, the runs' own first batch), the predictors ε "
      "decides (not scored), and the early boundary without warmup (largest stable η → smallest unstable η)",
      "header": ["method", *(PREDICTOR_NAMES[p] for p in PREDICTORS), "ε decides", "lrs run", "boundary"],
      "rows": [
          [method, *(_r(m["lam0"].get(method, {}).get(p)) for p in PREDICTORS),
           ", ".join(m["flagged"].get(method, [])) or "—",
           _lr_range(g),
           " → ".join(f"{lr:g}" for lr in g["boundary"]) if g["boundary"] else "not bracketed"]  # fmt: skip
          for method, g in m["grid"].items()
      ],
  }
  return [*boundary_tables(boundary_of(m)), scores, rescue, methods]


def extensions(results: study.Results) -> dict[str, dict[str, list]]:
  """The next round of the grid (module docstring, `extend`): {method label: {"optim.learning_rate": lrs}} for every
  method whose boundary (early outcome, without warmup) is not bracketed yet; {} when every one is."""
  rows = [row(run, int(run.params["optim.warmup_steps"])) for run in results.runs if _is_cell(run)]
  grid = extend(_cells_of(rows))  # the grid's cells only: no analysis read, no score bootstrapped
  return {method: {"optim.learning_rate": g["add"]} for method, g in grid.items() if g["add"]}


CLAIM = study.Study(
    name="edge",
    number=11,
    statement=(
        "Adam is unstable at η when η·λ_max(P⁻¹H) exceeds (2 + 2β₁)/(1 − β₁): read at step 0, the preconditioned "
        "sharpness predicts each method's boundary η* = c/λ₀ (slope 1 of log η* on log(c/λ₀) across methods), where "
        "a run fails when it diverges, spikes or collapses to the unigram plateau."
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
        "re-reading": "the boundary rules (experiments/claims/shared/boundary_rules.py) were stated after these runs were seen "
        "(issue 40); study 14 (edge_boundary) applies them to fresh seeds, and its verdict is the one reported",
        **BOUNDARY_THRESHOLDS,
        "reported": "the other predictors' slopes, the warmup question (Spearman ρ of the rescued fraction at η_hi on "
        "log λ₀), and issue 28's early-outcome AUC scores",
    },
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    headline=("slope log η* on log(c/λ₀), gd", "slope log η* on log(c/λ₀), adam"),
    tables=tables,
    extend=extensions,
    max_rounds=MAX_ROUNDS,
    figures_from_record=True,
)
