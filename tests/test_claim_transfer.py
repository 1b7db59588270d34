"""The lr-transfer machinery of studies 12 and 13 (experiments/claims/shared/transfer.py) on hand-made cells whose answer is
known: the optimum's parabola, the shift between the end sizes, and its bootstrap interval over seeds."""

import math

import pytest
import scipy.stats

from experiments import plots as figure_kit
from experiments.claims.shared import transfer

LRS = [2.0**k for k in range(-14, -5)]


def _cell(loss, cls="trained", seed=0):
  return {"seed": seed, "cls": cls, "final_loss": loss}


def test_optimum_is_refined_by_the_parabola_and_excludes_runs_that_did_not_train():
  cell = lambda loss, cls="trained": [_cell(loss, cls)]
  # losses (x − log2 η*)² + 3 at log2 lr = −10, −9, −8 with η* = 2^−8.75: the parabola's vertex is exact
  cells = {2.0**k: cell((k + 8.75) ** 2 + 3) for k in (-10, -9, -8, -7)}
  x, edge = transfer.optimum(cells)
  assert x == pytest.approx(-8.75) and not edge
  cells[2.0**-8] = cell(1.0, "collapsed")  # a lower loss that did not train is not the optimum
  cells[2.0**-7] = cell(None, "diverged")
  assert transfer.optimum(cells) == (-9.0, False)  # its right neighbour did not train: no refinement
  assert transfer.optimum({2.0**-10: cell(3.0), 2.0**-9: cell(4.0)}) == (-10.0, True)  # at the grid's edge
  assert transfer.optimum({1e-3: cell(None, "diverged")}) is None


def test_parse_label_reads_the_arm_and_the_size_of_its_axis():
  assert transfer.parse_label("SP + µP emb. lr @ width 256", "width") == ("SP + µP emb. lr", 256)
  assert transfer.parse_label("Depth-µP @ depth 16", "depth") == ("Depth-µP", 16)
  with pytest.raises(ValueError, match="is not '<arm> @ depth <size>'"):
    transfer.parse_label("SP @ width 32", "depth")


def _grid(vertices: dict[int, list[float]], diverge_at: int = 0) -> dict:
  """{size: {lr: runs}}: seed s at a size has loss (log2 lr − v_s)²/4 + 3 (equal curvatures: a mean of seeds is the
  parabola with the mean vertex, which three grid points recover exactly); every run at `diverge_at` diverged."""
  out = {}
  for size, vs in vertices.items():
    out[size] = {}
    for lr in LRS:
      x = LRS.index(lr) - 14
      if size == diverge_at:
        out[size][lr] = [_cell(None, "diverged", s) for s in range(len(vs))]
      else:
        out[size][lr] = [_cell((x - v) ** 2 / 4 + 3, seed=s) for s, v in enumerate(vs)]
  return out


def test_shift_and_its_student_t_interval_over_seeds():
  """Arm 'flat': η* = 2^−9 at both sizes in both seeds (shift 0, no spread). Arm 'down': η* = 2^−9 at size 1, and at
  size 4 seed 0's vertex is −11, seed 1's −12: the seeds' own shifts are −2 and −3, their mean −2.5 with the
  Student-t interval over 2 seeds (t₁ = 12.7: as wide as 2 seeds honestly are). D = |flat| − |down| is its mirror;
  an arm without a trained lr at an end has no shift and no difference."""
  grids = {
      "flat": _grid({1: [-9.0, -9.0], 4: [-9.0, -9.0]}),
      "down": _grid({1: [-9.0, -9.0], 4: [-11.0, -12.0]}),
      "gone": _grid({1: [-9.0, -9.0], 4: [-9.0, -9.0]}, diverge_at=4),
  }
  assert transfer.shift(grids["down"], [1, 4]) == pytest.approx(-2.5)
  assert transfer.shift(grids["down"], [1, 4], {1: [0], 4: [1]}) == pytest.approx(-3.0)
  assert transfer.shift(grids["gone"], [1, 4]) is None
  diffs = {"|flat| − |down|": ("flat", "down"), "|gone| − |flat|": ("gone", "flat")}
  out = transfer.shift_intervals(grids, [1, 4], diffs)
  t = scipy.stats.t.interval(0.95, 1, loc=-2.5, scale=scipy.stats.sem([-2.0, -3.0]))
  assert out["flat"] == pytest.approx([0.0, 0.0, 0.0])
  assert out["down"] == pytest.approx([-2.5, *t], abs=1e-4)  # the vertices recovered by the parabola to ~1e-6
  assert out["|flat| − |down|"] == pytest.approx([-2.5, *t], abs=1e-4)
  assert out["gone"] is None and out["|gone| − |flat|"] is None
  record = {a: {str(d): {format(lr, "g"): rs for lr, rs in c.items()} for d, c in g.items()} for a, g in grids.items()}
  again = transfer.shifts_from_record(record, [1, 4], diffs)  # a claim.json's runs (lrs as 6-digit strings)
  assert {k: v is None for k, v in again.items()} == {k: v is None for k, v in out.items()}
  assert all(again[k] == pytest.approx(v, abs=1e-4) for k, v in out.items() if v is not None)


def test_the_loss_panel_draws_a_run_that_did_not_train_as_an_x_and_a_diverged_one_at_the_clip():
  grid = {"32": {"0.001": [_cell(3.5), _cell(3.7, seed=1)], "0.002": [_cell(4.5, "undertrained"), _cell(3.0, "diverged", 1)], "0.004": [_cell(None, "diverged")]}}  # fmt: skip
  losses = [r["final_loss"] for c in grid["32"].values() for r in c]
  top = transfer.clipped_top(losses)
  fig, ax = figure_kit.plt.subplots()
  transfer.loss_vs_lr(ax, grid, [32], {"32": {"lr": 1e-3}}, {32: "C0"}, losses, top)
  points = {(line.get_marker(), float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.lines if len(line.get_xdata()) == 1}  # fmt: skip
  # the diverged run's finite loss (3.0) is not drawn: it sits at the clip; the undertrained run at its loss
  assert points == {("o", 1e-3, 3.5), ("o", 1e-3, 3.7), ("x", 2e-3, 4.5), ("x", 2e-3, top), ("x", 4e-3, top)}
  (means,) = [line for line in ax.lines if len(line.get_xdata()) == 3]
  assert means.get_ydata()[0] == 3.6  # the mean of 3.5 and 3.7
  assert all(math.isnan(y) for y in means.get_ydata()[1:])  # no mean through a divergence
  assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and top == pytest.approx(1.1 * 4.5)
  assert "diverged" in transfer.not_trained_handle(top).get_label()
  figure_kit.plt.close(fig)


def test_differences_are_taken_within_a_seed_shared_by_every_arm_and_size():
  """Arms 'a' and 'b' share their base runs (the same model at the base size, as every arm of study 13 at L_base):
  the seeds' vertices there are −9 and −10; at size 4 a's are −12 and −13, b's −11 and −12. Every seed shifts a by −3
  and b by −2, so D = |a| − |b| = 1 in every seed, with no spread; mixing one seed's base with the other's end would
  give a's shift from −2 to −4."""
  base = {1: [-9.0, -10.0]}
  grids = {"a": _grid({**base, 4: [-12.0, -13.0]}), "b": _grid({**base, 4: [-11.0, -12.0]})}
  out = transfer.shift_intervals(grids, [1, 4], {"|a| − |b|": ("a", "b")})
  assert out["a"] == pytest.approx([-3.0, -3.0, -3.0]) and out["b"] == pytest.approx([-2.0, -2.0, -2.0])
  assert out["|a| − |b|"] == pytest.approx([1.0, 1.0, 1.0])


def test_a_seed_missing_at_an_end_has_no_shift_and_is_left_out():
  """One (arm, size) ran a third seed the others lack: that seed has no optimum at the other end, so it gives no
  shift; the interval is over the seeds that have one. An arm without one gets None."""
  grids = {"a": _grid({1: [-9.0, -10.0], 4: [-12.0, -13.0, -12.5]}), "b": _grid({1: [-9.0, -10.0], 4: [-11.0, -12.0]})}
  out = transfer.shift_intervals(grids, [1, 4], {"|a| − |b|": ("a", "b")})
  assert out["a"] == pytest.approx([-3.0, -3.0, -3.0])
  gone = {"g": _grid({1: [-9.0, -9.0], 4: [-9.0, -9.0]}, diverge_at=4)}
  assert transfer.shift_intervals(gone, [1, 4], {})["g"] is None
