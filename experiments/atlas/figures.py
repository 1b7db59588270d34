"""The atlas's figures, drawn from `experiments.atlas.collect.measure`'s output alone (or from atlas.json's
`measured`: the warmups' keys, strings there, are read back as numbers).

loss_vs_lr.png          final validation loss (log axis) against the peak lr, one panel per method, without and with
                        warmup (mean over seeds, every seed's point), the collapse band (the targets' unigram entropy ± δ) shaded,
                        the Adam and GD step-0 predictions as vertical lines. A run that diverged, ended without a
                        finite loss or above its method's loss at init ℓ₀ is no loss on the curve: it is a × at the
                        axis's clip (`clip_loss`, a little above the largest ℓ₀), and a lr where any seed did so has no
                        mean point;
predicted_vs_measured.png  per predictor, predicted against measured largest stable lr (no warmup), log-log, the
                        y = x line and the 2× band; a censored measurement drawn as ▲ (≥) or ▼ (<);
warmup_gain.png         per predictor, the warmup gain (nats) against the predicted lr.
The last two mark each method with its own colour (the same in every panel and in both figures) and name it in one
legend, never in text beside its point (ten methods overprint); points that coincide are drawn as concentric rings.
"""

import math
import os
from typing import Optional

import matplotlib.patches
import matplotlib.ticker
import numpy as np

from experiments import report
from experiments.atlas import measures as M
from experiments.report import plt

COLORS = {0: "tab:red", 1: "tab:blue"}  # the first and any later warmup
CLIP_ABOVE_LOSS0 = 1.15  # the loss axis stops this factor above the largest loss at init
DODGE_DECADES = 0.05  # the warmups' × at one lr sit this far apart in log10(lr)
RING_PX = 7.0  # points closer than this (display pixels) are drawn as concentric rings


def _finite(x) -> bool:
  return report.finite(x)


def _no_minor_labels(ax) -> None:
  """Log axes spanning about a decade label their minor ticks, which then overlap: keep the decades only."""
  for axis in (ax.xaxis, ax.yaxis):
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _runs(row: dict) -> dict:
  """{warmup (a number): its runs}, sorted: measure's int keys, or atlas.json's strings."""
  return dict(sorted((float(k) if "." in str(k) else int(k), w) for k, w in row["runs"].items()))


def diverged(loss, outcome: str, loss0: Optional[float]) -> bool:
  """Whether a run is drawn as diverged, not as a loss: it diverged, or finished without a finite loss or above
  the loss at init (the plateau of a broken run, thousands of nats, is no point of a loss curve)."""
  if outcome == "diverged":
    return True
  if outcome != "finished":  # crashed: no result at all
    return False
  return not _finite(loss) or (_finite(loss0) and loss > loss0)


def clip_loss(m: dict) -> float:
  """The top of the loss axis: `CLIP_ABOVE_LOSS0` × the largest loss at init (without one, above the largest loss
  drawn)."""
  loss0 = [r["loss0"] for r in m["methods"].values() if _finite(r.get("loss0"))]
  if loss0:
    return CLIP_ABOVE_LOSS0 * max(loss0)
  kept = [
      v
      for r in m["methods"].values()
      for w in r["runs"].values()
      for vs, outs in zip(w["losses"], w["outcomes"])
      for v, o in zip(vs, outs)
      if not diverged(v, o, None) and _finite(v)
  ]
  return CLIP_ABOVE_LOSS0 * max(kept) if kept else 10.0


def method_colors(methods) -> dict:
  """One colour per method, in the atlas's order (tab10, then tab20 past ten)."""
  methods = list(methods)
  cmap = plt.get_cmap("tab10" if len(methods) <= 10 else "tab20")
  return {name: cmap(i % cmap.N) for i, name in enumerate(methods)}


@report.redrawn_on_change("loss_vs_lr.png")
def loss_vs_lr(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  methods = list(m["methods"])
  cols = min(5, max(1, len(methods)))
  rows = math.ceil(len(methods) / cols)
  fig, axes = plt.subplots(
      rows, cols, figsize=(max(3.2 * cols, 8.0), 2.8 * rows + 1.4), squeeze=False, sharey=True, layout="constrained"
  )
  h = m.get("unigram_entropy")
  clip = clip_loss(m)
  drawn = []  # every loss on a curve or a seed's dot
  warmups = []
  for ax, method in zip(axes.flat, methods):
    row = m["methods"][method]
    loss0 = row.get("loss0")
    for i, (warmup, w) in enumerate(_runs(row).items()):
      color = COLORS[min(i, 1)]
      warmups.append((warmup, color))
      mean, bad = [], []
      for lr, losses, outcomes in zip(w["lrs"], w["losses"], w["outcomes"]):
        kept = [v for v, o in zip(losses, outcomes) if o == "finished" and not diverged(v, o, loss0)]
        fell = any(diverged(v, o, loss0) for v, o in zip(losses, outcomes))
        mean.append(np.mean(kept) if kept and not fell else np.nan)  # a lr any seed diverged at has no mean
        drawn += kept
        ax.plot([lr] * len(kept), kept, ".", color=color, alpha=0.4)
        if fell:
          bad.append(lr * 10 ** (DODGE_DECADES * (2 * i - 1)))
      ax.plot(w["lrs"], mean, "-o", color=color, ms=3)
      ax.plot(bad, [clip] * len(bad), "x", color=color, ms=7, mew=1.5, gid="diverged")
    if _finite(h):
      ax.axhspan(h - m["margin"], h + m["margin"], color="gray", alpha=0.25, lw=0)
    for name, style in (("adam", ":"), ("gd", "-.")):
      p = row["predicted"].get(name)
      if _finite(p):
        ax.axvline(p, color="k", ls=style, lw=0.8)
    ax.set_xscale("log")
    _no_minor_labels(ax)
    title = f"{method} (ℓ₀ {loss0:.2f})" if _finite(loss0) else method
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("peak lr")
  for ax in axes.flat[len(methods) :]:
    ax.axis("off")
  report.log_loss_axis(axes[0, 0], drawn, top=clip * 1.06)
  for ax in axes[:, 0]:
    ax.set_ylabel("final val loss (nats)")
  handles = [
      plt.Line2D([], [], color=c, marker="o", ms=3, label=f"warmup {k:g} (mean over seeds; dots: seeds)")
      for k, c in dict(warmups).items()
  ]
  handles += [
      plt.Line2D(
          [], [], color="k", marker="x", ls="none", label=f"diverged or above ℓ₀ (drawn at {clip:.3g}, clipped)"
      ),
  ]
  if _finite(h):
    handles.append(
        matplotlib.patches.Patch(
            color="gray", alpha=0.25, label=f"collapsed: unigram entropy {h:.3g} ± {m['margin']:g} nats"
        )
    )
  handles += [
      plt.Line2D([], [], color="k", ls=style, lw=0.8, label=M.PREDICTORS[name])
      for name, style in (("adam", ":"), ("gd", "-."))
  ]
  report.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=3)
  report.suptitle(fig, f"Final validation loss vs peak lr\n{settings}")
  return report.save_figure(fig, path)


def _method_points(ax, points: list[tuple[str, float, float, str]], colors: dict) -> None:
  """Each (method, x, y, marker) as a marker of its method's colour (its gid the method's name); points within
  `RING_PX` of each other on screen are drawn as concentric rings, the first largest, so none hides another. The
  axes' scales and limits must be set."""
  groups: list[list[tuple]] = []
  for point in points:
    xy = ax.transData.transform((point[1], point[2]))
    for group in groups:
      if np.hypot(*(xy - group[0][0])) < RING_PX:
        group.append((xy, point))
        break
    else:
      groups.append([(xy, point)])
  for group in groups:
    for j, (_, (method, x, y, marker)) in enumerate(group):
      size = 6.0 + 3.5 * (len(group) - 1 - j)
      ax.plot([x], [y], marker, color=colors[method], ms=size, mec="white", mew=0.6, zorder=3 + j, gid=method)


def _method_legend(fig, colors: dict, extra: list) -> None:
  handles = [plt.Line2D([], [], color=c, marker="o", ls="none", ms=6, label=name) for name, c in colors.items()]
  handles += extra
  report.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=7)


def _rho(d: dict, key: str) -> str:
  """'ρ = r [lo, hi]' (its 95% interval where the record has one; atlas.json's before 2026-11-26 has none)."""
  rho, interval = d.get(key), d.get(key + "_interval")
  if rho is None:
    return "ρ undefined"
  return f"ρ = {rho:.2f}" + (f" [{interval[1]:.2f}, {interval[2]:.2f}]" if interval else "")


def _log_limits(values: list[float], pad: float) -> tuple[float, float]:
  return min(values) / pad, max(values) * pad


@report.redrawn_on_change("predicted_vs_measured.png")
def predicted_vs_measured(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  names = list(M.PREDICTORS)
  colors = method_colors(m["methods"])
  fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 4.6), squeeze=False, layout="constrained")
  for ax, name in zip(axes.flat, names):
    points = []
    for method, row in m["methods"].items():
      w = _runs(row).get(0)
      p = row["predicted"].get(name)
      if not (w and w["max_lr"] and _finite(p)):
        continue
      points.append((method, p, w["max_lr"], {"above": "^", "below": "v"}.get(w["max_lr_censored"], "o")))
    ax.set_xscale("log")
    ax.set_yscale("log")
    if points:
      lo, hi = _log_limits([v for _, x, y, _ in points for v in (x, y)], 3.0)
      t = np.geomspace(lo, hi, 10)
      ax.plot(t, t, "k-", lw=0.7)
      ax.fill_between(t, t / M.WITHIN, t * M.WITHIN, color="gray", alpha=0.15, lw=0)
      ax.set_xlim(lo, hi)
      ax.set_ylim(lo, hi)
      _method_points(ax, points, colors)
    _no_minor_labels(ax)
    ax.set_title(f"{M.PREDICTORS[name]}\n{_rho(m['predictors'][name], 'rho_lr')}", fontsize=8)
    ax.set_xlabel("predicted max lr (step 0)")
  axes[0, 0].set_ylabel("measured max stable lr, no warmup")
  extra = [
      plt.Line2D([], [], color="gray", marker="^", ls="none", label="≥ (the grid's largest lr was stable)"),
      plt.Line2D([], [], color="gray", marker="v", ls="none", label="< (no grid lr was stable)"),
      plt.Line2D([], [], color="k", lw=0.7, label="predicted = measured"),
      matplotlib.patches.Patch(color="gray", alpha=0.15, label=f"within {M.WITHIN:g}×"),
  ]
  _method_legend(fig, colors, extra)
  report.suptitle(fig, f"Step-0 predictions vs measured largest stable lr\n{settings}")
  return report.save_figure(fig, path)


@report.redrawn_on_change("warmup_gain.png")
def warmup_gain(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  names = list(M.PREDICTORS)
  colors = method_colors(m["methods"])
  fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 4.4), squeeze=False, layout="constrained")
  for ax, name in zip(axes.flat, names):
    points = [
        (method, row["predicted"].get(name), row.get("warmup_gain"), "o")
        for method, row in m["methods"].items()
        if _finite(row["predicted"].get(name)) and _finite(row.get("warmup_gain"))
    ]
    ax.axhline(0, color="gray", lw=0.6)
    ax.set_xscale("log")
    if points:
      low, high = _log_limits([x for _, x, _, _ in points], 1.6)
      ax.set_xlim(low, high)
      report.plain_log_ticks(ax.xaxis, low, high)
      gains = [g for _, _, g, _ in points] + [0.0]
      pad = 0.08 * (max(gains) - min(gains)) or 0.05
      ax.set_ylim(min(gains) - pad, max(gains) + pad)
      _method_points(ax, points, colors)
    _no_minor_labels(ax)
    ax.set_title(f"{M.PREDICTORS[name]}\n{_rho(m['predictors'][name], 'rho_gain')}", fontsize=8)
    ax.set_xlabel("predicted max lr (step 0)")
  axes[0, 0].set_ylabel("warmup gain (nats; > 0: warmup helps)")
  _method_legend(fig, colors, [])
  report.suptitle(fig, f"Warmup gain (best loss without − with warmup) vs step-0 prediction\n{settings}")
  return report.save_figure(fig, path)


def draw(m: dict, out_dir: str, settings: str) -> list[str]:
  """Every figure into `out_dir`; returns their paths."""
  os.makedirs(out_dir, exist_ok=True)
  return [
      loss_vs_lr(m, out_dir, settings),
      predicted_vs_measured(m, out_dir, settings),
      warmup_gain(m, out_dir, settings),
  ]
