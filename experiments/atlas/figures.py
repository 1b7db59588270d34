"""The atlas's figures, drawn from `experiments.atlas.collect.measure`'s output alone.

loss_vs_lr.png          final validation loss against the peak lr, one panel per method, without and with warmup
                        (mean over seeds, every seed's point; diverged runs × at the top), the stability threshold
                        (best + margin) dashed, the Adam and GD step-0 predictions as vertical lines;
predicted_vs_measured.png  per predictor, predicted against measured largest stable lr (no warmup), log-log, the
                        y = x line and the 2× band; a censored measurement drawn as an arrow-marked bound;
warmup_gain.png         per predictor, the warmup gain (nats) against the predicted lr.
"""

import math
import os

import matplotlib.ticker
import numpy as np

from experiments import report
from experiments.atlas import measures as M
from experiments.report import plt

COLORS = {0: "tab:red", 1: "tab:blue"}


def _finite(x) -> bool:
  return report.finite(x)


def _no_minor_labels(ax) -> None:
  """Log axes spanning about a decade label their minor ticks, which then overlap: keep the decades only."""
  for axis in (ax.xaxis, ax.yaxis):
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


@report.redrawn_on_change("loss_vs_lr.png")
def loss_vs_lr(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  methods = list(m["methods"])
  cols = min(5, max(1, len(methods)))
  rows = math.ceil(len(methods) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(max(3.2 * cols, 8.0), 2.8 * rows + 0.8), squeeze=False, sharey=True)
  threshold = m["best_loss"] + m["margin"] if _finite(m["best_loss"]) else None
  finite = [
      v for r in m["methods"].values() for w in r["runs"].values() for vs in w["losses"] for v in vs if _finite(v)
  ]
  top = max(finite) + 0.3 if finite else 1.0
  for ax, method in zip(axes.flat, methods):
    row = m["methods"][method]
    for i, (warmup, w) in enumerate(sorted(row["runs"].items())):
      color = COLORS[min(i, 1)]
      lrs = np.asarray(w["lrs"])
      mean = np.asarray([v if v is not None else np.nan for v in w["mean_loss"]], dtype=float)
      ax.plot(lrs, mean, "-o", color=color, ms=3, label=f"warmup {warmup}")
      for lr, losses, outcomes in zip(lrs, w["losses"], w["outcomes"]):
        ax.plot([lr] * sum(_finite(v) for v in losses), [v for v in losses if _finite(v)], ".", color=color, alpha=0.4)
        if any(o == "diverged" for o in outcomes):
          ax.plot([lr], [top], "x", color=color, ms=7)
    if threshold is not None:
      ax.axhline(threshold, color="gray", ls="--", lw=0.8)
    for name, style in (("adam", ":"), ("gd", "-.")):
      p = row["predicted"].get(name)
      if _finite(p):
        ax.axvline(p, color="k", ls=style, lw=0.8, label=f"{M.PREDICTORS[name]}")
    ax.set_xscale("log")
    ax.set_title(method, fontsize=9)
    ax.set_xlabel("peak lr")
  for ax in axes.flat[len(methods) :]:
    ax.axis("off")
  axes[0, 0].set_ylabel("final val loss (nats)")
  axes[0, 0].legend(fontsize=6)
  fig.suptitle(
      f"Final validation loss vs peak lr (× diverged; dashed: best + {m['margin']:g} nat)\n{settings}", fontsize=8
  )
  fig.tight_layout()
  return report.save_figure(fig, path)


@report.redrawn_on_change("predicted_vs_measured.png")
def predicted_vs_measured(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  names = list(M.PREDICTORS)
  fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.6), squeeze=False)
  for ax, name in zip(axes.flat, names):
    xs, ys = [], []
    for method, row in m["methods"].items():
      w = row["runs"].get(0)
      p = row["predicted"].get(name)
      if not (w and w["max_lr"] and _finite(p)):
        continue
      marker = {"above": "^", "below": "v"}.get(w["max_lr_censored"], "o")
      ax.plot([p], [w["max_lr"]], marker, color="tab:blue")
      ax.annotate(method, (p, w["max_lr"]), fontsize=5)
      xs.append(p)
      ys.append(w["max_lr"])
    if xs:
      lo, hi = min(xs + ys) / 3, max(xs + ys) * 3
      t = np.geomspace(lo, hi, 10)
      ax.plot(t, t, "k-", lw=0.7)
      ax.fill_between(t, t / M.WITHIN, t * M.WITHIN, color="gray", alpha=0.15)
    d = m["predictors"][name]
    rho = d["rho_lr"]
    ax.set_title(f"{M.PREDICTORS[name]}\nρ = {rho:.2f}" if rho is not None else M.PREDICTORS[name], fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _no_minor_labels(ax)
    ax.set_xlabel("predicted max lr (step 0)")
  axes[0, 0].set_ylabel("measured max stable lr, no warmup\n(▲ ≥, ▼ <: censored)")
  fig.suptitle(f"Step-0 predictions vs measured largest stable lr (band: {M.WITHIN:g}×)\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


@report.redrawn_on_change("warmup_gain.png")
def warmup_gain(m: dict, out_dir: str, settings: str, *, path: str) -> str:
  names = list(M.PREDICTORS)
  fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.4), squeeze=False)
  for ax, name in zip(axes.flat, names):
    for method, row in m["methods"].items():
      p, g = row["predicted"].get(name), row.get("warmup_gain")
      if _finite(p) and _finite(g):
        ax.plot([p], [g], "o", color="tab:green")
        ax.annotate(method, (p, g), fontsize=5)
    rho = m["predictors"][name]["rho_gain"]
    ax.axhline(0, color="gray", lw=0.6)
    ax.set_xscale("log")
    _no_minor_labels(ax)
    ax.set_title(f"{M.PREDICTORS[name]}\nρ = {rho:.2f}" if rho is not None else M.PREDICTORS[name], fontsize=8)
    ax.set_xlabel("predicted max lr (step 0)")
  axes[0, 0].set_ylabel("warmup gain (nats)")
  fig.suptitle(f"Warmup gain (best loss without − with) vs step-0 prediction\n{settings}", fontsize=8)
  fig.tight_layout()
  return report.save_figure(fig, path)


def draw(m: dict, out_dir: str, settings: str) -> list[str]:
  """Every figure into `out_dir`; returns their paths."""
  os.makedirs(out_dir, exist_ok=True)
  return [
      loss_vs_lr(m, out_dir, settings),
      predicted_vs_measured(m, out_dir, settings),
      warmup_gain(m, out_dir, settings),
  ]
