"""A sweep's table and figures, drawn from its records alone (results.jsonl and each run's metrics.jsonl).

Contract: `write_report(records, workdir, swept=..., metric=..., config=...)` writes into `workdir`:
  results.md         one row per cell: its arm (a union grid's named product, when there are some), the swept keys'
                     values, the final `metric` as mean ± std (sample std, over the cell's finished seeds with a
                     finite value; n says how many) and the outcomes' counts;
  curves.png         the training loss (log axis) against the step, one line per cell (the mean over seeds) with the
                     min–max band over seeds; a run that did not finish ends at its last finite loss, marked ×;
  final_metric.png   the final `metric` against each swept key (one panel per key; the other keys' values are the
                     series): mean ± std over seeds and every seed's value (a loss on a log axis); cells with no
                     finite value are named at the bottom of the panel with their outcomes.
A sweep of more than MAX_LINES cells is drawn as small multiples (`panels`): one panel per arm of a union grid (a
study's methods, each labelled by the keys that vary within it, e.g. the learning rate and the warmup) or per value of
a product grid's first key, so that a study of 19 methods × 9 learning rates reads as 19 panels, not as one axes with
173 legend entries naming 20 keys each. A series keeps its colour in every panel, under one legend.
Every figure's title names the settings the sweep holds fixed (size, data, optimizer, learning rate, warmup, steps,
seeds), so a figure read alone says what was compared; it is wrapped to the figure's width (experiments/plots.py,
whose `redrawn_on_change` skips a figure whose inputs did not change).

Files go through `etils.epath` (the table, each figure rendered in memory and written whole, the runs' metrics read
back), so `workdir` may be a URI such as `gs://bucket/sweep`; a record's `workdir` is relative to the sweep's
(`relative`), or a whole URI when its run lives on another filesystem (`run_path` reads both).
"""

import collections
import math
import os
import posixpath
from typing import Any, Optional, Sequence

import matplotlib.ticker
import numpy as np

from experiments import plots, stats
from models.config import PRESETS
from train import metrics as metrics_lib

OUTCOMES = ("finished", "diverged", "crashed")


def _scheme(path: str) -> Optional[str]:
  return path.partition("://")[0] if "://" in path else None


def relative(path: str, start: str) -> str:
  """`path` relative to `start` when both are local or under one URI scheme (os.path.relpath would first make a URI a
  local absolute path); else `path` itself, whole."""
  path, start = os.fspath(path), os.fspath(start)
  scheme = _scheme(path)
  if scheme != _scheme(start):
    return path
  if scheme is None:
    return os.path.relpath(path, start)
  return posixpath.relpath("/" + path.split("://", 1)[1], "/" + start.split("://", 1)[1])


def run_path(workdir: str, run: str) -> str:
  """The folder of a record's `workdir` (`relative`'s result) seen from the sweep's `workdir`."""
  return run if _scheme(run) else os.path.join(workdir, run)


def summarize(records: list[dict], metric: str) -> list[dict]:
  """One row per cell, in record order: {cell, params, arm, values (finished seeds' finite metric), mean, std, n,
  outcomes (Counter)}."""
  rows: dict[str, dict] = {}
  for r in records:
    row = rows.setdefault(
        r["cell"], {"cell": r["cell"], "params": r["params"], "arm": r.get("arm", ""), "values": [], "outcomes": {}}
    )
    row["outcomes"][r["outcome"]] = row["outcomes"].get(r["outcome"], 0) + 1
    value = r["final"].get(metric)
    if r["outcome"] == "finished" and stats.finite(value):
      row["values"].append(float(value))
  for row in rows.values():
    v = np.asarray(row["values"])
    row["n"] = len(v)
    row["mean"] = float(v.mean()) if len(v) else None
    row["std"] = float(v.std(ddof=1)) if len(v) > 1 else None
  return list(rows.values())


def _outcomes(counts: dict) -> str:
  return ", ".join(f"{counts[o]} {o}" for o in (*OUTCOMES, *sorted(set(counts) - set(OUTCOMES))) if counts.get(o))


def markdown_table(rows: list[dict], swept: list[str], metric: str) -> str:
  """The results.md table (see the module docstring)."""
  keys = swept or ["cell"]
  arms = any(row.get("arm") for row in rows)  # a union grid's named products (a study's methods): a column first
  head = [*(["arm"] if arms else []), *keys, f"final {metric} (mean ± std)", "n", "outcomes"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in rows:
    values = [str(row["params"][k]) for k in swept] if swept else [row["cell"]]
    values = [row.get("arm") or "", *values] if arms else values
    if row["mean"] is None:
      stat = "—"
    else:
      stat = f"{row['mean']:.4f}" + (f" ± {row['std']:.4f}" if row["std"] is not None else "")
    lines.append("| " + " | ".join([*values, stat, str(row["n"]), _outcomes(row["outcomes"])]) + " |")
  return "\n".join(lines) + "\n"


def fixed_settings(config: Any, swept: list[str], seeds: Any, first_seed: int = 0) -> str:
  """The settings the sweep holds fixed, as a figure title (swept keys left out; no optimizer at 0 steps). `seeds`:
  the seeds per cell, or the distinct counts where products run their own (experiments/grid.py `seed_counts`)."""
  m, o, d, t = config.model, config.optim, config.data, config.train
  sizes = {k: (m[k] if m[k] is not None else PRESETS[m.preset][k]) for k in PRESETS[m.preset]}
  layers = {
      "encoder_decoder": f"{sizes['num_encoder_layers']}+{sizes['num_decoder_layers']} layers",
      "encoder": f"{sizes['num_encoder_layers']}-layer encoder",
      "decoder": f"{sizes['num_decoder_layers']}-layer decoder",
  }.get(m.arch, m.arch)
  swept_layers = {"model.num_encoder_layers", "model.num_decoder_layers"} & set(swept)  # a depth sweep: d alone
  items = [
      ("model.preset", f"d={sizes['d_model']}" + ("" if swept_layers else f", {layers}")),
      ("model.norm_position", f"{m.norm_position}-norm"),
      ("init.scheme", f"init {config.init.scheme}"),
      ("data.name", f"data {d.name}"),
  ]
  if t.num_steps:
    items += [
        ("optim.name", str(o.name)),
        ("optim.learning_rate", f"lr {o.learning_rate:g}"),
        ("optim.schedule", str(o.schedule)),
        ("optim.warmup_steps", f"warmup {o.warmup_steps}"),
        ("data.batch_size", f"batch {d.batch_size}"),
        ("train.num_steps", f"{t.num_steps} steps"),
    ]
  else:
    items.append(("train.num_steps", "at init"))
  kept = [text for key, text in items if key not in swept and not (key == "model.preset" and "model.d_model" in swept)]
  counts = sorted(set(seeds)) if isinstance(seeds, (tuple, list)) else [seeds]
  last = first_seed + counts[-1] - 1
  if len(counts) > 1:
    return ", ".join(kept) + f"; seeds {first_seed}–{first_seed + counts[0] - 1} to {first_seed}–{last} (per product)"
  return ", ".join(kept) + (f"; seeds {first_seed}–{last}" if counts[0] > 1 else f"; seed {first_seed}")


MAX_LINES = 12  # the cells one panel draws; a sweep with more is drawn as small multiples (`panels`)


def _varying(cells: list[dict], keys: Sequence[str]) -> list[str]:
  return [k for k in keys if len({repr(c["params"][k]) for c in cells}) > 1]


def panels(cells: list[dict], swept: list[str]) -> tuple[list[tuple[str, list[dict]]], list[str], bool]:
  """How a sweep's `cells` (one record or row per cell: params, arm) are laid out: ([(panel title, its cells)], the
  keys that tell a cell from the others of its panel, whether a cell's label names its arm).

  At most MAX_LINES cells, or a product grid over one key: one panel. More, in a union grid whose products are named
  (a study's methods): one panel per arm, its cells told apart by the keys that vary within arms (the learning rate,
  the warmup), not by the 20 keys in which the arms differ. More, in a product grid: one panel per value of its first
  varying key."""
  arms = list(dict.fromkeys(c.get("arm", "") for c in cells))
  named = any(arms) and len(arms) > 1
  if named:
    by_arm = {a: [c for c in cells if c.get("arm", "") == a] for a in arms}
    within = [k for k in swept if any(k in _varying(group, swept) for group in by_arm.values())]
    if len(cells) <= MAX_LINES:
      return [("", cells)], within, True
    return [(a or "(unnamed)", group) for a, group in by_arm.items()], within, False
  keys = _varying(cells, swept)
  if len(cells) <= MAX_LINES or len(keys) < 2:
    return [("", cells)], keys, False
  first, rest = keys[0], keys[1:]
  values = list(dict.fromkeys(repr(c["params"][first]) for c in cells))
  return (
      [(f"{first.split('.')[-1]}={v}", [c for c in cells if repr(c["params"][first]) == v]) for v in values],
      rest,
      False,
  )


def cell_label(cell: dict, keys: Sequence[str], with_arm: bool, drop: Optional[str] = None) -> str:
  """`cell`'s legend entry: its arm (if `with_arm`) and its values of `keys` (short names; `drop` left out)."""
  values = ", ".join(f"{k.split('.')[-1]}={cell['params'][k]}" for k in keys if k != drop)
  arm = cell.get("arm", "") if with_arm else ""
  return f"{arm}: {values}" if arm and values else (arm or values or cell["cell"])


def plot_curves(records: list[dict], workdir: str, swept: list[str], title: str, path: str) -> str:
  """curves.png: the training loss per cell, mean over seeds with the min–max band (module docstring), on a log axis;
  more than MAX_LINES cells as small multiples (`panels`); one legend under the panels (a series keeps its colour in
  every panel), the title wrapped to the figure's width. A cell with no training curve (an analysis at init) is left
  out."""
  by_cell: dict[str, list[dict]] = collections.defaultdict(list)
  for r in records:
    by_cell[r["cell"]].append(r)
  drawn = {}  # cell -> (runs, steps, lo, mean, hi, ends)
  for cell, runs in by_cell.items():
    per_step: dict[int, list[float]] = collections.defaultdict(list)
    ends = []  # (step, loss) where a run that did not finish last had a finite loss
    for r in runs:
      curve = [
          (rec["step"], rec["loss"])
          for rec in metrics_lib.read_metrics(run_path(workdir, r["workdir"]), split="train")
          if stats.finite(rec.get("loss"))
      ]
      for step, loss in curve:
        per_step[step].append(loss)
      if r["outcome"] != "finished" and curve:
        ends.append(curve[-1])
    if per_step:
      steps = np.asarray(sorted(per_step))
      lo, mean, hi = (np.asarray([f(per_step[s]) for s in steps]) for f in (np.min, np.mean, np.max))
      drawn[cell] = (runs, steps, lo, mean, hi, ends)
  layout, keys, with_arm = panels([v[0][0] for v in drawn.values()], swept)
  labels = {cell: cell_label(v[0][0], keys, with_arm) for cell, v in drawn.items()}
  colors = plots.palette(labels.values())
  cols = 3 if len(layout) == 1 else 6
  extra = 0.2 * math.ceil(len(colors) / cols) + 0.6
  fig, axes = plots.grid_of_axes(len(layout), 7.5 if len(layout) == 1 else 3.8, 3.8 if len(layout) == 1 else 2.8, extra)
  shown = [v for runs, steps, lo, mean, hi, ends in drawn.values() for v in (*lo, *hi)]
  for ax, (name, cells) in zip(axes, layout):
    notes = []
    for cell in cells:
      runs, steps, lo, mean, hi, ends = drawn[cell["cell"]]
      color = colors[labels[cell["cell"]]]
      bad = {o: n for o, n in collections.Counter(r["outcome"] for r in runs).items() if o != "finished"}
      label = labels[cell["cell"]]
      ax.plot(steps, mean, marker="o" if len(steps) < 12 else None, ms=3, lw=1.4, color=color, label=label)
      if len(runs) > 1:
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
      if ends:
        ax.plot(*zip(*ends), "x", color=color, ms=8, mew=2)
      if bad:
        notes.append(f"{label}: " + ", ".join(f"{n}/{len(runs)} {o}" for o, n in bad.items()))
    if notes:  # the outcomes other than finished, one line per cell, in the panel's upper right corner
      ax.text(0.98, 0.98, "\n".join(notes), transform=ax.transAxes, ha="right", va="top", fontsize=6)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10], nbins=5))
    plots.log_loss_axis(ax, shown)
    if name:
      ax.set_title(name, fontsize=9)
  if len(layout) == 1:
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("training loss (nats per token, log scale)")
    axes[0].set_title("Training loss, mean over seeds (band: min–max; ×: a run's last finite loss)", fontsize=9)
  else:
    plots.bottom_xlabels(axes, "training step")
    fig.supylabel("training loss (nats per token, log scale)", fontsize=9)
  head = "" if len(layout) == 1 else "Training loss, mean over seeds (band: min–max; ×: a run's last finite loss)\n"
  plots.suptitle(fig, head + title, fontsize=9)
  if drawn:
    plots.figure_legend(fig, max_cols=cols)
  return plots.save_figure(fig, path)


@plots.redrawn_on_change()
def plot_final_metric(rows: list[dict], swept: list[str], metric: str, title: str, path: str) -> str:
  """final_metric.png: the final metric (mean ± std over seeds, and each seed) against a swept key. At most MAX_LINES
  cells: one panel per key that varies, the other keys' values being the series. More (`panels`): one panel per arm
  (or per value of the first key), against the key with most values there. A series keeps its colour in every panel,
  under one legend; a cell whose runs did not finish is named by its outcomes at the bottom of the panel; a cell that
  finished with no value of `metric` (an analysis at init) is left out."""
  rows = [r for r in rows if r["mean"] is not None or set(r["outcomes"]) - {"finished"}]
  layout, keys, with_arm = panels(rows, swept)
  if len(layout) == 1:
    specs = [(f"final {metric} vs {k}", rows, k) for k in keys] or [(f"final {metric}", rows, None)]
  else:
    main = max(keys, key=lambda k: len({repr(r["params"][k]) for r in rows}), default=None)
    specs = [(name, cells, main) for name, cells in layout]
  series_of = {
      (i, r["cell"]): cell_label(r, keys, with_arm, drop=key) for i, (_, cells, key) in enumerate(specs) for r in cells
  }
  colors = plots.palette(series_of.values())
  cols = 3 if len(specs) <= 4 else 6
  extra = 0.2 * math.ceil(len(colors) / cols) + 0.6
  single = len(layout) == 1
  fig, axes = plots.grid_of_axes(len(specs), 5.0 if single else 3.8, 4.2 if single else 2.8, extra)
  values = [v for r in rows for v in r["values"]]
  for i, (ax, (name, cells, key)) in enumerate(zip(axes, specs)):
    xs = list(dict.fromkeys(r["params"][key] for r in rows)) if key else [None]
    numeric = key is not None and all(stats.finite(v) for v in xs)  # lines join ordered values, not categories
    if numeric:
      xs = sorted(xs)
    series: dict[str, list[dict]] = collections.defaultdict(list)
    for r in cells:
      series[series_of[(i, r["cell"])]].append(r)
    width = 0.3 / max(len(series), 1)
    failed = 0
    for j, (label, group) in enumerate(series.items()):
      shift = (j - (len(series) - 1) / 2) * width
      done = sorted(
          (c for c in group if c["mean"] is not None), key=lambda c: xs.index(c["params"][key] if key else None)
      )
      x = [xs.index(c["params"][key] if key else None) + shift for c in done]
      err = [c["std"] or 0.0 for c in done]
      color = colors[label]
      ax.errorbar(
          x, [c["mean"] for c in done], yerr=err, fmt="o-" if numeric else "o", capsize=3, color=color, label=label
      )
      for c, xc in zip(done, x):
        ax.plot([xc] * len(c["values"]), c["values"], ".", color=color, alpha=0.5)
      for c in group:
        if c["mean"] is None:  # stacked up from the bottom, one line per such cell: none overprints another
          xc = xs.index(c["params"][key] if key else None) + shift
          ax.annotate(
              _outcomes(c["outcomes"]),
              (xc, 0.02 + 0.07 * failed),
              xycoords=ax.get_xaxis_transform(),
              ha="center",
              fontsize=6,
              color=color,
          )
          failed += 1
    ax.set_xticks(range(len(xs)), [str(x) for x in xs] if key else ["base"], fontsize=7)
    if len(xs) > 4:
      ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlim(-0.5, len(xs) - 0.5)
    if "loss" in metric and values and all(v > 0 for v in values):  # a loss: log axis (nats)
      plots.log_loss_axis(ax, values)
      ylabel = f"final {metric} (nats, log scale)"
    else:
      ylabel = f"final {metric}"
    if single:
      ax.set_xlabel(key or "cell")
      ax.set_ylabel(ylabel)
      ax.set_title(f"{name}\n(mean ± std over seeds; dots: seeds)", fontsize=9)
    else:
      ax.set_title(name, fontsize=9)
  if not single:
    plots.bottom_xlabels(axes, specs[0][2] or "cell")
    fig.supylabel(ylabel, fontsize=9)
  head = "" if single else f"final {metric}, mean ± std over seeds (dots: seeds)\n"
  plots.suptitle(fig, head + title, fontsize=9)
  if len(colors) > 1:
    plots.figure_legend(fig, max_cols=cols)
  return plots.save_figure(fig, path)


def write_report(
    records: list[dict], workdir: str, *, swept: list[str], metric: str, config: Any, seeds: Any = None
) -> dict[str, str]:
  """results.md, curves.png and final_metric.png of `records` in `workdir`; returns their paths. A sweep that trains
  nothing (train.num_steps = 0: analyses at init) has no curves: only the table is written."""
  rows = summarize(records, metric)
  first = min((r["seed"] for r in records), default=0)
  seeds = seeds or max((r["seed"] for r in records), default=0) + 1 - first
  title = fixed_settings(config, swept, seeds, first)
  table = os.path.join(workdir, "results.md")
  metrics_lib.write_text_atomic(table, f"# Sweep results\n\nFixed: {title}.\n\n{markdown_table(rows, swept, metric)}")
  if not config.train.num_steps:
    return {"table": table}
  return {
      "table": table,
      "curves": plot_curves(records, workdir, swept, title, os.path.join(workdir, "curves.png")),
      "final_metric": plot_final_metric(rows, swept, metric, title, os.path.join(workdir, "final_metric.png")),
  }
