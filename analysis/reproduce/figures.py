"""Matplotlib (Agg backend, no display) and the one way claim figures are saved: PNG into the claim's workdir."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the backend)


def save(fig, workdir: str, name: str) -> str:
  """Saves `fig` as `<workdir>/<name>` (a .png) and returns `name` (the result lists figures relative to workdir)."""
  os.makedirs(workdir, exist_ok=True)
  fig.tight_layout()
  fig.savefig(os.path.join(workdir, name), dpi=100)
  plt.close(fig)
  return name
