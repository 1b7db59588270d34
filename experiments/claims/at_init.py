"""What the at-init claims (3 attention_scale, 5 grad_norms, 7 hessian_spectrum) share: the analysis settings of a
run in words (for figure titles) and a band over seeds.

Contract: `analysis_settings(run)` reads only the run's `analysis/step_0/metadata.json` (written by analysis.run) and
says which batches, how many tokens and which dtype the analysis used; `seed_band(ax, x, per_seed, color)` draws the
min–max band of `per_seed` [seeds, len(x)] (nothing for one seed) and returns the seed mean; `log_y(ax)` a log y
axis whose ticks are labelled in plain numbers even when the data span less than a decade.
"""

import numpy as np
from matplotlib import ticker

from experiments import study


def analysis_settings(run: study.Run) -> str:
  """'analysis on 2 batch(es) × 32 sequences (1,563 non-padding tokens per batch), float64' of one run."""
  meta = run.analysis("metadata")
  rows = meta["batch_shapes"][0]["targets"][0]
  tokens = meta["total_tokens"] / max(meta["num_batches"], 1)
  return (
      f"analysis on {meta['num_batches']} batch(es) × {rows} sequences ({tokens:,.0f} non-padding tokens per batch), "
      f"{meta['dtype']}"
  )


def model_size(run: study.Run) -> str:
  """'6+6 layers, d=512, 8 heads (d_k=64), d_ff=2048' from the run's resolved model config."""
  m = run.config()["model"]
  d_k = m["head_dim"] or m["d_model"] // m["num_heads"]
  layers = {
      "encoder_decoder": f"{m['num_encoder_layers']}+{m['num_decoder_layers']} layers",
      "encoder": f"{m['num_encoder_layers']}-layer encoder",
      "decoder": f"{m['num_decoder_layers']}-layer decoder",
  }[m["arch"]]
  return f"{layers}, d={m['d_model']}, {m['num_heads']} heads (d_k={d_k}), d_ff={m['d_ff']}"


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
  ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
  ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
  ax.yaxis.set_minor_formatter(ticker.NullFormatter())
