"""Study 11's report (experiments/claims/edge.py): its figures (edge.png, boundary.png, trace.png), its summary and
its tables, read from the measurement `measure` stores. The boundary rules' measurement is recomputed from the rows,
λ₀ and flags stored there (`boundary_of`), never stored itself, so a record re-decided by changed rules reads them
afresh; study 11's verdict reads it too.
"""

from typing import Optional

import numpy as np

from analysis import outcomes
from experiments import plots, stats, study
from experiments.claims.shared import edge_figures
from experiments.claims.shared.boundary_rules import boundary_measure, boundary_summary, boundary_tables
from experiments.claims.shared.edge_rules import EARLY, FINAL, PREDICTORS, threshold


def boundary_of(m: dict) -> dict:
  """The boundary rules' measurement of `m`, computed from the rows, λ₀ and flags it stores (never stored itself:
  a record re-decided by changed rules, experiments/reproduce.py --redecide, reads them afresh)."""
  return study.jsonable(boundary_measure(m["runs"], m["lam0"], m["flagged"], beta1=m.get("beta1", 0.9)))


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
