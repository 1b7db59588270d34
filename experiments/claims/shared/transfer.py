"""The optimal learning rate along a size axis and its shift, shared by the studies of lr transfer: width (study 12,
experiments/claims/width.py) and depth (study 13, experiments/claims/depth.py).

Contract. A run is a dict with at least `seed`, `cls` (its outcome class, analysis/outcomes.py) and `final_loss`
(None when it has none); `cells` are one arm's runs at one size, {lr: [runs]} over a factor-2 lr grid; an arm's grid
is {size: cells}.
  parse_label(label, axis)          ('µP', 128) from the grid's label 'µP @ width 128' (axis 'width' or 'depth')
  optimum(cells)                    (log₂ η*, at the grid's edge): the lowest mean final loss among lrs whose runs all
                                    trained, refined by the parabola through it and its grid neighbours in log₂ lr;
                                    best_loss(cells) that loss itself (mean ± std over seeds) and its lr
  shift(grid, sizes, seeds=None)    log₂ η*(largest size) − log₂ η*(smallest), one seed resample per size if given
  shift_intervals(grids, sizes, diffs)   every arm's shift and each difference of magnitudes |a| − |b|, per seed
                                    (its own optimum at each end), with the Student-t interval (95%) over the seeds
  loss_vs_lr, optima_vs_size, plots.size_axis, not_trained_handle   the panels: final loss vs lr (a run that did not
                                    train an 'x', never at a diverged run's loss), the optimum vs log₂ size
  sharpness_record(run, steps)      a run's records of η(t)·λ_max(M·P_t⁻¹H) (`SHARPNESS`, Noci et al. 2024), their
                                    median over the `WINDOW` of the run (S), their maximum after step 0 and each
                                    record's Lanczos steps
  sharpness_slopes(rows), sharpness_vs_size(ax, ...)   per arm, S's mean ± std per size and the least-squares slope of
                                    log₂ S on log₂ size over every (size, seed) with its Student-t interval; its panel
Per seed and paired, because `train.seed` sets a run's init and its data order, and at the base size some arms are
the same runs (study 13's three at L_base, study 12's SP and SP + µP emb. lr at d_base). Student-t, because these
studies run 2–4 seeds, where a percentile bootstrap covers well under its nominal 95%.
"""

import math
from typing import Any, Optional

import numpy as np

from analysis import outcomes
from experiments import plots, stats, study


def parse_label(label: str, axis: str) -> tuple[str, int]:
  """(arm, size) from a grid product's label '<arm> @ <axis> <size>' (configs/claims/width.py, depth.py)."""
  arm, sep, size = label.rpartition(f" @ {axis} ")
  if not sep:
    raise ValueError(f"grid label {label!r} is not '<arm> @ {axis} <size>'")
  return arm, int(size)


def optimum(cells: dict[float, list[dict]]) -> Optional[tuple[float, bool]]:
  """(log₂ η*, at the grid's edge) over {lr: runs}: the lowest mean final loss among lrs whose runs all trained,
  refined by the parabola through it and its grid neighbours in log₂ lr; None when no lr trained."""
  lrs = sorted(cells)
  mean = {lr: np.mean(losses) for lr, losses in _trained(cells).items()}
  if not mean:
    return None
  k = lrs.index(min(mean, key=mean.get))
  x = math.log2(lrs[k])
  if k == 0 or k == len(lrs) - 1 or lrs[k - 1] not in mean or lrs[k + 1] not in mean:
    return x, k == 0 or k == len(lrs) - 1
  (xl, yl), y, (xr, yr) = (
      (math.log2(lrs[k - 1]), mean[lrs[k - 1]]),
      mean[lrs[k]],
      (math.log2(lrs[k + 1]), mean[lrs[k + 1]]),
  )
  h, curv = (xr - xl) / 2, yl - 2 * y + yr
  return (x - h * (yr - yl) / (2 * curv) if curv > 0 else x), False


def _trained(cells: dict) -> dict:
  """{lr: its runs' final losses} over the lrs of {lr: runs} whose runs all trained (`optimum`'s candidates)."""
  return {lr: [r["final_loss"] for r in runs] for lr, runs in cells.items() if runs and all(
      r["cls"] == outcomes.TRAINED and r["final_loss"] is not None for r in runs)}  # fmt: skip


def best_loss(cells: dict) -> Optional[tuple[float, float, float]]:
  """(mean, sample std, lr) of the lowest seed-mean final loss over {lr: runs} among lrs whose runs all trained (the
  grid point `optimum` starts from; the lrs as floats or as claim.json's strings); None when no lr trained."""
  means = {float(lr): losses for lr, losses in _trained(cells).items()}
  if not means:
    return None
  lr = min(means, key=lambda k: np.mean(means[k]))
  mean, std = study.mean_std(means[lr])
  return mean, std, lr


def resample(cells: dict[float, list[dict]], seeds: list[int]) -> dict[float, list[dict]]:
  """The cells with each lr's runs taken by `seeds` (with repeats): one seed resample for every lr of a size (a
  seed is one init across the lrs)."""
  return {lr: [r for s in seeds for r in runs if r["seed"] == s] for lr, runs in cells.items()}


def common_seeds(grids: dict[str, dict[int, dict[float, list[dict]]]]) -> list[int]:
  """The seeds that ran every lr of every size of every arm of `grids` {arm: {size: {lr: runs}}}: the seeds a
  transfer rule reads where some cells ran more (the reference lr's, for a sharpness rule: experiments/grid.py
  `cell_seeds`), so that each lr's mean and each seed's optimum stand on the same seeds."""
  sets = [{r["seed"] for r in runs} for g in grids.values() for cells in g.values() for runs in cells.values()]
  return sorted(set.intersection(*sets)) if sets else []


def only_seeds(cells: dict, seeds: list[int]) -> dict:
  """{lr: runs} with each lr's runs of `seeds` alone."""
  return {lr: [r for r in runs if r["seed"] in seeds] for lr, runs in cells.items()}


def shift(grid: dict[int, dict], sizes: list[int], seeds: Optional[dict] = None) -> Optional[float]:
  """log₂ η*(sizes[-1]) − log₂ η*(sizes[0]) over one arm's `grid` {size: {lr: runs}}, each size's runs resampled by
  `seeds[size]` when given; None when an end has no trained lr."""
  ends = []
  for d in (sizes[0], sizes[-1]):
    found = optimum(grid[d] if seeds is None else resample(grid[d], seeds[d]))
    if found is None:
      return None
    ends.append(found[0])
  return ends[1] - ends[0]


def _with_diffs(shifts: dict, diffs: dict[str, tuple[str, str]]) -> dict:
  """`shifts` {arm: shift} plus {key: |shift a| − |shift b|} for each `diffs` key (a, b) where both are known."""
  out = dict(shifts)
  out.update({k: abs(out[a]) - abs(out[b]) for k, (a, b) in diffs.items() if out.get(a) is not None and out.get(b) is not None})  # fmt: skip
  return out


def shift_intervals(grids: dict[str, dict], sizes: list[int], diffs: dict[str, tuple[str, str]]) -> dict:
  """{arm: [shift, lo, hi]} and {diffs key: [|a| − |b|, lo, hi]} over `grids` {arm: {size: {lr: runs}}} between
  sizes[0] and sizes[-1]: each seed's own shift (its optimum at each end from its runs alone) and each seed's
  difference (paired: a seed shares its init and data order across arms and sizes), their mean with its Student-t
  95% interval over the seeds (a percentile bootstrap over 2–4 seeds covers well under 95%: at 2 seeds it is about
  a 50% interval). None where fewer than 2 seeds have the value."""
  seeds = sorted({r["seed"] for g in grids.values() for d in sizes for runs in g[d].values() for r in runs})
  per_seed: dict[str, list] = {}
  for s in seeds:
    one = _with_diffs({a: shift(g, sizes, {d: [s] for d in sizes}) for a, g in grids.items()}, diffs)
    for k, v in one.items():
      if v is not None:
        per_seed.setdefault(k, []).append(v)
  keys = [*grids, *diffs]
  return {k: (list(stats.mean_interval(per_seed[k])) if len(per_seed.get(k, [])) >= 2 else None) for k in keys}


def shifts_from_record(runs: dict, sizes: list[int], diffs: dict[str, tuple[str, str]]) -> dict:
  """`shift_intervals` over a record's measured runs {arm: {str(size): {lr string: runs}}} (claim.json's form), for
  re-deciding a record whose stored intervals were computed another way."""
  grids = {a: {d: {float(lr): rs for lr, rs in g[str(d)].items()} for d in sizes} for a, g in runs.items() if all(
      str(d) in g for d in sizes)}  # fmt: skip
  return shift_intervals(grids, sizes, diffs)


def clipped_top(losses: list) -> float:
  """The top of the loss panels, where runs without a final loss (or above it) are drawn: 1.1 × the largest finite
  loss (10 when none)."""
  return 1.1 * max([v for v in losses if stats.finite(v)] or [10.0])


def loss_vs_lr(ax, grid: dict[str, dict], sizes: list[int], optima: dict, colours: dict, losses: list, top: float):
  """One arm's final loss vs lr on `ax`, a line of seed means per size in `sizes` (`grid` {str(size): {lr string:
  runs}}, `optima` {str(size): {'lr': ...} or None}, `colours` {size: colour}): each run a dot, or an 'x' when it did
  not train (at `top` when it diverged, has no loss or its loss is above), the optimum a dotted line; a line through
  each lr's mean where every run has a loss and none diverged; log x, log loss axis over `losses`."""
  clipped = lambda r: r["final_loss"] is None or r["cls"] == outcomes.DIVERGED
  for d in sizes:
    cells = grid[str(d)]
    lrs = sorted(cells, key=float)
    for lr in lrs:
      for r in cells[lr]:
        failed = r["cls"] != outcomes.TRAINED or r["final_loss"] is None
        y = top if clipped(r) else min(r["final_loss"], top)
        ax.plot(float(lr), y, "x" if failed else "o", color=colours[d], ms=5, mfc="none" if failed else colours[d])
    mean = [math.nan if any(map(clipped, cells[lr])) else np.mean([r["final_loss"] for r in cells[lr]]) for lr in lrs]
    ax.plot([float(lr) for lr in lrs], mean, "-", color=colours[d])
    o = optima.get(str(d))
    if o:
      ax.axvline(o["lr"], color=colours[d], ls=":", lw=1)
  ax.set_xscale("log")
  grid_lrs = sorted({float(lr) for d in sizes for lr in grid[str(d)]})
  if grid_lrs:  # each lr of the grid labelled (the default log ticks label 2×10⁻³, 3×10⁻³, ... over each other)
    plots.plain_log_ticks(ax.xaxis, grid_lrs[0], grid_lrs[-1], at=grid_lrs)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
  plots.log_loss_axis(ax, losses, top)


def not_trained_handle(top: float):
  """The legend's entry for loss_vs_lr's 'x'."""
  text = f"not trained: at its loss; diverged or without a loss: at {top:.3g} (clipped)"
  return plots.plt.Line2D([], [], ls="", marker="x", color="grey", label=text)


def optima_vs_size(ax, optima: dict, shifts: dict, colours: dict, sizes: list[int], *, word: str, xlabel: str):
  """The optimal lr vs size per arm (`optima` {arm: {str(size): {'lr': ...} or None}}, `shifts` {arm: [shift, lo,
  hi]}, `colours` {arm: colour}), each labelled by its shift; log₂ x axis over `sizes`, log y, one legend."""
  for a, per in optima.items():
    pts = sorted((int(d), v["lr"]) for d, v in per.items() if v)
    if pts:
      s = shifts.get(a)
      ax.plot(*zip(*pts), "o-", color=colours[a], label=f"{a}: shift {stats.fmt(tuple(s))} log₂" if s else a)
  plots.size_axis(ax, sizes)
  ax.set_yscale("log")
  lrs = [v["lr"] for per in optima.values() for v in per.values() if v]
  if lrs:
    plots.plain_log_ticks(ax.yaxis, min(lrs), max(lrs))
  ax.set(xlabel=xlabel, ylabel="optimal peak lr", title=f"optimal lr vs {word}")
  if ax.get_legend_handles_labels()[0]:  # no arm has an optimum: no empty legend box; under the panel, off the data
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)


def read_difference(diff: list, text: str, edges: list, seeds: int, advice: str = "") -> tuple:
  """(verdict, reason, advice) of a transfer rule on D = [point, lo, hi] over `seeds` seeds per cell, "the optimum
  moves less than the reference's" (studies 12 and 13): inconclusive with an optimum at the lr grid's edge (`edges`),
  reproduced when D's interval lies below 0, not reproduced when it lies at or above 0, else inconclusive
  (straddling 0): the advice names the seeds per cell that would clear 0 were D's mean and spread to hold
  (stats.seeds_to_decide), then `advice`."""
  if edges:
    return study.INCONCLUSIVE, f"{text}; optimum at the lr grid's edge at {edges}", "extend the lr grid past the edge"
  if diff[2] < 0:
    return study.REPRODUCED, text, ""
  if diff[1] >= 0:
    return study.NOT_REPRODUCED, text, ""
  need = stats.seeds_to_decide(diff, seeds, 0.0)
  more = f"≈ {need} seeds per cell" if need else "more than 100 seeds per cell (D sits near 0)"
  more += f", were D's mean and its seeds' spread to hold (now {seeds}; a projection of the Student-t interval)"
  return (
      study.INCONCLUSIVE,
      f"{text}: D's interval straddles 0",
      f"more seeds: {more}" + (f"; {advice}" if advice else ""),
  )


SHARPNESS = "curvature/lr_times_preconditioned_lambda_max"  # η(t)·λ_max(M·P_t⁻¹H): analysis/tracking.py
WINDOW = (1 / 3, 1.0)  # fractions of the run whose records give S: after the warmup, "along training"
LANCZOS = "curvature/lanczos_steps"  # a record's Lanczos steps (warm-started: it stops at analysis.tracking_tol)


def window_median(curve: list, steps: int) -> Optional[float]:
  """The median of `curve`'s [step, value] records with step in `WINDOW`·steps (finite, positive); None if none."""
  vals = [v for s, v in curve if WINDOW[0] * steps <= s <= WINDOW[1] * steps and stats.finite(v) and v > 0]
  return float(np.median(vals)) if vals else None


def sharpness_record(run: Any, steps: int) -> dict:
  """`curve` (a run's [step, η(t)·λ_max(M·P_t⁻¹H)] records), `stat` (their `window_median`: S) and `max` (the largest
  after step 0) of a study.Run; an empty curve and None for a run without curvature records."""
  records = [r for r in run.metrics(split="train") if SHARPNESS in r]
  curve = [[r["step"], r[SHARPNESS]] for r in records]
  late = [v for s, v in curve if s > 0 and stats.finite(v)]
  lanczos = [int(r[LANCZOS]) for r in records if stats.finite(r.get(LANCZOS))]
  return dict(curve=curve, stat=window_median(curve, steps), max=max(late) if late else None, lanczos=lanczos)


def sharpness_slopes(rows: dict[str, dict[int, list[dict]]]) -> tuple[dict, dict]:
  """({arm: {str(size): {mean, std, seeds, max}}}, {arm: [slope, lo, hi] or None}) from `rows` {arm: {size: [runs
  with `stat` and `max`]}}: the log₂ S vs log₂ size slope over every (size, seed) with S > 0, with its Student-t
  interval (experiments/stats.py `slope_interval`); None with fewer than 3 points or one size."""
  sharp, slopes = {}, {}
  for arm, sizes in rows.items():
    sharp[arm] = {str(d): dict(zip(("mean", "std"), study.mean_std([r["stat"] for r in runs])), seeds=[r["stat"] for r in runs], max=study.mean_std([r["max"] for r in runs])[0]) for d, runs in sorted(sizes.items())}  # fmt: skip
    pts = [(math.log2(d), math.log2(r["stat"])) for d, runs in sizes.items() for r in runs if r["stat"]]
    ok = len(pts) >= 3 and len({x for x, _ in pts}) >= 2
    slopes[arm] = list(stats.slope_interval(*zip(*pts))) if ok else None
  return sharp, slopes


def sharpness_vs_size(ax, sharp: dict, slopes: dict, colours: dict, sizes: list[int], *, word: str, xlabel: str):
  """S vs size per arm (`sharp`, `slopes`: `sharpness_slopes`' pair), log-log, mean ± the seeds' std, each arm
  labelled by its slope with its interval."""
  for a, per in sharp.items():
    rows = sorted((int(d), s) for d, s in per.items() if s["mean"])
    if rows:
      ds, ss = zip(*rows)
      label = f"{a}: slope {stats.fmt(tuple(slopes[a]))}" if slopes.get(a) else a
      ax.errorbar(ds, [s["mean"] for s in ss], yerr=[s["std"] or 0 for s in ss], fmt="o-", color=colours[a], capsize=3, label=label)  # fmt: skip
  plots.size_axis(ax, sizes)
  ax.set_yscale("log")
  plots.plain_log_y(ax)
  ax.set(xlabel=xlabel, ylabel="window median η·λ_max(M·P⁻¹H)", title=f"sharpness vs {word} (mean ± seeds' std)")
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=7, loc="best")
