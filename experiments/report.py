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
seeds), so a figure read alone says what was compared; it is wrapped to the figure's width (`fit_text`).

`redrawn_on_change` (a decorator of figure functions) skips a figure whose inputs did not change since its PNG was
written: a report rewritten as runs land (a resumed sweep, a study re-decided) would spend most of its time in
matplotlib redrawing figures whose data had not moved. The PNG carries the key (a tEXt chunk, `FIGURE_KEY`): a
SHA-256 of the inputs, the function's name, the source of its module and of this one, and matplotlib's version.

Files go through `etils.epath` (the table, each figure rendered in memory and written whole, the runs' metrics read
back), so `workdir` may be a URI such as `gs://bucket/sweep`; a record's `workdir` is relative to the sweep's
(`relative`), or a whole URI when its run lives on another filesystem (`run_path` reads both).
"""

import collections
import contextvars
import functools
import hashlib
import inspect
import io
import json
import math
import os
import pickle
import posixpath
import sys
from typing import Any, Callable, Iterable, Optional, Sequence

import matplotlib
import matplotlib.font_manager
import matplotlib.layout_engine
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the backend)
import numpy as np  # noqa: E402
import PIL.Image  # noqa: E402  (matplotlib's own dependency, pinned in requirements.txt)
from etils import epath  # noqa: E402

from models.config import PRESETS  # noqa: E402
from train import metrics as metrics_lib  # noqa: E402

OUTCOMES = ("finished", "diverged", "crashed")


def finite(v: Any) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


FIGURE_KEY = "inputs-sha256"  # the PNG text chunk holding a figure's key (module docstring)
_pending_key: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("figure key", default=None)


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


def save_figure(fig, path: str) -> str:
  """Lays out (tight, unless the figure was made with layout="constrained"), writes (with the key of the
  `redrawn_on_change` call drawing it, if any; rendered in memory and written whole through epath) and closes `fig`."""
  if not isinstance(fig.get_layout_engine(), matplotlib.layout_engine.ConstrainedLayoutEngine):
    fig.tight_layout()
  key = _pending_key.get()
  buffer = io.BytesIO()
  fig.savefig(
      buffer,
      format=os.path.splitext(path)[1][1:] or "png",
      dpi=110,
      metadata={FIGURE_KEY: key} if key else None,
  )
  plt.close(fig)
  epath.Path(path).write_bytes(buffer.getvalue())
  return path


def saved_figure_key(path: str) -> Optional[str]:
  """The key a PNG was written with (None: no such file, not a PNG, or written without one)."""
  try:
    with epath.Path(path).open("rb") as f, PIL.Image.open(f) as image:
      return image.text.get(FIGURE_KEY)
  except (OSError, AttributeError, SyntaxError):  # missing, unreadable or truncated; not a PNG (no .text)
    return None


def figure_key(draw: Callable, args: tuple) -> str:
  """SHA-256 of `draw`'s inputs, name and module source, this module's source and matplotlib's version."""
  try:
    data = json.dumps(args, default=repr).encode()
  except (TypeError, ValueError):  # dict keys JSON cannot hold (tuples): the pickle is as deterministic here
    data = pickle.dumps(args)
  h = hashlib.sha256(data)
  for part in (draw.__qualname__, _source(draw.__module__), _source(__name__), matplotlib.__version__):
    h.update(b"\0" + part.encode())
  return h.hexdigest()


@functools.cache
def _source(module: str) -> str:
  return inspect.getsource(sys.modules[module])


def redrawn_on_change(name: Optional[str] = None) -> Callable[[Callable[..., str]], Callable[..., str]]:
  """Decorates a figure function that writes one PNG with `save_figure`. With a `name`, the function is
  `draw(inputs, out_dir, ..., *, path)`, its PNG `os.path.join(out_dir, name)`, and the decorator passes that `path`
  (the file is named once, here); with none, it is `draw(..., path)` and writes `path`, its last argument. A call whose
  key (`figure_key`, of the positional arguments) is the one the PNG was written with returns the path without
  drawing."""

  def decorate(draw: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(draw)
    def wrapped(*args):
      path = os.path.join(args[1], name) if name else args[-1]
      key = figure_key(draw, args)
      if saved_figure_key(path) == key:
        return path
      token = _pending_key.set(key)
      try:
        return draw(*args, path=path) if name else draw(*args)
      finally:
        _pending_key.reset(token)

    return wrapped

  return decorate


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
    if r["outcome"] == "finished" and finite(value):
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


def fixed_settings(config: Any, swept: list[str], seeds: int, first_seed: int = 0) -> str:
  """The settings the sweep holds fixed, as a figure title (swept keys left out; no optimizer at 0 steps)."""
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
  last = first_seed + seeds - 1
  return ", ".join(kept) + (f"; seeds {first_seed}–{last}" if seeds > 1 else f"; seed {first_seed}")


def fit_text(fig, text: str, fontsize: float, fraction: float = 0.95) -> str:
  """`text` broken at spaces so that each line, rendered at `fontsize`, is at most `fraction` of `fig`'s width: a
  title that stays inside its figure whatever the figure's size (a character count cannot say how wide a line is)."""
  renderer = fig.canvas.get_renderer()
  font = matplotlib.font_manager.FontProperties(size=fontsize)
  limit = fraction * fig.bbox.width

  def wide(line: str) -> bool:
    return renderer.get_text_width_height_descent(line, font, ismath=False)[0] > limit

  out = []
  for para in text.split("\n"):
    line = ""
    for word in para.split(" "):
      if line and wide(f"{line} {word}"):
        out.append(line)
        line = word
      else:
        line = f"{line} {word}" if line else word
    out.append(line)
  return "\n".join(out)


def suptitle(fig, text: str, fontsize: float = 8) -> None:
  """`fig`'s title, wrapped to its width (`fit_text`)."""
  fig.suptitle(fit_text(fig, text, fontsize), fontsize=fontsize)


def figure_legend(fig, handles=None, labels=None, *, max_cols: int = 3, fontsize: float = 8, **kw):
  """One legend for every panel of `fig` (a series keeps its colour across panels), under the panels of a figure
  made with layout="constrained": as many columns (at most `max_cols`) as fit the figure's width."""
  if handles is None:
    handles, labels = _unique_handles(fig)
  renderer = fig.canvas.get_renderer()
  for ncol in range(max(1, min(max_cols, len(handles))), 0, -1):
    legend = fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=fontsize, **kw)
    if ncol == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
      return legend
    legend.remove()
  return legend


def _unique_handles(fig) -> tuple[list, list]:
  """Every axes' labelled artists, the first of each label."""
  seen: dict[str, Any] = {}
  for ax in fig.axes:
    for handle, label in zip(*ax.get_legend_handles_labels()):
      seen.setdefault(label, handle)
  return list(seen.values()), list(seen)


def log_loss_axis(ax, values: Iterable[float], top: Optional[float] = None) -> tuple[float, float]:
  """A log y axis for losses (nats), from a little below the smallest positive finite value to `top` (default: a
  little above the largest), labelled by `plain_log_ticks`; returns the limits."""
  v = [float(x) for x in values if finite(x) and x > 0]
  low = min(v) / 1.12 if v else 1.0
  high = top if top is not None else (max(v) * 1.12 if v else 10.0)
  low = min(low, high / 1.5)
  ax.set_yscale("log")
  ax.set_ylim(low, high)
  plain_log_ticks(ax.yaxis, low, high)
  return low, high


def _short_e(v: float) -> str:
  """5e-5, 1.6e-2, 1.25e-3: three significant digits at most (a grid's 1.25e-3 is not 1.3e-3), no padding of the
  exponent."""
  mantissa, exponent = f"{v:.2e}".split("e")
  return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def plain_log_ticks(axis, low: float, high: float, at: Optional[Sequence[float]] = None) -> None:
  """Ticks of a log `axis` spanning [low, high] labelled as plain numbers, denser the shorter the span: over less
  than a decade or two the default ticks label nothing, or 4×10⁰ beside 10⁰; over more, the decades; over less than
  a third of a decade (where even 1, 2, 3, ... × 10ᵏ may leave one tick in view), 3 to 5 round values (0.01, 0.012,
  0.014, 0.016). `at`: ticks exactly there instead (a grid's values, e.g. lrs 4e-3, 8e-3, 1.6e-2, which no decade's
  subdivision holds)."""
  decades = math.log10(high / low) if high > low else 0.0
  if at is None and decades >= 2.5:
    return
  subs = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0) if decades < 0.7 else (1.0, 2.0, 5.0)
  if at is None and decades < 0.35:
    for nbins in (4, 6, 8):  # the fewest round values that put 3 in view
      at = list(matplotlib.ticker.MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high))
      if sum(low <= v <= high for v in at) >= 3:
        break
    at = [v for v in at if v > 0]
  if at is None:
    axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
  else:
    axis.set_major_locator(matplotlib.ticker.FixedLocator(sorted(set(at))))
  # below 0.01, 5e-5 and 1e-3 rather than 0.00005 and 0.001 (long labels crowd a narrow panel)
  short = _short_e if low < 0.01 else (lambda v: f"{v:g}")
  axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: short(v)))
  axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


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


def _palette(labels: Iterable[str]) -> dict[str, Any]:
  """One colour per label, the same in every panel (tab10, tab20, or viridis samples past 20)."""
  labels = list(dict.fromkeys(labels))
  if len(labels) <= 10:
    colors = plt.get_cmap("tab10").colors
  elif len(labels) <= 20:
    colors = plt.get_cmap("tab20").colors
  else:
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.95, len(labels)))
  return dict(zip(labels, colors))


def _grid_of_axes(n: int, width: float, height: float, extra: float = 0.0):
  """`n` panels, at most 4 a row (one row up to 4), in a constrained-layout figure; the unused panels hidden."""
  ncols = min(4, n)
  nrows = math.ceil(n / ncols)
  fig, axes = plt.subplots(
      nrows, ncols, figsize=(width * ncols, height * nrows + extra), squeeze=False, layout="constrained"
  )
  axes = list(axes.flat)
  for ax in axes[n:]:
    ax.set_axis_off()
  return fig, axes[:n]


def _bottom_xlabels(axes: list, text: str) -> None:
  """`text` under the lowest panel of each column of `_grid_of_axes`'s panels (a figure's supxlabel would sit where
  the legend under the panels goes)."""
  ncols = min(4, len(axes))
  for col in range(ncols):
    axes[max(range(col, len(axes), ncols))].set_xlabel(text, fontsize=8)


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
          if finite(rec.get("loss"))
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
  colors = _palette(labels.values())
  cols = 3 if len(layout) == 1 else 6
  extra = 0.2 * math.ceil(len(colors) / cols) + 0.6
  fig, axes = _grid_of_axes(len(layout), 7.5 if len(layout) == 1 else 3.8, 3.8 if len(layout) == 1 else 2.8, extra)
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
    log_loss_axis(ax, shown)
    if name:
      ax.set_title(name, fontsize=9)
  if len(layout) == 1:
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("training loss (nats per token, log scale)")
    axes[0].set_title("Training loss, mean over seeds (band: min–max; ×: a run's last finite loss)", fontsize=9)
  else:
    _bottom_xlabels(axes, "training step")
    fig.supylabel("training loss (nats per token, log scale)", fontsize=9)
  head = "" if len(layout) == 1 else "Training loss, mean over seeds (band: min–max; ×: a run's last finite loss)\n"
  suptitle(fig, head + title, fontsize=9)
  if drawn:
    figure_legend(fig, max_cols=cols)
  return save_figure(fig, path)


@redrawn_on_change()
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
  colors = _palette(series_of.values())
  cols = 3 if len(specs) <= 4 else 6
  extra = 0.2 * math.ceil(len(colors) / cols) + 0.6
  single = len(layout) == 1
  fig, axes = _grid_of_axes(len(specs), 5.0 if single else 3.8, 4.2 if single else 2.8, extra)
  values = [v for r in rows for v in r["values"]]
  for i, (ax, (name, cells, key)) in enumerate(zip(axes, specs)):
    xs = list(dict.fromkeys(r["params"][key] for r in rows)) if key else [None]
    numeric = key is not None and all(finite(v) for v in xs)  # lines join ordered values, not categories
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
      log_loss_axis(ax, values)
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
    _bottom_xlabels(axes, specs[0][2] or "cell")
    fig.supylabel(ylabel, fontsize=9)
  head = "" if single else f"final {metric}, mean ± std over seeds (dots: seeds)\n"
  suptitle(fig, head + title, fontsize=9)
  if len(colors) > 1:
    figure_legend(fig, max_cols=cols)
  return save_figure(fig, path)


def write_report(
    records: list[dict], workdir: str, *, swept: list[str], metric: str, config: Any, seeds: Optional[int] = None
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
