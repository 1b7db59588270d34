"""The plot kit of experiments/ (matplotlib, Agg: no display): what every figure of a sweep or a study is drawn with.

  save_figure(fig, path) / save(fig, out_dir, name)   lay out, write (rendered in memory, written whole through
                     epath, so a path may be a URI) and close a figure;
  redrawn_on_change  a decorator of figure functions that skips a figure whose inputs did not change since its PNG
                     was written: a report rewritten as runs land (a resumed sweep, a study re-decided) would spend
                     most of its time redrawing figures whose data had not moved. The PNG carries the key (a tEXt
                     chunk, `FIGURE_KEY`): a SHA-256 of the inputs, the function's name, the source of its module and
                     of this one, and matplotlib's version;
  suptitle, headline_title, fit_text   titles wrapped to the figure's width, or a headline over the fixed settings;
  figure_legend      one legend under every panel of a figure; palette, grid_of_axes, bottom_xlabels: small multiples;
  log_loss_axis, plain_log_ticks, plain_log_y, log_y, size_axis   log axes labelled as plain numbers;
  seed_band          the min–max band over seeds.
Figures of one study stay in its module; analysis/plots.py draws the analysis layer's own records (it cannot import
this module: analysis/ sits below experiments/).
"""

import contextvars
import functools
import hashlib
import inspect
import io
import json
import math
import os
import pickle
import sys
import textwrap
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

from experiments import stats  # noqa: E402

FIGURE_KEY = "inputs-sha256"  # the PNG text chunk holding a figure's key (module docstring)


_pending_key: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("figure key", default=None)


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
  v = [float(x) for x in values if stats.finite(x) and x > 0]
  low = min(v) / 1.12 if v else 1.0
  high = top if top is not None else (max(v) * 1.12 if v else 10.0)
  low = min(low, high / 1.5)
  ax.set_yscale("log")
  ax.set_ylim(low, high)
  plain_log_ticks(ax.yaxis, low, high)
  return low, high


def short_e(v: float) -> str:
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
  short = short_e if low < 0.01 else (lambda v: f"{v:g}")
  axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: short(v)))
  axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def palette(labels: Iterable[str]) -> dict[str, Any]:
  """One colour per label, the same in every panel (tab10, tab20, or viridis samples past 20)."""
  labels = list(dict.fromkeys(labels))
  if len(labels) <= 10:
    colors = plt.get_cmap("tab10").colors
  elif len(labels) <= 20:
    colors = plt.get_cmap("tab20").colors
  else:
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.95, len(labels)))
  return dict(zip(labels, colors))


def grid_of_axes(n: int, width: float, height: float, extra: float = 0.0):
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


def bottom_xlabels(axes: list, text: str) -> None:
  """`text` under the lowest panel of each column of `grid_of_axes`'s panels (a figure's supxlabel would sit where
  the legend under the panels goes)."""
  ncols = min(4, len(axes))
  for col in range(ncols):
    axes[max(range(col, len(axes), ncols))].set_xlabel(text, fontsize=8)


def save(fig, out_dir: str, name: str) -> str:
  """Saves `fig` as `<out_dir>/<name>` (PNG, as the sweep's own figures) and returns `name`."""
  os.makedirs(out_dir, exist_ok=True)
  save_figure(fig, os.path.join(out_dir, name))
  return name


def headline_title(fig, headline: str, settings: str) -> None:
  """A study figure's title: the headline, then the fixed settings (model size, data, steps, lr, warmup, seeds)."""
  fig.suptitle(headline + "\n" + "\n".join(textwrap.wrap(settings, 110)), fontsize=8)


def seed_band(ax, x, per_seed, color: str, alpha: float = 0.2) -> np.ndarray:
  """Fills min–max over seeds (rows of `per_seed`) when there are several; returns the mean over seeds."""
  per_seed = np.asarray(per_seed, float)
  if len(per_seed) > 1:
    ax.fill_between(x, per_seed.min(0), per_seed.max(0), color=color, alpha=alpha, lw=0)
  return per_seed.mean(0)


def log_y(ax) -> None:
  """Log y axis (call after plotting) with plain-number labels: at 1…9 × 10^k within a decade of data, else at 1, 2,
  5 × 10^k (matplotlib labels none inside a single decade)."""
  ax.set_yscale("log")
  low, high = ax.dataLim.y0, ax.dataLim.y1
  subs = tuple(range(1, 10)) if low > 0 and high / low < 10 else (1.0, 2.0, 5.0)
  ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
  ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def plain_log_y(ax) -> None:
  """`ax`'s log y axis labelled as plain numbers over the data drawn on it (`plain_log_ticks`)."""
  ys = [y for line in ax.get_lines() for y in np.asarray(line.get_ydata(), dtype=float) if np.isfinite(y) and y > 0]
  if ys:
    plain_log_ticks(ax.yaxis, min(ys), max(ys))


def size_axis(ax, sizes: list[int]) -> None:
  """A log₂ x axis labelled by the sizes themselves."""
  ax.set_xscale("log", base=2)
  ax.set_xticks(sizes, [str(d) for d in sizes])
  ax.minorticks_off()
