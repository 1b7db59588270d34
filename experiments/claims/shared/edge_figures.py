"""The figures studies 11 (edge.py) and 14 (edge_boundary.py) share: the boundary rules' regression (`boundary`) and
every run by its collapse-aware class (`run_classes`, `CLASS_MARKERS`); `PREDICTOR_NAMES` the predictors in words."""

import math

from analysis import outcomes
from experiments import plots

PREDICTOR_NAMES = {
    "gd": "λ_max(H)",
    "adam": "λ_max(P⁻¹H)",
    "update": "dᵀHd/gᵀd (Adam's 1st update)",
    "ggn": "λ_max(G) (Gauss–Newton)",
    "batch": "batch sharpness",
}


def boundary(b: dict, out_dir: str, headline: str, settings: str, name: str = "boundary.png") -> list[str]:
  """Per predictor, log η* against log(c/λ₀), one point per method with its bracket [η_lo, η_hi] as the error bar,
  the line y = x (η* = c/λ₀) dashed and the least-squares line solid, the slope's bootstrap interval in the title
  (boundary_rules.py)."""
  regs = b.get("regressions") or {}
  if not any(r.get("points") for r in regs.values()):
    return []
  fig, axes = plots.plt.subplots(1, len(regs), figsize=(3.3 * len(regs), 3.9), layout="constrained")
  for ax, (p, r) in zip(axes, regs.items()):
    pts = r.get("points") or {}
    for method, (x, y) in pts.items():
      bb = b["bounds"][method]
      lo, hi = math.log10(bb["lo"]), math.log10(bb["hi"])
      xs = x / math.log(10)
      ax.errorbar(xs, y / math.log(10), yerr=[[y / math.log(10) - lo], [hi - y / math.log(10)]], fmt="o", ms=3,
                  color="C0", capsize=2, lw=0.8)  # fmt: skip
    if pts:
      xs = [x / math.log(10) for x, _ in pts.values()]
      span = [min(xs) - 0.2, max(xs) + 0.2]
      ax.plot(span, span, "k--", lw=0.8, label="η* = c/λ₀")
      if r.get("slope_t"):
        slope, icpt = r["slope_t"][0], r["intercept"] / math.log(10)
        ax.plot(span, [icpt + slope * s for s in span], "C3-", lw=1, label="least squares")
    boot = r.get("slope_boot")
    title = f"{PREDICTOR_NAMES.get(p, p)}, c = {r['threshold']:.3g}\n"
    title += f"slope {boot[0]:.2f} [{boot[1]:.2f}, {boot[2]:.2f}], {r['methods']} methods" if boot else "no interval"
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("log₁₀(c/λ₀) (step 0)", fontsize=8)
  axes[0].set_ylabel("log₁₀ η* (bracket: the error bar)", fontsize=8)
  plots.figure_legend(fig, max_cols=2, fontsize=8)
  plots.headline_title(fig, headline, settings)
  return [plots.save(fig, out_dir, name)]


CLASS_MARKERS = {  # a run's collapse-aware class (analysis/outcomes.py `combine`): marker, colour
    "trained": ("o", "C0"),
    "undertrained": (".", "0.6"),
    "unstable": ("^", "C4"),
    "collapsed": ("s", "C1"),
    "diverged": ("x", "C3"),
    None: ("+", "0.6"),  # a run without a final class (no evaluation at its end): drawn, not read
}


def run_classes(runs: list[dict], out_dir: str, headline: str, settings: str, name: str) -> list[str]:
  """Every run (rows: method, lr, warmup, seed, early, final) at its lr, one row per method and one panel per warmup,
  by its collapse-aware class (`CLASS_MARKERS`; seeds side by side within a cell)."""
  if not runs:
    return []
  warmups = sorted({int(r["warmup"]) for r in runs})
  methods = sorted({r["method"] for r in runs})
  fig, axes = plots.plt.subplots(1, len(warmups), figsize=(5.5 * len(warmups), 1.6 + 0.32 * len(methods)), sharey=True,
                           layout="constrained", squeeze=False)  # fmt: skip
  for ax, w in zip(axes[0], warmups):
    for r in runs:
      if int(r["warmup"]) != w:
        continue
      cls = outcomes.combine(r.get("early"), r.get("final"))
      marker, color = CLASS_MARKERS.get(cls, CLASS_MARKERS[None])
      y = methods.index(r["method"]) + 0.18 * ((int(r["seed"]) % 3) - 1)
      ax.plot(r["lr"], y, marker, color=color, mfc="none" if marker not in ("x", ".") else color, ms=5)
    ax.set_xscale("log")
    ax.set_xlabel("peak η", fontsize=8)
    ax.set_title(f"warmup {w}", fontsize=9)
  axes[0][0].set_yticks(range(len(methods)), methods, fontsize=8)
  axes[0][0].set_ylim(-0.6, len(methods) - 0.4)
  handles = [plots.plt.Line2D([], [], marker=m, ls="", color=c, mfc="none" if m not in ("x", ".") else c, label=k or "no class")
             for k, (m, c) in CLASS_MARKERS.items()]  # fmt: skip
  plots.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=5, fontsize=8)
  plots.headline_title(fig, headline, settings)
  return [plots.save(fig, out_dir, name)]
