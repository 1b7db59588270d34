"""Every figure is readable: one colour per series in every panel (so one legend reads for all), log axes for losses,
diverged runs drawn at a clipped top and never as losses, no text overprinting other text, nothing outside the figure.

The figures are drawn from small hand-made records (analysis.plots, experiments.report; the studies' figures:
tests/test_claim_figures_readable.py) and inspected as laid out for saving: `save_figure` / `_save` are wrapped to
keep the figure, which is then drawn again to read its artists' extents.
"""

import itertools
import json
import math

import matplotlib.colors as mcolors
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis import plots
from configs import default
from experiments import plots as figure_kit
from experiments import report

# ------------------------------------------------------------------------------ helpers


@pytest.fixture
def kept(monkeypatch):
  """The figures written (laid out and saved as usual, into tmp paths), kept for inspection."""
  figs = []
  save, plots_save = figure_kit.save_figure, plots._save
  monkeypatch.setattr(figure_kit, "save_figure", lambda fig, path: figs.append(fig) or save(fig, path))
  monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or plots_save(fig, path))
  yield figs
  for fig in figs:
    figure_kit.plt.close(fig)


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


def test_fixed_settings_name_no_size_the_sweep_varies():
  """A sweep over the depth keeps d and drops the layers (study 13); over the width it drops the model's sizes."""
  config = default.get_config()
  config.model.d_model, config.model.num_encoder_layers, config.model.num_decoder_layers = 32, 2, 2
  assert report.fixed_settings(config, ["optim.learning_rate"], 2).startswith("d=32, 2+2 layers, ")
  depth = report.fixed_settings(config, ["model.num_encoder_layers", "model.num_decoder_layers"], 2)
  assert depth.startswith("d=32, ") and "layers" not in depth
  assert not report.fixed_settings(config, ["model.d_model"], 2).startswith("d=")


def test_fit_text_wraps_to_the_figure_width():
  fig, _ = figure_kit.plt.subplots(figsize=(3, 2))
  text = figure_kit.fit_text(fig, LONG_SETTINGS, 8)
  assert text.replace("\n", " ") == LONG_SETTINGS and text.count("\n") >= 3
  fig.suptitle(text, fontsize=8)
  fig.canvas.draw()
  e = fig.texts[0].get_window_extent(fig.canvas.get_renderer())
  assert e.width <= fig.bbox.width
  figure_kit.plt.close(fig)


def _union_sweep(tmp_path, arms, lrs=(1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2), warmups=(0, 100)):
  """A study's union grid: each arm (method) sets its own 3 of 20 model keys; each sweeps warmup × lr over 2 seeds,
  plus one analysis at init (no training, no metric). The largest lr without warmup diverges in every arm."""
  keys = [f"model.key_{i}" for i in range(20)]
  records = []

  def add(arm, params, cell, outcome, loss0, steps):
    for seed in (0, 1):
      run = tmp_path / cell / f"seed_{seed}"
      run.mkdir(parents=True)
      lines = [json.dumps(dict(split="train", step=s, loss=loss0 * math.exp(-0.01 * s) + 0.1 * seed)) for s in steps]
      (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
      final = {} if not steps or outcome != "finished" else {"eval/loss": loss0 * 0.2 + 0.01 * seed}
      records.append(dict(cell=cell, params=params, arm=arm, seed=seed, workdir=str(run.relative_to(tmp_path)),
                          outcome=outcome, final=final))  # fmt: skip

  for a, arm in enumerate(arms):
    base = {k: (f"arm{a}" if i in (a % 20, (a + 1) % 20, (a + 2) % 20) else "base") for i, k in enumerate(keys)}
    for w in warmups:
      for lr in lrs:
        params = {**base, "optim.warmup_steps": w, "optim.learning_rate": lr, "train.num_steps": 200}
        bad = lr == lrs[-1] and w == 0
        add(arm, params, f"a{a}_w{w}_lr{lr}", "diverged" if bad else "finished", 8.0 + a, range(0, 200, 20))
    add(arm, {**base, "optim.warmup_steps": 0, "optim.learning_rate": lrs[0], "train.num_steps": 0}, f"a{a}_init",
        "finished", 8.0, [])  # fmt: skip
  return records, [*keys, "optim.warmup_steps", "optim.learning_rate", "train.num_steps"]


@pytest.mark.slow
def test_a_study_of_19_methods_draws_one_panel_per_method_labelled_by_what_varies_within_it(kept, tmp_path):
  """Study 11's grid as the sweep layer sees it (19 arms × 2 warmups × 5 lrs and an analysis at init each, 20 keys in
  which the arms differ): one panel per arm, legend entries naming warmup and lr only, one colour per entry in every
  panel, the at-init cells left out, nothing overprinted, a figure a screen can show (it was 11,000 px wide)."""
  arms = [f"method {i}" for i in range(19)]
  records, swept = _union_sweep(tmp_path, arms)
  report.plot_curves(records, str(tmp_path), swept, LONG_SETTINGS, str(tmp_path / "c.png"))
  rows = report.summarize(records, "eval/loss")
  report.plot_final_metric(rows, swept, "eval/loss", LONG_SETTINGS, str(tmp_path / "f.png"))
  curves, final = kept
  for fig in (curves, final):
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == arms
    assert fig.get_size_inches()[0] <= 16
    assert_readable(fig)
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert all("key_" not in label and "num_steps" not in label for label in labels), labels
    assert all(len(c) == 1 for c in _line_colors(fig, _label).values())  # one colour per series, every panel
  curve_labels = [t.get_text() for t in curves.legends[0].get_texts()]
  assert len(curve_labels) == 10 and "warmup_steps=100, learning_rate=0.016" in curve_labels
  assert all(len([ln for ln in ax.get_lines() if _label(ln)]) == 10 for ax in curves.axes if ax.axison)
  # the diverged cell is named in its panel; in final_metric, lr is the x-axis and warmup the series
  assert all(any("2/2 diverged" in t.get_text() for t in ax.texts) for ax in curves.axes if ax.axison)
  assert sorted(t.get_text() for t in final.legends[0].get_texts()) == ["warmup_steps=0", "warmup_steps=100"]
  assert all(ax.get_yscale() == "log" for ax in (*curves.axes, *final.axes) if ax.axison)


def test_few_cells_of_named_arms_share_one_panel_and_a_product_grid_splits_on_its_first_key(kept, tmp_path):
  """Two arms × 2 lrs (4 cells): one panel, each label naming its arm. A product grid of 3 × 5 = 15 cells: one
  panel per value of its first key, the cells told apart by the second."""
  records, swept = _union_sweep(tmp_path / "u", ["Pre-LN", "Post-LN"], lrs=(1e-3, 2e-3), warmups=(0,))
  report.plot_curves(records, str(tmp_path / "u"), swept, "t", str(tmp_path / "c.png"))
  (fig,) = kept
  assert sum(ax.axison for ax in fig.axes) == 1
  assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == [
      "Post-LN: learning_rate=0.001", "Post-LN: learning_rate=0.002", "Pre-LN: learning_rate=0.001",
      "Pre-LN: learning_rate=0.002"]  # fmt: skip
  cells = [dict(cell=f"w{w}_lr{lr}", params={"optim.warmup_steps": w, "optim.learning_rate": lr})
           for w in (0, 30, 100) for lr in (1, 2, 3, 4, 5)]  # fmt: skip
  layout, keys, with_arm = report.panels(cells, ["optim.warmup_steps", "optim.learning_rate"])
  assert [name for name, _ in layout] == ["warmup_steps=0", "warmup_steps=30", "warmup_steps=100"]
  assert keys == ["optim.learning_rate"] and not with_arm and all(len(c) == 5 for _, c in layout)
  assert report.panels(cells[:5], ["optim.warmup_steps", "optim.learning_rate"])[1] == ["optim.learning_rate"]


def test_log_ticks_at_a_grids_values_label_each_one_exactly():
  """A factor-2 lr grid (4e-3, 8e-3, 1.6e-2) gets a tick at each value and no other, labelled to its digits: no
  decade subdivision holds 1.6e-2, and one significant digit would call it 2e-2."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots()
  grid = [4e-3, 8e-3, 1.6e-2]
  ax.plot(grid, [1.0, 2.0, 3.0])
  ax.set_xscale("log")
  ax.set_xlim(3e-3, 2e-2)
  figure_kit.plain_log_ticks(ax.xaxis, min(grid), max(grid), at=grid + [8e-3])
  FigureCanvasAgg(fig).draw()
  ticks = [t for t in ax.get_xticks() if 3e-3 <= t <= 2e-2]
  assert ticks == pytest.approx(grid)
  assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()] == ["4e-3", "8e-3", "1.6e-2"]
  plt.close(fig)
