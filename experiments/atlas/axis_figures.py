"""The axis parts' figures, drawn from `experiments.atlas.axis_collect.measure`'s output alone.

width.png     λ_max(H) and λ_max(P⁻¹H) at init against d_model (log-log), one line per parameterization (bars:
              Lanczos residual bounds), µP's flatness band [min, FLAT_RATIO·min] shaded;
depth.png     λ_max(H) at init, and ‖∂ℓ/∂W^{2,L}‖ of the decoder's and the encoder's last layer, against N layers
              per stack (log-log), one line per method, the reference exponents (Xiong et al. 2020, Theorem 1: 0
              Post-LN, −1/2 Pre-LN for the gradient; 0, −1 for λ_max) drawn dashed through each method's first point;
transfer.png  per parameterization, the final validation loss against the peak lr, one line per width (× diverged),
              each width's optimal lr starred;
trace.png     η(t)·λ_max(H)(t) against the step, one line per run, the threshold 2 and each warmup's end marked; a
              second panel η(t)·λ_max(P⁻¹H)(t) against (2 + 2β₁)/(1 − β₁) when the records hold it.
"""

from typing import Optional

import numpy as np

from experiments import report
from experiments.atlas import axis_measures as A
from experiments.report import plt


def _arr(values) -> np.ndarray:
  return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def _label(name: str, slope: Optional[float]) -> str:
  return f"{name} (exponent {slope:+.2f})" if slope is not None else name


def _reference(ax, xs, ys, slope: float, color: str) -> None:
  """A dashed power law of exponent `slope` through the first finite point of (xs, ys)."""
  points = [(x, y) for x, y in zip(xs, ys) if y is not None and y > 0]
  if not points:
    return
  x0, y0 = points[0]
  t = np.geomspace(min(xs), max(xs), 20)
  ax.plot(t, y0 * (t / x0) ** slope, "--", color=color, lw=0.8, alpha=0.7)


@report.redrawn_on_change("width.png")
def width(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for ax, key, name in ((axes[0], "lambda_max", "λ_max(H)"), (axes[1], "p_lambda", "λ_max(P⁻¹H)")):
    for arm, row in m["rows"].items():
      ys, err = _arr(row[key]), _arr(row[key + "_bound"])
      slope = row["slope" if key == "lambda_max" else "p_slope"]
      ax.errorbar(row["widths"], ys, yerr=err, fmt="-o", ms=3, capsize=2, label=_label(arm, slope))
      if arm == "mup" and key == "lambda_max" and np.isfinite(ys).any():
        lo = np.nanmin(ys)
        ax.axhspan(lo, A.FLAT_RATIO * lo, color="tab:green", alpha=0.1, label=f"µP: ≤ {A.FLAT_RATIO:g}× its min")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d_model (d_ff = 4d, heads fixed)")
    ax.set_title(f"{name} at init", fontsize=9)
    ax.legend(fontsize=6)
  fig.suptitle(f"Curvature at init against width — µP: {m['verdicts']['mup_flat']}\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


@report.redrawn_on_change("depth.png")
def depth(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  fig, axes = plt.subplots(1, 3, figsize=(14, 4))
  panels = (
      ("lambda_max", "λ_max(H) at init", A.LAMBDA_SLOPES),
      ("grad_decoder", "‖∂ℓ/∂W^(2,L)‖, decoder's last layer", A.GRAD_SLOPES),
      ("grad_encoder", "‖∂ℓ/∂W^(2,L)‖, encoder's last layer", A.GRAD_SLOPES),
  )
  colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for ax, (key, title, refs) in zip(axes, panels):
    for k, (arm, row) in enumerate(m["rows"].items()):
      color = colors[k % len(colors)]
      ax.plot(row["depths"], _arr(row[key]), "-o", ms=3, color=color, label=_label(arm, row[key + "_slope"]))
      if arm in refs:
        _reference(ax, row["depths"], row[key], refs[arm], color)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N layers per stack (N+N)")
    ax.set_title(title + "\n(dashed: Xiong et al. 2020 Thm 1 exponents)", fontsize=8)
    ax.legend(fontsize=6)
  verdicts = "; ".join(f"{a}: grad {v['grad']}, λ {v['lambda']}" for a, v in m["verdicts"].items())
  fig.suptitle(f"Depth at init — {verdicts}\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


@report.redrawn_on_change("transfer.png")
def transfer(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  arms = list(m["rows"])
  fig, axes = plt.subplots(1, max(1, len(arms)), figsize=(4.2 * max(1, len(arms)), 3.8), squeeze=False, sharey=True)
  finite = [v for r in m["rows"].values() for w in r["widths"] for v in w["losses"] if v is not None]
  top = max(finite) + 0.3 if finite else 1.0
  for ax, arm in zip(axes.flat, arms):
    row = m["rows"][arm]
    for w in row["widths"]:
      (line,) = ax.plot(row["lrs"], _arr(w["losses"]), "-o", ms=3, label=f"d = {w['width']:g}")
      for lr, d in zip(row["lrs"], w["diverged"]):
        if d:
          ax.plot([lr], [top], "x", color=line.get_color(), ms=7)
      if w["optimal_lr"] is not None:
        best = w["losses"][row["lrs"].index(w["optimal_lr"])]
        ax.plot([w["optimal_lr"]], [best], "*", color=line.get_color(), ms=12)
    ax.set_xscale("log")
    ax.set_xlabel("peak lr")
    ax.set_title(
        f"{arm}: optimum shift {shift_text(row)} — {row['verdict'] if arm == 'mup' else 'reported'}", fontsize=8
    )
    ax.legend(fontsize=6)
  axes[0, 0].set_ylabel("final val loss (× diverged; ★ optimum)")
  fig.suptitle(f"Learning-rate transfer across widths (Yang et al. 2022, Fig. 1)\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


def shift_text(row: dict) -> str:
  """The optimum's shift in grid steps: a number, or the interval a censored optimum allows (None: unbounded)."""
  if row["shift"] is None:
    return "—"
  lo, hi = row["shift"]
  if lo is not None and lo == hi:
    return f"{lo:+g} steps"
  return f"[{'−∞' if lo is None else f'{lo:+g}'}, {'+∞' if hi is None else f'{hi:+g}'}] steps"


@report.redrawn_on_change("trace.png")
def trace(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  runs = [(arm, r) for arm, rs in m["rows"].items() for r in rs]
  adam = any(v is not None for _, r in runs for v in r["curves"]["lr_p_lambda"])
  fig, axes = plt.subplots(1, 2 if adam else 1, figsize=(11 if adam else 6, 4), squeeze=False)
  panels = [("lr_lambda", 2.0, "η(t)·λ_max(H)(t)")]
  if adam:
    panels.append(("lr_p_lambda", m["adam_threshold"], "η(t)·λ_max(P⁻¹H)(t)"))
  for ax, (key, threshold, name) in zip(axes.flat, panels):
    for arm, r in runs:
      (line,) = ax.plot(r["curves"]["steps"], _arr(r["curves"][key]), "-o", ms=2, label=arm + (" ×" * r["diverged"]))
      if r["warmup"]:
        ax.axvline(r["warmup"], color=line.get_color(), ls=":", lw=0.8)
    ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"threshold {threshold:g}")
    ax.set_yscale("log")
    ax.set_xlabel("step t (dotted: end of warmup)")
    ax.set_title(name, fontsize=9)
    ax.legend(fontsize=6)
  fig.suptitle(f"Curvature × learning rate through warmup (× in the legend: diverged)\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


DRAW = {"trace": trace, "width": width, "depth": depth, "transfer": transfer}
