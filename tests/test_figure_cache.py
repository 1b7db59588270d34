"""experiments.figure_kit.redrawn_on_change: a figure is drawn again only when its inputs (or the code drawing it) changed;
the PNG carries the key it was drawn with."""

import math
import os

from experiments import plots as figure_kit
from experiments import report
from experiments.plots import plt


def _counting_figure(calls: list):
  @figure_kit.redrawn_on_change("line.png")
  def line(points: dict, out_dir: str, title: str, *, path: str) -> str:
    assert path == os.path.join(out_dir, "line.png")  # the decorator names the file
    calls.append(title)
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot(points["x"], points["y"])
    ax.set_title(title)
    return figure_kit.save_figure(fig, path)

  return line


def test_unchanged_inputs_are_not_redrawn_and_changed_ones_are(tmp_path):
  calls = []
  line = _counting_figure(calls)
  points = {"x": [1, 2, 3], "y": [1.0, math.nan, 3.0]}  # NaN: a diverged run's point
  path = line(points, str(tmp_path), "a")
  assert path == str(tmp_path / "line.png") and calls == ["a"]
  key = figure_kit.saved_figure_key(path)
  assert key == figure_kit.figure_key(line.__wrapped__, (points, str(tmp_path), "a")) and len(key) == 64
  written = os.stat(path).st_mtime_ns
  assert line({"x": [1, 2, 3], "y": [1.0, math.nan, 3.0]}, str(tmp_path), "a") == path  # equal, not the same object
  assert calls == ["a"] and os.stat(path).st_mtime_ns == written  # not drawn, not written
  line({"x": [1, 2, 3], "y": [1.0, 2.0, 3.0]}, str(tmp_path), "a")  # the data moved
  line({"x": [1, 2, 3], "y": [1.0, 2.0, 3.0]}, str(tmp_path), "b")  # another argument
  assert calls == ["a", "a", "b"] and figure_kit.saved_figure_key(path) not in (None, key)


def test_a_png_without_the_key_or_of_another_function_is_redrawn(tmp_path):
  calls = []
  line = _counting_figure(calls)
  fig, _ = plt.subplots(figsize=(1, 1))
  figure_kit.save_figure(fig, str(tmp_path / "line.png"))  # outside a redrawn_on_change call: no key written
  assert figure_kit.saved_figure_key(str(tmp_path / "line.png")) is None
  line({"x": [0], "y": [0]}, str(tmp_path), "t")
  assert calls == ["t"]
  other = []
  line_too = _counting_figure(other)  # same code, same inputs: the same key, so a copy of the function skips too
  line_too({"x": [0], "y": [0]}, str(tmp_path), "t")
  assert other == []
  assert figure_kit.saved_figure_key(str(tmp_path / "missing.png")) is None
  (tmp_path / "bad.png").write_bytes(b"not a png")
  assert figure_kit.saved_figure_key(str(tmp_path / "bad.png")) is None


def test_the_key_covers_inputs_json_cannot_hold(tmp_path):
  def draw(*args):
    return args

  assert figure_kit.figure_key(draw, ({(1, 2): 3.0},)) == figure_kit.figure_key(draw, ({(1, 2): 3.0},))
  assert figure_kit.figure_key(draw, ({(1, 2): 3.0},)) != figure_kit.figure_key(draw, ({(1, 2): 4.0},))


def test_the_sweep_report_final_metric_takes_its_path_last(tmp_path):
  rows = report.summarize(
      [
          {
              "cell": "c",
              "seed": 0,
              "params": {"optim.learning_rate": 0.1},
              "outcome": "finished",
              "final": {"loss": 2.0},
          },
      ],
      "loss",
  )
  path = str(tmp_path / "final_metric.png")
  assert report.plot_final_metric(rows, ["optim.learning_rate"], "loss", "t", path) == path
  key, written = figure_kit.saved_figure_key(path), os.stat(path).st_mtime_ns
  assert key is not None
  report.plot_final_metric(rows, ["optim.learning_rate"], "loss", "t", path)
  assert os.stat(path).st_mtime_ns == written
  report.plot_final_metric(rows, ["optim.learning_rate"], "loss", "another title", path)
  assert figure_kit.saved_figure_key(path) != key
