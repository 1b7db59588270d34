"""The axis parts' figures, drawn from `experiments.atlas.axis_collect.measure`'s output alone (or atlas.json's).

width.png     λ_max(H) and λ_max(P⁻¹H) at init against d_model (log-log), one line per parameterization (bars:
              Lanczos residual bounds), µP's flatness band [min, FLAT_RATIO·min] shaded;
depth.png     λ_max(H) at init, and ‖∂ℓ/∂W^{2,L}‖ of the decoder's and the encoder's last layer, against N layers
              per stack (log-log), one line per method, the reference exponents (Xiong et al. 2020, Theorem 1: 0
              Post-LN, −1/2 Pre-LN for the gradient; 0, −1 for λ_max) drawn dashed through each method's first point;
transfer.png  per parameterization, the final validation loss (log axis) against the peak lr, one line per width,
              each width's optimal lr starred; a diverged run is no loss but a × at the axis's clip;
trace.png     η(t)·λ_max(H)(t) against the step, one line per run, the threshold 2 and each warmup's end marked; a
              second panel η(t)·λ_max(P⁻¹H)(t) against (2 + 2β₁)/(1 − β₁) when the records hold it.
A series (a parameterization, a method, a width, a run) has one colour in every panel of its figure. Legends whose
entries differ per panel (fitted exponents) sit under their panel; the others, once under the figure.
"""

from typing import Optional

import matplotlib.ticker
import numpy as np

from experiments import report
from experiments.atlas import axis_measures as A
from experiments.report import plt


def _arr(values) -> np.ndarray:
  return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def _label(name: str, slope: Optional[float]) -> str:
  return f"{name} (exponent {slope:+.2f})" if slope is not None else name


def _colors(names) -> dict:
  """One colour per series, in order: the same in every panel (the colour cycle restarts in each axes)."""
  cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  return {name: cycle[i % len(cycle)] for i, name in enumerate(dict.fromkeys(names))}


def _grid_ticks(ax, values) -> None:
  """x ticks at the grid's values (2, 6, 12, 24 layers; 32 … 256 wide), plainly labelled, on a log axis."""
  ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(sorted(set(values))))
  ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _plain_y(ax) -> None:
  """A log y axis's ticks as plain numbers where it spans few decades (report.plain_log_ticks)."""
  report.plain_log_ticks(ax.yaxis, *ax.get_ylim())


def _legend_below(ax, **kw) -> None:
  ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize=7, frameon=False, **kw)


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
  fig, axes = plt.subplots(1, 2, figsize=(10, 4.8), layout="constrained")
  colors = _colors(m["rows"])
  for ax, key, name in ((axes[0], "lambda_max", "λ_max(H)"), (axes[1], "p_lambda", "λ_max(P⁻¹H)")):
    for arm, row in m["rows"].items():
      ys, err = _arr(row[key]), _arr(row[key + "_bound"])
      slope = row["slope" if key == "lambda_max" else "p_slope"]
      ax.errorbar(row["widths"], ys, yerr=err, fmt="-o", ms=3, capsize=2, color=colors[arm], label=_label(arm, slope))
      if arm == "mup" and key == "lambda_max" and np.isfinite(ys).any():
        lo = np.nanmin(ys)
        ax.axhspan(lo, A.FLAT_RATIO * lo, color=colors[arm], alpha=0.1, label=f"µP: ≤ {A.FLAT_RATIO:g}× its min")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_y(ax)
    _grid_ticks(ax, [w for row in m["rows"].values() for w in row["widths"]])
    ax.set_xlabel("d_model (d_ff = 4d, heads fixed)")
    ax.set_title(f"{name} at init", fontsize=9)
    _legend_below(ax, ncol=2)
  report.suptitle(fig, f"Curvature at init against width — µP: {m['verdicts']['mup_flat']}\n{settings}")
  return report.save_figure(fig, path)


@report.redrawn_on_change("depth.png")
def depth(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  fig, axes = plt.subplots(1, 3, figsize=(14, 5.0), layout="constrained")
  panels = (
      ("lambda_max", "λ_max(H) at init", A.LAMBDA_SLOPES),
      ("grad_decoder", "‖∂ℓ/∂W^(2,L)‖, decoder's last layer", A.GRAD_SLOPES),
      ("grad_encoder", "‖∂ℓ/∂W^(2,L)‖, encoder's last layer", A.GRAD_SLOPES),
  )
  colors = _colors(m["rows"])
  for ax, (key, title, refs) in zip(axes, panels):
    for arm, row in m["rows"].items():
      color = colors[arm]
      ax.plot(row["depths"], _arr(row[key]), "-o", ms=3, color=color, label=_label(arm, row[key + "_slope"]))
      if arm in refs:
        _reference(ax, row["depths"], row[key], refs[arm], color)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_y(ax)
    _grid_ticks(ax, [d for row in m["rows"].values() for d in row["depths"]])
    ax.set_xlabel("N layers per stack (N+N)")
    ax.set_title(title + "\n(dashed: Xiong et al. 2020 Thm 1 exponents)", fontsize=8)
    _legend_below(ax, ncol=2)
  verdicts = "; ".join(f"{a}: grad {v['grad']}, λ {v['lambda']}" for a, v in m["verdicts"].items())
  report.suptitle(fig, f"Depth at init — {verdicts}\n{settings}")
  return report.save_figure(fig, path)


@report.redrawn_on_change("transfer.png")
def transfer(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  arms = list(m["rows"])
  fig, axes = plt.subplots(
      1, max(1, len(arms)), figsize=(4.2 * max(1, len(arms)), 4.4), squeeze=False, sharey=True, layout="constrained"
  )
  finite = [
      v
      for r in m["rows"].values()
      for w in r["widths"]
      for v, d in zip(w["losses"], w["diverged"])
      if not d and v is not None
  ]
  clip = 1.15 * max(finite) if finite else 10.0  # diverged runs: a × here, never a loss on a line
  colors = _colors(w["width"] for r in m["rows"].values() for w in r["widths"])
  for ax, arm in zip(axes.flat, arms):
    row = m["rows"][arm]
    for w in row["widths"]:
      color = colors[w["width"]]
      kept = [np.nan if d or v is None else v for v, d in zip(w["losses"], w["diverged"])]
      ax.plot(row["lrs"], kept, "-o", ms=3, color=color)
      bad = [lr for lr, d in zip(row["lrs"], w["diverged"]) if d]
      ax.plot(bad, [clip] * len(bad), "x", color=color, ms=7, mew=1.5, gid="diverged")
      if w["optimal_lr"] is not None:
        best = w["losses"][row["lrs"].index(w["optimal_lr"])]
        ax.plot([w["optimal_lr"]], [best], "*", color=color, ms=12)
    ax.set_xscale("log")
    ax.set_xlabel("peak lr")
    ax.set_title(
        f"{arm}: optimum shift {shift_text(row)} — {row['verdict'] if arm == 'mup' else 'reported'}", fontsize=8
    )
  report.log_loss_axis(axes[0, 0], finite, top=clip * 1.06)
  axes[0, 0].set_ylabel("final val loss (nats)")
  handles = [plt.Line2D([], [], color=c, marker="o", ms=3, label=f"d = {k:g}") for k, c in colors.items()]
  handles.append(plt.Line2D([], [], color="k", marker="*", ms=9, ls="none", label="optimal lr"))
  if any(d for r in m["rows"].values() for w in r["widths"] for d in w["diverged"]):
    handles.append(
        plt.Line2D([], [], color="k", marker="x", ls="none", label=f"diverged (drawn at {clip:.3g}, clipped)")
    )
  report.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=len(handles))
  report.suptitle(fig, f"Learning-rate transfer across widths (Yang et al. 2022, Fig. 1)\n{settings}")
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
  fig, axes = plt.subplots(1, 2 if adam else 1, figsize=(11 if adam else 6, 4.6), squeeze=False, layout="constrained")
  panels = [("lr_lambda", 2.0, "η(t)·λ_max(H)(t)")]
  if adam:
    panels.append(("lr_p_lambda", m["adam_threshold"], "η(t)·λ_max(P⁻¹H)(t)"))
  labels = [arm + (" (diverged)" if r["diverged"] else "") for arm, r in runs]
  colors = _colors(labels)
  for ax, (key, threshold, name) in zip(axes.flat, panels):
    for label, (_, r) in zip(labels, runs):
      ax.plot(r["curves"]["steps"], _arr(r["curves"][key]), "-o", ms=2, color=colors[label], label=label)
      if r["warmup"]:
        ax.axvline(r["warmup"], color=colors[label], ls=":", lw=0.8)
    ax.axhline(threshold, color="k", ls="--", lw=0.8)
    ax.set_yscale("log")
    _plain_y(ax)
    ax.set_xlabel("step t (dotted: end of warmup)")
    ax.set_title(f"{name} (dashed: threshold {threshold:g})", fontsize=9)
  report.figure_legend(fig, max_cols=3)
  report.suptitle(fig, f"Curvature × learning rate through warmup\n{settings}")
  return report.save_figure(fig, path)


DRAW = {"trace": trace, "width": width, "depth": depth, "transfer": transfer}
