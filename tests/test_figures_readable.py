"""Every figure is readable: one colour per series in every panel (so one legend reads for all), log axes for losses,
diverged runs drawn at a clipped top and never as losses, no text overprinting other text, nothing outside the figure.

The figures are drawn from small hand-made records (analysis.plots, experiments.report, experiments.atlas's
figures and axis figures) and inspected as laid out for saving: `save_figure` / `_save` are wrapped to keep the
figure, which is then drawn again to read its artists' extents.
"""

import itertools
import json
import math

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis import plots
from configs import default
from experiments import report
from experiments.atlas import axis_figures, figures

# ------------------------------------------------------------------------------ helpers


@pytest.fixture
def kept(monkeypatch):
  """The figures written (laid out and saved as usual, into tmp paths), kept for inspection."""
  figs = []
  save, plots_save = report.save_figure, plots._save
  monkeypatch.setattr(report, "save_figure", lambda fig, path: figs.append(fig) or save(fig, path))
  monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or plots_save(fig, path))
  yield figs
  for fig in figs:
    report.plt.close(fig)


def _texts(fig) -> list:
  """Every visible, non-empty text of `fig`: titles, axis labels, tick labels, annotations, legends."""
  out = list(fig.texts)
  for ax in fig.axes:
    if not ax.axison:
      continue
    out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    for axis in (ax.xaxis, ax.yaxis):  # the labels of ticks in view (the locator also places some outside)
      low, high = sorted(axis.get_view_interval())
      span = abs(high - low)
      out += [
          label
          for loc, label in zip(axis.get_majorticklocs(), axis.get_ticklabels())
          if low - 1e-9 * span <= loc <= high + 1e-9 * span
      ]
    if ax.get_legend():
      out += ax.get_legend().get_texts()
  for legend in fig.legends:
    out += legend.get_texts()
  return [t for t in out if t.get_visible() and t.get_text().strip()]


def _extent(text, renderer):
  return text.get_window_extent(renderer)


def assert_readable(fig) -> None:
  """No text outside the figure, no two texts overlapping (tick labels of one axis with each other included)."""
  canvas = FigureCanvasAgg(fig)  # a closed figure keeps no canvas of its own
  canvas.draw()
  renderer = canvas.get_renderer()
  box = fig.bbox
  texts = [(t, _extent(t, renderer)) for t in _texts(fig)]
  for t, e in texts:
    assert e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1, f"{t.get_text()!r} runs off the figure's side: {e} vs {box}"
    assert e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1, f"{t.get_text()!r} runs off the figure's top/bottom: {e}"
  for (a, ea), (b, eb) in itertools.combinations(texts, 2):
    overlap_w = min(ea.x1, eb.x1) - max(ea.x0, eb.x0)
    overlap_h = min(ea.y1, eb.y1) - max(ea.y0, eb.y0)
    assert overlap_w <= 1 or overlap_h <= 1, f"{a.get_text()!r} overprints {b.get_text()!r}"
  for legend in fig.legends:
    e = legend.get_window_extent(renderer)
    assert box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1 and box.y0 - 1 <= e.y0, "the legend runs off the figure"


def _line_colors(fig, key) -> dict:
  """{key(artist): set of colours} over every axes' lines and error bars (those without a key skipped)."""
  colors: dict = {}
  for ax in fig.axes:
    drawn = [(line, line) for line in ax.get_lines()]
    drawn += [(bars, bars.lines[0]) for bars in ax.containers if hasattr(bars, "has_yerr")]  # errorbar: its label
    for artist, line in drawn:
      k = key(artist)
      if k:
        colors.setdefault(k, set()).add(mcolors.to_hex(line.get_color()))
  return colors


def _label(line):
  label = line.get_label()
  return None if label.startswith("_") else label


LONG_SETTINGS = (
    "d=32, 6+6 layers, pre-norm, init xavier, data multi30k, adam, lr 0.001, linear_warmup, warmup 20, batch 32, "
    "200 steps; seeds 0–4; analysis batch 16, 20 Lanczos steps, every option a reviewer could want named here"
)

# ------------------------------------------------------------------------------ analysis.plots


def _signal_records():
  """T5-like: encoder self-attention and MLP, decoder self-, cross-attention and MLP; entropy on attention only."""
  recs = []
  for stack, subs in (("encoder", ("self_attn", "mlp")), ("decoder", ("self_attn", "cross_attn", "mlp"))):
    for layer in range(3):
      for k, sub in enumerate(subs):
        r = dict(
            stack=stack,
            layer=layer,
            sublayer=sub,
            second_moment_out=1.0 + layer + k,
            branch_ratio=0.5**layer,
            x0_cosine=0.9**layer,
        )
        if "attn" in sub:
          r["attn_entropy"] = [2.0 - 0.1 * layer - 0.2 * k, 2.1]
        recs.append(r)
  return recs


def test_signal_series_keep_one_colour_in_every_panel(kept, tmp_path):
  plots.plot_signal(_signal_records(), str(tmp_path / "signal.png"), title="t5: signal")
  (fig,) = kept
  colors = _line_colors(fig, _label)
  assert set(colors) == {"encoder/self_attn", "encoder/mlp", "decoder/self_attn", "decoder/cross_attn", "decoder/mlp"}
  assert all(len(c) == 1 for c in colors.values()), colors  # the cycle restarting per panel gives two or more
  assert len({c for cs in colors.values() for c in cs}) == 5  # and the series differ
  entropy = fig.axes[3]
  assert {_label(line) for line in entropy.get_lines()} == {
      "encoder/self_attn",
      "decoder/self_attn",
      "decoder/cross_attn",
  }
  # one legend, for the figure, naming every series in its colour
  (legend,) = fig.legends
  shown = {t.get_text(): mcolors.to_hex(h.get_color()) for t, h in zip(legend.get_texts(), legend.legend_handles)}
  assert shown == {name: c for name, (c,) in colors.items()}
  assert_readable(fig)


def test_grad_norm_parameters_keep_one_colour_across_stacks(kept, tmp_path):
  records = [
      dict(stack=stack, layer=layer, role=role, path=f"{stack}/layer_{layer}/{name}", norm_mean=v, norm_std=0.0)
      for stack, names in (("encoder", ("mlp/wi", "self_attn/query")), ("decoder", ("cross_attn/query", "mlp/wi")))
      for layer in range(3)
      for name, role, v in ((n, "mlp_in" if "mlp" in n else "attn_q", 1.0 + layer) for n in names)
  ]
  plots.plot_grad_norms(records, str(tmp_path / "grad_norms.png"))
  (fig,) = kept
  colors = _line_colors(fig, _label)
  assert set(colors) == {"mlp/wi", "self_attn/query", "cross_attn/query"}
  assert all(len(c) == 1 for c in colors.values()), colors  # mlp/wi: first in the decoder, second in the encoder


# ------------------------------------------------------------------------------ experiments.report (a sweep)


def _sweep(tmp_path):
  """Two lrs × two seeds; the large lr's seed 1 diverged at step 30 after its loss blew up to 500."""
  records = []
  for lr in (1e-3, 1e-1):
    for seed in (0, 1):
      run = tmp_path / f"lr{lr}" / f"seed_{seed}"
      run.mkdir(parents=True)
      bad = lr == 1e-1 and seed == 1
      lines = []
      for step in range(0, 50, 10):
        loss = 3.0 + 4.6 * math.exp(-0.05 * step)
        if bad and step >= 20:
          loss = 500.0 if step == 20 else float("nan")
        lines.append(json.dumps(dict(split="train", step=step, loss=loss)))
      (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
      records.append(
          dict(
              cell=f"lr={lr}",
              params={"optim.learning_rate": lr},
              seed=seed,
              workdir=str(run.relative_to(tmp_path)),
              outcome="diverged" if bad else "finished",
              final={"eval/loss": None if bad else 3.5 + 0.01 * seed},
          )
      )
  return records


def test_sweep_curves_log_loss_axis_and_the_subtitle_inside(kept, tmp_path):
  report.plot_curves(_sweep(tmp_path), str(tmp_path), ["optim.learning_rate"], LONG_SETTINGS, str(tmp_path / "c.png"))
  (fig,) = kept
  (ax,) = fig.axes
  assert ax.get_yscale() == "log"
  assert fig.get_suptitle().replace("\n", " ") == LONG_SETTINGS  # wrapped, not cut
  assert_readable(fig)  # the subtitle's extent inside the figure's


def test_sweep_final_metric_subtitle_inside(kept, tmp_path):
  rows = report.summarize(_sweep(tmp_path), "eval/loss")
  report.plot_final_metric(rows, ["optim.learning_rate"], "eval/loss", LONG_SETTINGS, str(tmp_path / "f.png"))
  (fig,) = kept
  assert fig.axes[0].get_yscale() == "log"
  assert_readable(fig)


def test_fixed_settings_title_fits_the_sweep_figures(kept, tmp_path):
  """The real title of a sweep over one key (every other setting named) inside curves.png."""
  config = default.get_config()
  config.train.num_steps = 200
  title = report.fixed_settings(config, ["optim.learning_rate"], 5)
  report.plot_curves(_sweep(tmp_path), str(tmp_path), ["optim.learning_rate"], title, str(tmp_path / "c.png"))
  assert_readable(kept[0])


def test_fit_text_wraps_to_the_figure_width():
  fig, _ = report.plt.subplots(figsize=(3, 2))
  text = report.fit_text(fig, LONG_SETTINGS, 8)
  assert text.replace("\n", " ") == LONG_SETTINGS and text.count("\n") >= 3
  fig.suptitle(text, fontsize=8)
  fig.canvas.draw()
  e = fig.texts[0].get_window_extent(fig.canvas.get_renderer())
  assert e.width <= fig.bbox.width
  report.plt.close(fig)


# ------------------------------------------------------------------------------ the atlas's figures

LOSS0 = 7.6  # ln(2000): the loss at init of a vocabulary of 2000


def _atlas():
  """Four methods × warmups {0, 20} × lrs {1e-3, 1e-2, 1e-1} × 2 seeds; B and C at the same point everywhere (their
  labels would overprint), D's warmup-0 runs at 1e-1: one diverged, one finished at 9000 nats (above ℓ₀), and at
  1e-2 one finished without a finite loss."""
  lrs = [1e-3, 1e-2, 1e-1]

  def runs(losses, outcomes, max_lr):
    return dict(
        lrs=lrs,
        losses=losses,
        outcomes=outcomes,
        mean_loss=[np.mean([v for v in vs if v is not None]) if any(vs) else None for vs in losses],
        max_lr=max_lr,
        max_lr_censored="above" if max_lr == lrs[-1] else "",
    )

  ok = [["finished"] * 2] * 3
  methods = {}
  for name, predicted, gain in (("A", 0.02, 0.1), ("B", 0.5, -0.05), ("C", 0.5, -0.05), ("D", 3.0, 0.3)):
    if name == "D":
      w0 = runs([[5.0, 5.1], [4.0, None], [None, 9000.0]], [ok[0], ok[0], ["diverged", "finished"]], 1e-3)
    else:
      w0 = runs([[5.0, 5.1], [4.0, 4.1], [3.8, 3.9]], ok, 1e-1 if name == "A" else 1e-2)
    w1 = runs([[5.0, 5.1], [3.9, 4.0], [3.7, 3.8]], ok, 1e-1)
    methods[name] = dict(
        loss0=LOSS0,
        predicted={k: predicted * f for k, f in (("gd", 1.0), ("adam", 0.01), ("update", 0.5), ("block", 2.0))},
        runs={0: w0, 20: w1},
        warmup_gain=gain,
    )
  predictors = {k: dict(rho_lr=0.1, rho_gain=-0.2) for k in ("gd", "adam", "update", "block")}
  return dict(best_loss=3.7, margin=0.1, unigram_entropy=5.4, methods=methods, predictors=predictors)


def test_loss_vs_lr_log_axis_and_diverged_runs_clipped_not_plotted(kept, tmp_path):
  m = _atlas()
  figures.loss_vs_lr(m, str(tmp_path), LONG_SETTINGS)
  (fig,) = kept
  clip = figures.clip_loss(m)
  assert clip == pytest.approx(figures.CLIP_ABOVE_LOSS0 * LOSS0)
  d = fig.axes[3]
  assert d.get_title().startswith("D") and d.get_yscale() == "log"
  low, high = d.get_ylim()
  assert clip < high < 1.2 * clip  # the axis stops a little above ℓ₀, not at 9000 nats
  losses = [
      y
      for line in d.get_lines()
      if line.get_gid() != "diverged"
      for y in np.asarray(line.get_ydata(), float)
      if np.isfinite(y)
  ]
  assert max(losses) < LOSS0  # the 9000-nat run is no loss on the axis
  red_mean = next(line for line in d.get_lines() if line.get_linestyle() == "-" and line.get_color() == "tab:red")
  mean = np.asarray(red_mean.get_ydata(), float)
  assert mean[0] == pytest.approx(5.05) and np.isnan(mean[1]) and np.isnan(mean[2])  # a seed failed: no mean there
  (crosses,) = [line for line in d.get_lines() if line.get_gid() == "diverged" and len(line.get_xdata())]
  assert list(crosses.get_ydata()) == [clip, clip] and crosses.get_marker() == "x"
  assert np.allclose(np.log10(crosses.get_xdata()), np.log10([1e-2, 1e-1]) - figures.DODGE_DECADES)
  assert any("diverged" in t.get_text() and "clipped" in t.get_text() for t in fig.legends[0].get_texts())
  assert any(t.get_text() == "collapsed: unigram entropy 5.4 ± 0.1 nats" for t in fig.legends[0].get_texts())
  assert_readable(fig)


def test_diverged_classification():
  assert figures.diverged(4.0, "diverged", LOSS0)
  assert figures.diverged(9000.0, "finished", LOSS0) and figures.diverged(None, "finished", LOSS0)
  assert figures.diverged(float("nan"), "finished", None)
  assert not figures.diverged(4.0, "finished", LOSS0) and not figures.diverged(None, "crashed", LOSS0)


def test_atlas_json_keys_read_back():
  m = json.loads(json.dumps(_atlas()))  # atlas.json: the warmups' keys become strings
  assert list(figures._runs(m["methods"]["A"])) == [0, 20]


@pytest.mark.parametrize("draw", [figures.predicted_vs_measured, figures.warmup_gain])
def test_method_scatter_has_a_legend_not_overprinted_labels(kept, tmp_path, draw):
  m = json.loads(json.dumps(_atlas()))  # drawn from atlas.json alone
  draw(m, str(tmp_path), LONG_SETTINGS)
  (fig,) = kept
  assert all(not ax.texts for ax in fig.axes)  # no text beside a point
  colors = _line_colors(fig, lambda line: line.get_gid())
  assert set(colors) == {"A", "B", "C", "D"} and all(len(c) == 1 for c in colors.values())
  assert len({c for cs in colors.values() for c in cs}) == 4
  legend_names = {t.get_text() for t in fig.legends[0].get_texts()}
  assert {"A", "B", "C", "D"} <= legend_names
  # B and C coincide: concentric rings, the first larger, so both show
  for ax in fig.axes:
    sizes = {line.get_gid(): line.get_markersize() for line in ax.get_lines() if line.get_gid() in ("B", "C")}
    assert sizes["B"] > sizes["C"]
  assert_readable(fig)


# ------------------------------------------------------------------------------ the atlas's axis figures


def test_width_and_depth_one_colour_per_arm(kept, tmp_path):
  width = dict(
      rows={
          arm: dict(
              widths=[32.0, 64.0, 128.0],
              lambda_max=[s, 2 * s, 4 * s],
              lambda_max_bound=[0.0] * 3,
              p_lambda=[1e4 * s, 1e5, 1e6],
              p_lambda_bound=[0.0] * 3,
              slope=1.0,
              p_slope=2.0,
          )
          for arm, s in (("standard", 1.0), ("ntk", 0.3), ("mup", 2.0))
      },
      verdicts=dict(mup_flat="not reproduced"),
  )
  axis_figures.width(width, str(tmp_path), LONG_SETTINGS)
  depth = dict(
      rows={
          arm: dict(
              depths=[2.0, 6.0, 12.0],
              lambda_max=[s, 2 * s, 3 * s],
              lambda_max_slope=0.5,
              grad_decoder=[s, s / 2, s / 3],
              grad_decoder_slope=-0.5,
              grad_encoder=[s, s / 2, s / 3],
              grad_encoder_slope=-0.5,
          )
          for arm, s in (("Post-LN + Xavier", 1.0), ("Pre-LN", 0.3))
      },
      verdicts={"Post-LN + Xavier": dict(grad="reproduced", **{"lambda": "not reproduced"})},
  )
  axis_figures.depth(depth, str(tmp_path), LONG_SETTINGS)
  for fig, arms in zip(kept, (width["rows"], depth["rows"])):
    colors = _line_colors(fig, lambda line: (_label(line) or "").split(" (")[0] or None)
    assert {a for a in colors if a in arms} == set(arms)
    assert all(len(colors[a]) == 1 for a in arms), colors
    assert all(ax.get_yscale() == "log" for ax in fig.axes)
    assert_readable(fig)


def test_transfer_log_loss_axis_and_diverged_clipped(kept, tmp_path):
  rows = {
      arm: dict(
          lrs=[1e-3, 1e-2, 1e-1],
          widths=[
              dict(width=32.0, losses=[5.0, 4.0, 4.5], diverged=[False] * 3, optimal_lr=1e-2, censored=""),
              dict(width=128.0, losses=[4.8, 3.9, None], diverged=[False, False, True], optimal_lr=1e-2, censored=""),
          ],
          shift=[0.0, 0.0],
          verdict="reproduced",
      )
      for arm in ("standard", "mup")
  }
  axis_figures.transfer(dict(rows=rows), str(tmp_path), LONG_SETTINGS)
  (fig,) = kept
  for ax in fig.axes:
    assert ax.get_yscale() == "log"
    (crosses,) = [line for line in ax.get_lines() if line.get_gid() == "diverged" and len(line.get_xdata())]
    assert list(crosses.get_xdata()) == [1e-1] and crosses.get_ydata()[0] > 5.0
    assert ax.get_ylim()[1] < 1.3 * 5.0  # clipped a little above the largest loss
  colors = _line_colors(fig, lambda line: mcolors.to_hex(line.get_color()))
  assert len(colors) == 2  # one colour per width, in both panels
  assert_readable(fig)


def test_trace_one_colour_per_run_in_both_panels(kept, tmp_path):
  curves = lambda f: dict(steps=[10, 20, 30], lr_lambda=[0.1 * f, 0.2, 0.3], lr_p_lambda=[10.0 * f, 20.0, 30.0])
  rows = {
      "Post-LN, warmup 0": [dict(warmup=0, diverged=True, curves=curves(1.0))],
      "Post-LN, warmup 20": [dict(warmup=20, diverged=False, curves=curves(2.0))],
  }
  axis_figures.trace(dict(rows=rows, adam_threshold=38.0), str(tmp_path), LONG_SETTINGS)
  (fig,) = kept
  colors = _line_colors(fig, _label)
  assert set(colors) == {"Post-LN, warmup 0 (diverged)", "Post-LN, warmup 20"}
  assert all(len(c) == 1 for c in colors.values())
  assert_readable(fig)
