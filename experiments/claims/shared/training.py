"""What claims 8 (tfixup), 9 (bert_vs_xavier) and 10 (deep_no_warmup) share: their runs read by arm and learning rate,
each run by its outcome class, and the loss-vs-lr figure. Their configs are sets of the atlas's training cells
(configs/claims/_atlas_cells.py), every arm without warmup; cells are read as claim 6's (experiments/claims/warmup.py).

A run's *class* is the sweep record's `class` (analysis/outcomes.py; it needs `train.eval_at_init`). A cell (arm, lr)
*fails* when at least half its seeds collapsed or diverged, *trains* when more than half trained, else it is `mixed`
(cells.cell_class: fractions, not "every seed alike"). A cell a rule decides on needs `MIN_SEEDS` = 3 seeds.

Contract:
  measure_arms(results, arms) -> {"crashed", "unclassed", "missing", "reference", "arms": {label: {lr: [run]}}}
      Runs selected by their arm (`run.arm`) and `optim.learning_rate` (keys `format(lr, 'g')`, ascending); a run:
      seed, outcome, cls, final_loss (finite, else None), loss0 (step 0, else None). `reference`: the unigram
      reference of the first run that wrote data_stats.json (None without one). A run of an arm not in `arms`, or
      with a warmup, is a ValueError (the claim's grid and its module disagree: a bug, not a measurement).
  unusable(measured) -> Verdict | None   INCONCLUSIVE for a crashed run, an arm without runs, or a run without a
      class; None when the cells can be read.
  rule(decide) -> (verdict, summary)   a claim's verdict from its `decide(measured) -> (verdict, reason, numbers)`.
  rescue(bad, good, failing, rescued, reason, numbers, ...) -> (verdict, reason, numbers)   claims 8 and 9's reading:
      does an arm train where the reference arm fails?
  cells(measured, arm) -> {lr: (class or 'mixed', seeds)}; few_seeds(cells, lrs): the lrs with a cell under
      MIN_SEEDS seeds; show(cells), lrs_text(lrs), too_few(lrs): the reasons' text.
  plot_loss_vs_lr(measured, panels, ...) -> [file name]   each seed's final validation loss against the peak lr, one
      panel per group of arms, log axes, a marker per outcome class, a line through each cell's mean where no seed
      diverged, a diverged run a × on a clip line at the top, the unigram reference H dashed; [] before any runs.
"""

import math
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from analysis import outcomes
from experiments import plots, stats, study
from experiments.claims.shared.cells import FAILED, MARKERS, MIN_SEEDS, Cells, cell_class
from train import loop as train_loop


def _run(run: study.Run) -> dict:
  loss = run.final.get("eval/loss")
  loss0 = next((m["loss"] for m in run.metrics("eval") if m["step"] == 0 and "loss" in m), None)
  return dict(
      seed=run.seed,
      outcome=run.outcome,
      cls=run.record.get("class"),
      final_loss=float(loss) if stats.finite(loss) else None,
      loss0=float(loss0) if stats.finite(loss0) else None,
  )


def reference(results: study.Results) -> Optional[dict]:
  """The unigram reference H (`train.data.Data.target_unigram_entropy`) of the first run with a data_stats.json."""
  for run in results.runs:
    stats = run.json(train_loop.DATA_STATS_FILE)
    if stats is not None and stats.get("target_unigram_entropy") is not None:
      return {"unigram_entropy": float(stats["target_unigram_entropy"]), "source": f"{run.cell}/seed_{run.seed}"}
  return None


def measure_arms(results: study.Results, arms: Sequence[str]) -> dict:
  """The runs of `arms` by lr (module docstring)."""
  by_arm: dict[str, dict[str, list[dict]]] = {a: {} for a in arms}
  for run in results.runs:
    if run.arm not in by_arm:
      raise ValueError(
          f"run {run.cell} seed {run.seed} belongs to the arm {run.arm!r}, not one of {list(arms)}: the claim's "
          "grid and its module disagree"
      )
    if int(run.params.get("optim.warmup_steps", 0)):
      raise ValueError(f"run {run.cell} seed {run.seed} has a warmup: these claims compare arms without one")
    lr = format(float(run.params["optim.learning_rate"]), "g")
    by_arm[run.arm].setdefault(lr, []).append(_run(run))
  return {
      "crashed": study.crashed(results.runs),
      "unclassed": [
          f"{r.arm} η {float(r.params['optim.learning_rate']):g} seed {r.seed}"
          for r in results.runs
          if r.outcome != "crashed" and r.record.get("class") is None
      ],
      "missing": [a for a, c in by_arm.items() if not c],
      "reference": reference(results),
      "arms": {
          a: {lr: sorted(runs, key=lambda r: r["seed"]) for lr, runs in sorted(c.items(), key=lambda kv: float(kv[0]))}
          for a, c in by_arm.items()
      },
  }


def unusable(m: dict) -> Optional[study.Verdict]:
  """INCONCLUSIVE when the runs cannot be read by class (module docstring), else None."""
  bad = study.crashed_verdict(m)
  if bad:
    return bad
  if m["missing"]:
    return study.Verdict(study.INCONCLUSIVE, f"no run of the arm(s) {m['missing']}: the sweep's grid lacks them")
  if m["unclassed"]:
    return study.Verdict(
        study.INCONCLUSIVE,
        f"{len(m['unclassed'])} run(s) have no outcome class (train.eval_at_init was off: no loss at init to read "
        f"them against; rerun them with it on): {', '.join(m['unclassed'][:4])}"
        + (", ..." if len(m["unclassed"]) > 4 else ""),
    )
  return None


def rule(decide: Callable[[dict], tuple[str, str, dict]]) -> tuple[Callable, Callable]:
  """(verdict, summary) of a claim whose rule is `decide(measured) -> (verdict, reason, numbers)` on readable cells:
  while `unusable(measured)`, its verdict and no numbers."""

  def verdict(m: dict) -> study.Verdict:
    return unusable(m) or study.Verdict(*decide(m)[:2])

  def summary(m: dict) -> dict:
    return {} if unusable(m) else decide(m)[2]

  return verdict, summary


def rescue(
    bad: Cells,
    good: Cells,
    failing: list,
    rescued: list,
    reason: str,
    numbers: dict,
    *,
    never: str,
    unsettled: str,
    refuted: str,
) -> tuple[str, str, dict]:
  """Claims 8 and 9's reading of `failing` (the lrs where the reference arm's cells `bad` fail) and `rescued` (those
  where the arm's cells `good` train): reproduced when some lr is rescued; not reproduced when `good` fails at every
  failing lr; inconclusive (`reason` + `never`) when nothing fails, (+ `unsettled`) when `good`'s cells there are
  mixed or undertrained, or when a deciding cell has fewer than MIN_SEEDS seeds; `refuted` ends a not-reproduced
  reason."""
  if not failing:
    return study.INCONCLUSIVE, reason + never, numbers
  deciding = rescued or (failing if all(fails(good, lr) for lr in failing) else [])
  if not deciding:
    return study.INCONCLUSIVE, reason + unsettled, numbers
  few = few_seeds([bad, good], deciding)
  if few:
    return study.INCONCLUSIVE, reason + too_few(few), numbers
  if rescued:
    return study.REPRODUCED, reason, numbers
  return study.NOT_REPRODUCED, reason + refuted, numbers


def cells(m: dict, arm: str) -> Cells:
  """lr -> (the cell's class or 'mixed', its seeds) of one arm."""
  return {float(lr): (cell_class([r["cls"] for r in runs]), len(runs)) for lr, runs in m["arms"][arm].items()}


def trains(c: Cells, lr: float) -> bool:
  return c.get(lr, ("", 0))[0] == outcomes.TRAINED


def fails(c: Cells, lr: float) -> bool:
  return c.get(lr, ("", 0))[0] in FAILED


def few_seeds(cs: Sequence[Cells], lrs) -> list[float]:
  """The lrs among `lrs` where a cell of `cs` has fewer than MIN_SEEDS seeds (or none)."""
  return sorted({lr for lr in lrs for c in cs if c.get(lr, ("", 0))[1] < MIN_SEEDS})


def show(c: Cells) -> str:
  return ", ".join(f"{lr:g} {cls}" for lr, (cls, _) in sorted(c.items()))


def lrs_text(lrs) -> str:
  return "{" + ", ".join(format(lr, "g") for lr in sorted(lrs)) + "}" if lrs else "none"


def too_few(lrs, lead: str = "the deciding cells") -> str:
  """The inconclusive reason's tail for deciding cells at `lrs` with fewer than MIN_SEEDS seeds."""
  return f"; {lead} at η {lrs_text(lrs)} have fewer than {MIN_SEEDS} seeds: run more"


def reference_text(m: dict) -> str:
  h = (m.get("reference") or {}).get("unigram_entropy")
  return f" (unigram reference H = {h:.3f} nats)" if h is not None else ""


def plot_loss_vs_lr(
    m: dict,
    panels: Sequence[tuple[str, Sequence[str]]],
    out_dir: str,
    name: str,
    headline: str,
    settings: str,
    names: Optional[dict[str, str]] = None,
) -> list[str]:
  """The loss-vs-lr figure (module docstring): `panels` = [(title, [arm, ...])]; `names[arm]` the legend's name of an
  arm (arms sharing a name share a colour: claim 10's method at two depths), default the arm itself."""
  if not any(m["arms"].values()):
    return []
  names = names or {}
  key = lambda arm: names.get(arm, arm)
  colors = {k: f"C{i}" for i, k in enumerate(dict.fromkeys(key(a) for _, arms in panels for a in arms))}
  runs = [r for a in m["arms"].values() for rs in a.values() for r in rs]
  finals = [r["final_loss"] for r in runs if r["final_loss"] is not None and r["cls"] != outcomes.DIVERGED]
  top = 1.15 * max([r["loss0"] for r in runs if r["loss0"] is not None] or finals or [10.0])
  h = (m.get("reference") or {}).get("unigram_entropy")
  lrs = [float(lr) for a in m["arms"].values() for lr in a] or [1e-3]
  fig, axes = plots.plt.subplots(
      1, len(panels), figsize=(5.2 * len(panels) + 1, 4.6), squeeze=False, sharey=True, layout="constrained"
  )
  handles: dict[str, object] = {}  # legend label -> handle: the arms first (panel order), then the keys
  for ax, (title, arms) in zip(axes[0], panels):
    for i, arm in enumerate(arms):
      shift = 10 ** (0.03 * (i - (len(arms) - 1) / 2))  # the arms side by side at each lr, not on top of each other
      color, xs, means = colors[key(arm)], [], []
      for lr, cell in m["arms"].get(arm, {}).items():
        x = float(lr) * shift
        for r in cell:
          bad = r["cls"] == outcomes.DIVERGED or r["final_loss"] is None
          y = top if bad else min(r["final_loss"], top)
          ax.plot(x, y, MARKERS.get(r["cls"], "."), color=color, ms=6, alpha=0.75, mfc="none")
        ok = [r["final_loss"] for r in cell if r["cls"] != outcomes.DIVERGED and r["final_loss"] is not None]
        xs.append(x)
        means.append(float(np.mean(ok)) if ok and len(ok) == len(cell) else math.nan)
      (line,) = ax.plot(xs, means, "-", color=color, lw=1.4, label=key(arm))
      handles.setdefault(key(arm), line)
    ax.axhline(top, color="grey", ls=":", lw=0.8)  # the clip: a diverged run's × sits on it
    if h is not None:
      text = f"unigram reference H = {h:.3f} nats (collapsed: within 0.1)"
      handles[text] = ax.axhline(h, color="grey", ls="--", lw=0.9, label=text)
    ax.set_xscale("log")
    ax.set_xlim(min(lrs) / 1.6, max(lrs) * 1.6)
    plots.plain_log_ticks(ax.xaxis, min(lrs) / 1.6, max(lrs) * 1.6)
    plots.log_loss_axis(ax, finals + ([h] if h is not None else []), top * 1.08)  # room above the clip's markers
    ax.set(xlabel="peak lr (constant, no warmup)", title=title)
  axes[0][0].set_ylabel("final validation loss (nats)")
  (handles["line: a cell's mean over seeds (none diverged)"],) = axes[0][0].plot([], [], "-", color="grey")
  for cls, marker in MARKERS.items():
    text = f"{cls} (drawn at the clip, {top:.3g}: not a loss)" if cls == outcomes.DIVERGED else cls
    (handles[text],) = axes[0][0].plot([], [], marker, color="grey", mfc="none")
  plots.figure_legend(fig, list(handles.values()), list(handles), max_cols=4, fontsize=8)
  plots.headline_title(fig, headline, settings)
  return [plots.save(fig, out_dir, name)]
