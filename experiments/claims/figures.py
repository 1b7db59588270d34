"""Matplotlib (Agg, no display) for the claims' figures: `plt`, `save` and a title that states the run's settings."""

import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the backend)

from experiments import report  # noqa: E402

__all__ = ["plt", "save", "suptitle"]


def suptitle(fig, headline: str, settings: str) -> None:
  """The figure's title: the headline, then the fixed settings (model size, data, steps, lr, warmup, seeds)."""
  fig.suptitle(headline + "\n" + "\n".join(textwrap.wrap(settings, 110)), fontsize=8)


def save(fig, out_dir: str, name: str) -> str:
  """Saves `fig` as `<out_dir>/<name>` (PNG, as the sweep's own figures) and returns `name`."""
  os.makedirs(out_dir, exist_ok=True)
  report.save_figure(fig, os.path.join(out_dir, name))
  return name
