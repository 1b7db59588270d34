"""The analysis command's plots (analysis/plots.py): signal.png's axes (linear where the second moment is constant to
float noise, log over decades, integer layer ticks), blocks.png's log colour scale (symmetric where a block's value is
negative), and the spectral density drawn with gaps below the SLQ floor rather than a shelf."""

import math

import matplotlib.colors as mcolors
import numpy as np
import pytest

from analysis import plots
from tests.test_claims_init import _integer_ticks

# ------------------------------------------------------------------------------------- the analysis command's plots


@pytest.fixture
def plotted(monkeypatch):
  figs = []
  monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or path)
  yield figs
  for fig in figs:
    plots.plt.close(fig)


def _signal_records(moments):
  return [
      dict(stack="encoder", layer=i, sublayer="mlp", second_moment_out=q, branch_ratio=0.5 * 10**i, x0_cosine=0.9)
      for i, q in enumerate(moments)
  ]


def test_signal_plot_axes(plotted):
  plots.plot_signal(_signal_records([1 - 1e-7, 1.0, 1 + 2e-7, 1.0, 1.0]), "unused.png")
  (fig,) = plotted
  moment, ratio, cosine = fig.axes[:3]
  assert moment.get_yscale() == "linear"  # a constant to 1e-7: no log axis over float noise
  low, high = moment.get_ylim()
  assert high - low >= 0.05 and low < 1.0 < high
  assert ratio.get_yscale() == "log"  # four decades
  assert all(_integer_ticks(ax) for ax in (moment, ratio, cosine))


def _block(kind, layer, value):
  return dict(
      name=f"encoder/layer_{layer}/{kind}", stack="encoder", layer=layer, kind=kind, top_value=value, top_bound=0.0
  )


@pytest.mark.parametrize(
    "values, norm",
    [((1e-3, 2e-2, 0.5, 10.0), mcolors.LogNorm), ((-1e-3, 2e-2, 0.5, 10.0), mcolors.SymLogNorm)],
)
def test_blocks_plot_uses_a_log_colour_scale(plotted, values, norm):
  blocks = [
      _block(kind, layer, v)
      for (kind, layer), v in zip([("mlp_in", 0), ("mlp_out", 0), ("mlp_in", 1), ("mlp_out", 1)], values)
  ]
  plots.plot_block_spectra(blocks, "unused.png")
  (fig,) = plotted
  image = fig.axes[0].get_images()[0]
  assert type(image.norm) is norm
  assert "log" in fig.axes[-1].get_ylabel()  # the colour bar says so


def test_spectral_density_plot_has_no_floor_shelves(plotted):
  grid = np.linspace(-10, 10, 201)
  rho = np.exp(-0.5 * grid**2) / np.sqrt(2 * np.pi)  # tails far below any floor
  spec = dict(grid=grid, density=rho, band_low=0.9 * rho, band_high=1.1 * rho, sigma=0.1, band_percentiles=[5, 95])
  plots.plot_spectral_density(spec, "unused.png", num_params=1000)
  (fig,) = plotted
  floor = plots.slq_floor(0.1, 1000)
  assert floor == pytest.approx(1 / (1000 * 0.1 * math.sqrt(2 * math.pi)))
  y = fig.axes[0].get_lines()[0].get_ydata()
  assert np.isnan(y[np.abs(grid) > 6]).all() and np.nanmin(y) >= floor  # gaps below the floor, not a shelf
