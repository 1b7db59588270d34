"""What the training claims share (6 warmup, 8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup): their arms read from a
finished sweep, each arm's summary over seeds, and the two figures every one of them draws.

Contract:
  Variant(label, params)       an arm: the swept values that select its cells in the claim's grid
                               (configs/claims/<name>.py; key -> value, or -> a predicate on the value) and its name
                               in words (legends, reasons).
  measure_variants(results, variants) -> {"crashed": [...], "variants": {name: summarize(runs)}}; every run of the
                               sweep belongs to exactly one arm and every arm has a run, else ValueError (the grid and
                               the claim disagree: a bug, not a measurement).
  summarize(runs)              one arm, from its runs' records and metrics.jsonl alone: per seed its outcome, final
                               eval loss and BLEU (the sweep's `final`; finished seeds only), the step a diverged seed
                               stopped at, its curves (train loss per logged step, eval loss and BLEU per evaluation);
                               mean and sample std of the final loss and BLEU over the finished seeds; `failed_seeds`:
                               the seeds that diverged (non-finite loss or gradient: the method failed to train, a
                               measurement) or finished without a finite eval loss; `crashed_seeds` apart (no
                               measurement: the claim is INCONCLUSIVE through base.crashed_verdict).
  fails(arm), loss_text(arm)   the verdicts' reading of an arm (it fails when any seed failed) and its text.
  plot_curves, plot_finals     the figures: loss curves against the step (mean over seeds, min–max band over seeds,
                               a diverged run marked × where it stopped), and each arm's final eval loss and BLEU
                               (mean ± std, every seed's point, diverged and crashed seeds named) with the verdict's
                               threshold lines.
DELTA = 0.1 nats is the smallest gap between two arms' mean final validation losses read as a difference.
"""

import dataclasses
import textwrap
from typing import Any, Callable, Optional, Union

import numpy as np

from experiments import report
from experiments.claims import base, figures

DELTA = 0.1
FAILED_COLOR = "red"


@dataclasses.dataclass(frozen=True)
class Variant:
  """One arm of a claim: `params` select its cells (swept key -> value or predicate), `label` names it."""

  label: str
  params: dict[str, Union[Any, Callable[[Any], bool]]]

  def matches(self, run_params: dict) -> bool:
    return all(
        (want(run_params.get(key)) if callable(want) else run_params.get(key) == want)
        for key, want in self.params.items()
    )


def _seed(run: base.Run) -> dict:
  """One run of an arm: outcome, final numbers (finished runs), where a diverged run stopped, curves."""
  train = [(m["step"], m["loss"]) for m in run.metrics("train") if report.finite(m.get("loss"))]
  evals = [(m["step"], m["loss"], m.get("bleu")) for m in run.metrics("eval") if report.finite(m.get("loss"))]
  finished = run.outcome == "finished"
  loss, bleu = run.final.get("eval/loss"), run.final.get("eval/bleu")
  stopped = None
  if run.outcome == "diverged":  # status.json's step is the step whose loss or gradient was not finite
    stopped = (run.record.get("status") or {}).get("step")
    if stopped is None:  # no status step recorded: one past the last logged step
      stopped = train[-1][0] + 1 if train else None
  return dict(
      seed=run.seed,
      outcome=run.outcome,
      final_loss=float(loss) if finished and report.finite(loss) else None,
      final_bleu=float(bleu) if finished and report.finite(bleu) else None,
      stopped_step=stopped,
      error=run.record.get("error"),
      train=[list(p) for p in train],
      eval=[[s, l, b if report.finite(b) else None] for s, l, b in evals],
  )


def summarize(runs: list[base.Run]) -> dict:
  """The summary of one arm over its seeds (module docstring)."""
  seeds = [_seed(r) for r in sorted(runs, key=lambda r: r.seed)]
  mean_loss, std_loss = base.mean_std(s["final_loss"] for s in seeds)
  mean_bleu, std_bleu = base.mean_std(s["final_bleu"] for s in seeds)
  return dict(
      params=dict(runs[0].params) if runs else {},
      seeds=seeds,
      failed_seeds=[
          s["seed"]
          for s in seeds
          if s["outcome"] == "diverged" or (s["outcome"] == "finished" and s["final_loss"] is None)
      ],
      diverged_steps={str(s["seed"]): s["stopped_step"] for s in seeds if s["outcome"] == "diverged"},
      crashed_seeds=[s["seed"] for s in seeds if s["outcome"] == "crashed"],
      mean_final_loss=mean_loss,
      std_final_loss=std_loss,
      mean_final_bleu=mean_bleu,
      std_final_bleu=std_bleu,
  )


def measure_variants(results: base.Results, variants: dict[str, Variant]) -> dict:
  """{"crashed": base.crashed(runs), "variants": {name: summarize(that arm's runs)}} (module docstring)."""
  arms: dict[str, list[base.Run]] = {name: [] for name in variants}
  for run in results.runs:
    names = [name for name, v in variants.items() if v.matches(run.params)]
    if len(names) != 1:
      raise ValueError(f"run {run.cell} seed {run.seed} matches the arms {names} of {list(variants)}, not one")
    arms[names[0]].append(run)
  empty = [name for name, runs in arms.items() if not runs]
  if empty:
    raise ValueError(f"no run of the sweep belongs to the arm(s) {empty}: the claim's grid lacks them")
  return {"crashed": base.crashed(results.runs), "variants": {name: summarize(runs) for name, runs in arms.items()}}


def fails(arm: dict) -> bool:
  """An arm fails when any seed failed (diverged, or no finite final loss) or none has a final loss."""
  return bool(arm["failed_seeds"]) or arm["mean_final_loss"] is None


def loss_text(arm: dict) -> str:
  """'3.576 ± 0.005' (mean ± sample std over seeds), or 'failed (seed 0 diverged at step 12)'."""
  if fails(arm):
    why = [f"seed {s} diverged at step {step}" for s, step in arm["diverged_steps"].items()]
    why += [f"seed {s} has no finite final loss" for s in arm["failed_seeds"] if str(s) not in arm["diverged_steps"]]
    return "failed (" + ", ".join(why or ["no finished seed"]) + ")"
  std = arm["std_final_loss"]
  return f"{arm['mean_final_loss']:.3f}" + (f" ± {std:.3f}" if std is not None else " (1 seed)")


def _band(curves: list[list], column: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """(steps, min, mean, max) over the seeds' curves, per step that any seed logged."""
  per_step: dict[int, list[float]] = {}
  for curve in curves:
    for point in curve:
      if point[column] is not None:
        per_step.setdefault(point[0], []).append(point[column])
  steps = np.asarray(sorted(per_step))
  lo, mean, hi = (np.asarray([f(per_step[s]) for s in steps]) for f in (np.min, np.mean, np.max))
  return steps, lo, mean, hi


def _label(variant: Variant, arm: dict) -> str:
  n = len(arm["seeds"])
  bad = [f"{len(arm['diverged_steps'])}/{n} diverged"] if arm["diverged_steps"] else []
  bad += [f"{len(arm['crashed_seeds'])}/{n} crashed"] if arm["crashed_seeds"] else []
  return variant.label + (f" ({', '.join(bad)})" if bad else "")


def plot_curves(
    measured: dict, variants: dict[str, Variant], out_dir: str, name: str, headline: str, settings: str
) -> str:
  """Train loss (left) and validation loss (right) against the step, per arm: the mean over seeds with the min–max
  band; × where a diverged run stopped (at its last finite loss). A y axis that a diverging run would stretch is cut
  at 1.5× the largest first loss (the cut is said on the axis)."""
  fig, axes = figures.plt.subplots(1, 2, figsize=(12, 4.8))
  arms = measured["variants"]
  for column, ax in zip(("train", "eval"), axes):
    first = []
    for i, (key, variant) in enumerate(variants.items()):
      arm, color = arms[key], f"C{i}"
      curves = [s[column] for s in arm["seeds"] if s[column]]
      if not curves:
        continue
      steps, lo, mean, hi = _band(curves)
      first.append(mean[0])
      marker = "o" if column == "eval" or len(steps) < 15 else None
      ax.plot(steps, mean, marker=marker, ms=3, lw=1.4, color=color, label=_label(variant, arm))
      if len(curves) > 1:
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
      for s in arm["seeds"]:
        if s["outcome"] == "diverged" and s["train"] and column == "train":
          ax.plot(s["stopped_step"], s["train"][-1][1], "x", color=color, ms=10, mew=2.5)
          ax.annotate(
              f"seed {s['seed']} diverged\nat step {s['stopped_step']}",
              (s["stopped_step"], s["train"][-1][1]),
              textcoords="offset points",
              xytext=(-6, 6),
              ha="right",
              fontsize=7,
              color=color,
          )
    ax.margins(x=0.06, y=0.15)  # room for the notes of diverged runs
    top = 1.5 * max(first) if first else None
    if top is not None and any(max(line.get_ydata(), default=0) > top for line in ax.lines):
      ax.set_ylim(top=top)
      ax.text(0.99, 0.99, f"y cut at {top:.3g}", transform=ax.transAxes, ha="right", va="top", fontsize=7)
    ax.set_xlabel("training step")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if ax.lines:
      ax.legend(fontsize=7, loc="best")
    else:
      ax.text(0.5, 0.5, "no run logged a finite loss here", transform=ax.transAxes, ha="center", color=FAILED_COLOR)
  axes[0].set_ylabel("training loss (cross-entropy per token)")
  axes[0].set_title("training loss: mean over seeds, band min–max; ×: a diverged run's last finite loss", fontsize=8)
  axes[1].set_ylabel("validation loss (cross-entropy per token)")
  axes[1].set_title("validation loss: mean over seeds, band min–max", fontsize=8)
  figures.suptitle(fig, headline, settings)
  return figures.save(fig, out_dir, name)


def _arm_points(ax, x: float, arm: dict, key: str, color: str, fmt: str) -> None:
  """Mean ± std of `key` over the arm's finished seeds at x, every seed's value beside it; failed seeds named."""
  values = [(s["seed"], s[key]) for s in arm["seeds"] if s[key] is not None]
  if values:
    v = np.asarray([y for _, y in values])
    offsets = np.linspace(-0.12, 0.12, len(v)) if len(v) > 1 else np.zeros(1)
    ax.plot(x + 0.18 + offsets, v, "o", color=color, ms=4, alpha=0.6, mfc="none")
    mean, std = base.mean_std(v)
    ax.errorbar([x], [mean], yerr=[std or 0.0], fmt="s", color=color, ms=7, capsize=5)
    ax.annotate(format(mean, fmt), (x, mean), textcoords="offset points", xytext=(-8, 0), ha="right", fontsize=7)
  notes = [f"seed {s}: diverged at step {step}" for s, step in arm["diverged_steps"].items()]
  notes += [f"seed {s}: crashed" for s in arm["crashed_seeds"]]
  if notes:
    ax.plot([x], [0.93], "x", color=FAILED_COLOR, ms=11, mew=2.5, transform=ax.get_xaxis_transform())
    ax.text(x, 0.86, "\n".join(notes), transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=6.5)


def plot_finals(
    measured: dict,
    variants: dict[str, Variant],
    out_dir: str,
    name: str,
    headline: str,
    settings: str,
    lines: Optional[list[tuple[float, str]]] = None,
) -> str:
  """Each arm's final validation loss (left) and BLEU (right): mean ± sample std over the finished seeds (square),
  every seed's value (circles), × and a note for a diverged or crashed seed; `lines` = [(loss or None, label)] are
  the verdict's thresholds, drawn and labelled on the loss panel."""
  fig, axes = figures.plt.subplots(1, 2, figsize=(12, 4.8))
  arms = measured["variants"]
  for ax, key, fmt in ((axes[0], "final_loss", ".3f"), (axes[1], "final_bleu", ".2f")):
    for i, k in enumerate(variants):
      _arm_points(ax, i, arms[k], key, f"C{i}", fmt)
    ax.set_xticks(range(len(variants)), [textwrap.fill(v.label, 15) for v in variants.values()], fontsize=7)
    ax.set_xlim(-0.6, len(variants) - 0.4)
  for (y, label), style in zip(lines or [], ("--", ":", "-.")):
    if y is not None:  # labelled on the line itself: a legend box would hide points or notes
      axes[0].axhline(y, color="k", ls=style, lw=1)
      axes[0].text(-0.55, y, label, fontsize=7, va="bottom", ha="left")
  if all(fails(arm) for arm in arms.values()):
    axes[0].text(0.5, 0.5, "no arm has a finite final loss", transform=axes[0].transAxes, ha="center")
  lo, hi = axes[0].get_ylim()
  axes[0].set_ylim(lo - 0.1 * (hi - lo), hi + 0.25 * (hi - lo))  # room for the legend and the failed seeds' notes
  axes[0].set_ylabel("final validation loss (cross-entropy per token)")
  axes[0].set_title("final validation loss: ■ mean ± std over finished seeds, ○ each seed", fontsize=8)
  axes[1].set_ylabel("final BLEU (greedy decoding, sacreBLEU)")
  axes[1].set_title("final BLEU: ■ mean ± std over finished seeds, ○ each seed", fontsize=8)
  figures.suptitle(fig, headline, settings)
  return figures.save(fig, out_dir, name)


def summary(measured: dict, variants: dict[str, Variant]) -> dict:
  """Headline numbers: each arm's mean final validation loss and BLEU (None where it failed)."""
  out = {}
  for key, v in variants.items():
    arm = measured["variants"][key]
    out[f"{v.label}: val loss"] = None if fails(arm) else arm["mean_final_loss"]
    out[f"{v.label}: BLEU"] = None if fails(arm) else arm["mean_final_bleu"]
  return out
