"""The atlas (issue 15): its measures on hand-made records, its grid, and the driver + report end to end at `tiny`."""

import json
import math
import os

import numpy as np
import pytest

import train.config
from analysis import outcomes
from configs import atlas as atlas_config
from experiments import grid as grid_lib
from experiments import sweep as sweep_lib
from experiments.atlas import axes as axes_lib
from experiments.atlas import axis_measures
from experiments.atlas import cells as cells_lib
from experiments.atlas import collect as collect_lib
from experiments.atlas import measures as M
from experiments.atlas import report as report_lib
from experiments.atlas import run as run_lib
from tests.conftest import drop_record
from train import metrics as metrics_lib


def test_rank_averages_ties():
  np.testing.assert_array_equal(M.rank([10, 20, 20, 30, 20]), [1, 3, 3, 5, 3])
  np.testing.assert_array_equal(M.rank([3.0, 1.0, 2.0]), [3, 1, 2])


def test_spearman_with_ties_matches_hand_computation():
  # x ranks (1, 2.5, 2.5, 4), y ranks (1, 3, 2, 4): centred (-1.5, 0, 0, 1.5)·(-1.5, .5, -.5, 1.5) = 4.5,
  # norms² 4.5 and 5, so ρ = 4.5/√22.5 = 3/√10.
  assert M.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))
  # Without ties, ρ = 1 − 6Σd²/(n(n² − 1)): ranks (1..5) vs (2, 1, 4, 3, 5), Σd² = 4, ρ = 1 − 24/120 = 0.8.
  assert M.spearman([0.1, 0.2, 0.3, 0.4, 0.5], [2.0, 1.0, 4.0, 3.0, 5.0]) == pytest.approx(0.8)
  assert M.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
  assert M.spearman([1, 2, 3], [5, 5, 5]) is None  # a constant side has no rank correlation
  with pytest.raises(ValueError, match="2 y values"):
    M.spearman([1, 2, 3], [1, 2])


def _p(lr, loss, outcome="finished", seed=0, warmup=0, method="a", cls=None):
  return M.Point(method, warmup, lr, seed, outcome, loss, cls)


def test_stability_rule_reads_outcome_classes():
  assert M.run_stable(_p(1e-3, 3.0, cls="trained")) is True
  assert M.run_stable(_p(1e-3, 5.4, cls="collapsed")) is False  # the unigram plateau is a failure
  assert M.run_stable(_p(1e-3, 9000.0, cls="diverged")) is False
  assert M.run_stable(_p(1e-3, None, "diverged")) is False  # stopped by a non-finite loss, class or not
  assert M.run_stable(_p(1e-3, 6.5, cls="undertrained")) is None  # neither success nor failure
  assert M.run_stable(_p(1e-3, None, "crashed")) is None and M.run_stable(_p(1e-3, 3.0)) is None  # no class
  trained, collapsed = _p(1e-3, 3.2, cls="trained"), _p(1e-3, 5.4, seed=1, cls="collapsed")
  assert M.cell_stable([trained, collapsed]) is False  # one seed fails: the cell fails
  assert M.cell_stable([trained, _p(1e-3, 3.3, seed=1, cls="trained")]) is True
  assert M.cell_stable([trained, _p(1e-3, 6.0, seed=1, cls="undertrained")]) is None
  assert M.cell_stable([trained, _p(1e-3, None, "crashed", seed=1)]) is None
  assert M.cell_stable([]) is None
  assert M.best_loss([_p(1e-3, 3.5), _p(1e-2, 2.9), _p(1e-1, None, "diverged")]) == 2.9


def test_max_stable_lr_and_censoring():
  assert M.max_stable_lr({1e-4: True, 1e-3: True, 1e-2: False}) == M.MaxLR(1e-3, "")
  assert M.max_stable_lr({1e-4: True, 1e-3: False, 1e-2: True}) == M.MaxLR(1e-2, "above")  # the largest stable one
  assert M.max_stable_lr({1e-4: None, 1e-3: False, 1e-2: False}) == M.MaxLR(1e-3, "below")  # < the smallest failure
  assert M.max_stable_lr({1e-4: True, 1e-3: None}) == M.MaxLR(1e-4, "")  # the top cell undetermined: not censored
  assert M.max_stable_lr({1e-4: None}) is None and M.max_stable_lr({}) is None


def test_collect_classifies_unclassed_runs_by_their_final_loss():
  """A record without a class (atlas.json's, or a run from before `train.eval_at_init`) is classified from its
  final loss against ℓ₀ and H: Post-LN's no-warmup plateau collapses, a slow run is undertrained, one above ℓ₀
  diverged; a run's own class wins."""
  h, loss0 = 5.375, 7.9
  points = [
      _p(1e-4, 6.6, method="m"),  # above H + δ: undertrained (undetermined)
      _p(1e-3, 4.8, method="m"),  # trained
      _p(1e-2, 5.41, method="m"),  # within δ of H: collapsed
      _p(1e-1, 9000.0, method="m"),  # above ℓ₀: diverged
      _p(1e-1, 4.0, method="m", seed=1, cls="diverged"),  # the record's own class (a blow-up mid-run) is kept
  ]
  per_method = {"m": dict(loss0=loss0, predicted={k: 1e-3 for k in M.PREDICTORS})}
  m = collect_lib.decide(per_method, points, h)
  w = m["methods"]["m"]["runs"][0]
  assert w["classes"] == [["undertrained"], ["trained"], ["collapsed"], ["diverged", "diverged"]]
  assert w["stable"] == [None, True, False, False]
  assert (w["max_lr"], w["max_lr_censored"]) == (1e-3, "")
  assert m["unigram_entropy"] == h and m["margin"] == outcomes.COLLAPSE_MARGIN


def test_predictions_read_intervals():
  """P1 on the exact binomial interval of the fraction within 2×, P2/P3 on ρ's Fisher-z interval: a perfect
  ranking of 9 methods holds, a reversed one fails, a weak one (ρ ≈ 0.2) straddles 0.564 and is inconclusive."""
  lrs = [10.0**-k for k in range(1, 10)]
  names = [f"m{i}" for i in range(9)]
  measured = {n: M.MaxLR(lr, "") for n, lr in zip(names, lrs)}
  exact = M.decide(dict(zip(names, lrs)), measured, dict(zip(names, [-x for x in range(9)])))
  assert exact["fraction_within"] == 1.0 and exact["verdicts"]["accurate"] == "reproduced"
  assert exact["rho_lr"] == pytest.approx(1.0) and exact["verdicts"]["ranks"] == "reproduced"
  reversed_ = M.decide(dict(zip(names, lrs[::-1])), measured, dict(zip(names, range(9))))
  assert reversed_["verdicts"]["ranks"] == "not reproduced" and reversed_["verdicts"]["accurate"] == "not reproduced"
  assert reversed_["fraction_within"] == pytest.approx(1 / 9)  # the middle method is its own reverse
  assert reversed_["fraction_within_interval"][2] < M.FRACTION  # 1 of 9: the exact interval's top is 0.48
  weak = dict(zip(names, [lrs[i] for i in (2, 3, 0, 8, 6, 4, 7, 1, 5)]))  # ρ = 0.267
  d = M.decide({n: 1e3 * v for n, v in weak.items()}, measured, {})
  assert 0 < d["rho_lr"] < M.RHO_CRIT and d["rho_lr_interval"][1] < M.RHO_CRIT < d["rho_lr_interval"][2]
  assert d["verdicts"]["ranks"] == "inconclusive" and d["verdicts"]["warmup"] == "inconclusive"  # no gains: n = 0


def test_lr_sensitivity_caps_at_init_loss():
  # capped losses (3, 2, 5): mean 10/3 − min 2 = 4/3; a diverged run counts as ℓ₀ = 5.
  assert M.lr_sensitivity({1e-4: 3.0, 1e-3: 2.0, 1e-2: None}, 5.0) == pytest.approx(4 / 3)
  assert M.lr_sensitivity({1e-4: 6.0, 1e-3: 2.0}, 5.0) == pytest.approx(1.5)  # a loss above ℓ₀ is capped at ℓ₀
  assert M.lr_sensitivity({1e-4: 2.0, 1e-3: 2.0}, 5.0) == 0.0  # flat: insensitive
  assert M.warmup_gain(4.0, 3.5) == pytest.approx(0.5)
  assert M.warmup_gain(None, 3.5) is None


def test_within_respects_censoring():
  assert M.within(1.9e-3, M.MaxLR(1e-3, ""))
  assert not M.within(2.1e-3, M.MaxLR(1e-3, ""))
  assert not M.within(0.49e-3, M.MaxLR(1e-3, ""))
  assert M.within(1.0, M.MaxLR(1e-3, "above"))  # measured ≥ 1e-3: any prediction ≥ 5e-4 is consistent
  assert not M.within(1e-4, M.MaxLR(1e-3, "above"))
  assert M.within(1e-9, M.MaxLR(1e-3, "below"))
  assert not M.within(3e-3, M.MaxLR(1e-3, "below"))


def test_decide_verdicts():
  methods = "abcde"
  measured = {m: M.MaxLR(10.0 ** -(i + 2), "") for i, m in enumerate(methods)}
  gain = {m: 0.1 * i for i, m in enumerate(methods)}  # smaller max lr, larger warmup gain
  exact = M.decide({m: measured[m].value * 1.5 for m in methods}, measured, gain)
  assert exact["fraction_within"] == 1.0 and exact["rho_lr"] == pytest.approx(1.0)
  assert exact["rho_gain"] == pytest.approx(-1.0)
  # 5 of 5 within 2×: the exact 95% interval [0.478, 1] straddles one half, so 5 methods cannot decide P1
  assert exact["fraction_within_interval"][1] == pytest.approx(0.025 ** (1 / 5))
  assert exact["verdicts"] == {"accurate": "inconclusive", "ranks": "reproduced", "warmup": "reproduced"}
  assert exact["factors"]["a"] == pytest.approx(1.5)
  wrong = M.decide({m: 1e-3 * (i + 1) for i, m in enumerate(methods)}, measured, gain)  # reversed order, off scale
  assert wrong["verdicts"] == {"accurate": "inconclusive", "ranks": "not reproduced", "warmup": "not reproduced"}
  few = M.decide({m: measured[m].value for m in "abcd"}, measured, gain)
  assert set(few["verdicts"].values()) == {"inconclusive"}


def test_stiffest_block_is_the_majority_and_a_tie_goes_to_the_larger_value():
  a = {"block_max_name": "encoder/layer_5/mlp_out", "block_max": 4.2}
  b = {"block_max_name": "embedding", "block_max": 4.4}
  assert collect_lib.stiffest_block([a, b]) == "embedding (1 of 2 seeds)"
  assert collect_lib.stiffest_block([b, a]) == "embedding (1 of 2 seeds)"  # not the order, not set order
  assert collect_lib.stiffest_block([a, b, dict(a, block_max=3.0)]) == "encoder/layer_5/mlp_out (2 of 3 seeds)"
  assert collect_lib.stiffest_block([a, dict(a, block_max=5.0)]) == "encoder/layer_5/mlp_out"
  assert collect_lib.stiffest_block([{"block_max_name": None}]) is None and collect_lib.stiffest_block([]) is None


def test_cpu_grid_is_the_issue_grid():
  config = atlas_config.get_config("cpu")
  config.data.dir = "/nonexistent"  # resolving reads no data
  cells = cells_lib.training_cells(config)
  methods = sorted({c.method for c in cells})
  assert methods == sorted(atlas_config.NAMES.values()), methods  # each method's name: its grid product's label
  assert "ReZero" in methods and "SkipInit" not in methods  # SkipInit at α = 0 is ReZero: counted once
  lrs = sorted({c.lr for c in cells})
  assert len(lrs) >= 6 and np.allclose(np.diff(np.log10(lrs)), np.diff(np.log10(lrs))[0], atol=0.01)
  assert {c.warmup for c in cells} == {0, atlas_config.WARMUP["cpu"]}
  assert len(cells) == 9 * 2 * len(lrs) and config.sweep.seeds >= 2
  assert config.model.num_encoder_layers >= 6 and config.model.num_decoder_layers >= 6
  assert not config.sweep.analysis_at_init  # the curvature is the at-init sweep's, once per method × seed
  init = cells_lib.init_config(config)
  assert len(grid_lib.cells(init)) == 9 and init.train.num_steps == 1 and init.sweep.analysis_at_init
  assert {m for m, _ in cells_lib.init_cells(config)} == set(methods)
  for c in grid_lib.cells(config) + grid_lib.cells(init):  # every cell passes the config boundary, as the sweep checks
    base = init if c.overrides.get(cells_lib.LR_KEY) is None else config
    resolved = train.config.resolve(grid_lib.cell_config(base, c, 0), groups=sweep_lib.GROUPS)
    assert resolved.model.num_encoder_layers == 6


def test_unnamed_method_is_a_config_error():
  config = atlas_config.get_config("tiny")
  config.sweep.grid = config.sweep.grid.split(": ", 1)[1]  # the first method's label removed
  with pytest.raises(ValueError, match=r"sweep.grid.*named by its label|named product per method"):
    cells_lib.training_cells(config)


def _smallest(config):
  """The tiny atlas on its smallest grid that still exercises every rule: 2 lrs in the training grid, µP alone in the
  width part (its slope needs 2 widths), Post-LN alone in the depth part (2 depths)."""
  config.sweep.grid = config.sweep.grid.replace("optim.learning_rate=0.001,0.01,0.1", "optim.learning_rate=0.001,0.1")
  only = lambda grid, arm: " | ".join(p for p in grid.split(" | ") if p.strip().startswith(arm + ":"))
  config.atlas.width.grid = only(config.atlas.width.grid, "mup")
  config.atlas.depth.grid = only(config.atlas.depth.grid, "Post-LN + Xavier")
  return config


def test_atlas_tiny_end_to_end(tmp_path, atlas_writes, monkeypatch):
  """Every part of the atlas (init, train, length, trace, width, depth, transfer) on its smallest grid, through the
  driver: the report rewritten after every run, each part's records (every swept key, the arm's label), sections,
  figures and numbers; a rerun redraws nothing; a run whose record is gone is reported missing by its cell."""
  sweep_reports = []  # the sweep layer's results.md + figures: once per part (its full-grid pass), not per run
  write_report = sweep_lib.report.write_report
  monkeypatch.setattr(
      sweep_lib.report,
      "write_report",
      lambda records, workdir, **kw: sweep_reports.append(workdir) or write_report(records, workdir, **kw),
  )
  config = _smallest(atlas_config.get_config("tiny"))
  workdir, out = str(tmp_path / "atlas"), str(tmp_path / "reports")
  partial = report_lib.write(config, workdir, out)  # nothing run yet: every cell missing, no crash
  assert partial["best_loss"] is None
  with open(os.path.join(out, "ATLAS.md"), encoding="utf-8") as f:
    assert "PARTIAL: 0 of 8 runs" in f.read()
  lines, writes = atlas_writes
  writes.clear()  # the partial report above was counted too
  m = run_lib.run_atlas(config, workdir, out, emit=lines.append)
  counts = {"init": 2, "train": 8, "length": 2, "trace": 3, "width": 2, "depth": 2, "transfer": 4}
  # the report is rewritten after every run (at init too): results land as they come; each progress line names the
  # run's arm by its label
  assert writes == list(range(1, sum(counts.values()) + 1)), writes
  started = [line.split(" | ")[0] for line in lines if line.startswith("cell ")]
  assert started[:2] == ["cell 1/2, seed 0: Post-LN + Xavier", "cell 2/2, seed 0: Pre-LN"]
  assert started[12:15] == [
      "cell 1/3, seed 0: Post-LN + Xavier (warmup 0)",
      "cell 2/3, seed 0: Post-LN + Xavier (warmup 2)",
      "cell 3/3, seed 0: Pre-LN (warmup 0)",
  ]
  assert sweep_reports == [os.path.join(workdir, p) for p in axes_lib.PARTS]  # once per part
  assert os.path.exists(os.path.join(workdir, "train", "final_metric.png"))
  for part, n in counts.items():
    with open(os.path.join(workdir, part, "results.jsonl"), encoding="utf-8") as f:
      records = [json.loads(line) for line in f]
    cfg = run_lib.plan(config, part)
    swept = {k for k, _ in grid_lib.parse_grid(cfg.sweep.grid, cfg)}
    assert len(records) == n and all(set(r["params"]) == swept for r in records), part
    assert [r["arm"] for r in records] == [c.arm for c in grid_lib.cells(cfg)] and all(r["arm"] for r in records)
  with open(os.path.join(out, "ATLAS.md"), encoding="utf-8") as f:
    text = f.read()
  assert "Status: **complete**" in text and "Missing cells\n\nnone" in text
  assert "Training-length probe (experiments/atlas/length.py;" in text and "6 of 6 steps evaluated" in text
  names = ("loss_vs_lr", "predicted_vs_measured", "warmup_gain", "length_probe", "trace", "width", "depth", "transfer")
  for name in names:
    assert os.path.getsize(os.path.join(out, "atlas", f"{name}.png")) > 0, name
  # the training grid and the step-0 curvature
  assert set(m["methods"]) == {"Post-LN + Xavier", "Pre-LN"}
  for row in m["methods"].values():
    assert 0 < row["loss0"] < 3 * math.log(config.data.vocab_size)  # the step-1 loss of the init
    assert row["lambda_max"] > 0 and row["lambda_max"] >= row["lambda_min"]
    assert row["predicted"]["gd"] == pytest.approx(2 / row["lambda_max"], rel=1e-6)
    assert row["predicted"]["adam"] == pytest.approx(38 / row["preconditioned_lambda_max"], rel=1e-6)
    assert row["runs"][0]["lrs"] == [1e-3, 1e-1] and row["runs"][0]["sensitivity"] >= 0
  # the axis parts
  for part in axes_lib.AXIS_PARTS:
    assert m["axes"][part]["done"] == counts[part] and not m["axes"][part]["missing"], part
    assert f"## {report_lib.axis_report.TITLES[part]}\n\nStatus: **complete** ({counts[part]} runs)" in text
    assert f"![{part}.png](atlas/{part}.png)" in text
  axes = m["axes"]
  (width,) = axes["width"]["rows"].values()
  assert len(width["lambda_max"]) == 2 and all(v > 0 for v in width["lambda_max"] + width["p_lambda"])
  assert width["slope"] == pytest.approx(np.log(width["lambda_max"][1] / width["lambda_max"][0]) / np.log(2))
  (depth,) = axes["depth"]["rows"].values()
  assert all(v > 0 for v in depth["lambda_max"] + depth["grad_decoder"] + depth["grad_encoder"])
  assert set(axes["depth"]["verdicts"]) == {"Post-LN + Xavier"}  # two depths: decided (inconclusive or not)
  (transfer,) = axes["transfer"]["rows"].values()
  assert [w["width"] for w in transfer["widths"]] == [16.0, 32.0] and transfer["lrs"] == [1e-2, 1e-1]
  assert all(v > 0 for w in transfer["widths"] for v in w["losses"] if v is not None)
  assert axes["transfer"]["verdicts"]["mup_transfer"] == transfer["verdict"]
  runs = [r for rs in axes["trace"]["rows"].values() for r in rs]
  assert [r["window"] for r in runs] == [axis_measures.EARLY_STEPS, 2, axis_measures.EARLY_STEPS]
  assert all(r["max_gd"] > 0 and r["max_adam"] > 0 and r["curves"]["steps"] == [2, 4, 6] for r in runs)
  # nothing changed: the report is rewritten, its figures are not redrawn
  pngs = sorted(os.path.join(out, "atlas", f) for f in os.listdir(os.path.join(out, "atlas")) if f.endswith(".png"))
  written = [os.stat(p).st_mtime_ns for p in pngs]
  report_lib.write(config, workdir, out)
  assert [os.stat(p).st_mtime_ns for p in pngs] == written and len(pngs) == len(names)
  # re-decided from atlas.json alone (the runs gone): the same classes and verdicts, the axis parts as stored, the
  # measurement's provenance kept and the re-decision's added
  with open(os.path.join(out, "atlas", "atlas.json"), encoding="utf-8") as f:
    fresh = json.load(f)
  again = report_lib.write(config, str(tmp_path / "gone"), out, redecide=True)
  assert not os.path.exists(tmp_path / "gone")
  for method, row in fresh["measured"]["methods"].items():
    for warmup, w in row["runs"].items():
      redone = again["methods"][method]["runs"][int(warmup)]
      assert (redone["max_lr"], redone["stable"]) == (w["max_lr"], w["stable"]), (method, warmup)
  assert {n: d["verdicts"] for n, d in again["predictors"].items()} == {
      n: d["verdicts"] for n, d in fresh["measured"]["predictors"].items()
  }
  assert again["axes"] == fresh["measured"]["axes"]
  with open(os.path.join(out, "atlas", "atlas.json"), encoding="utf-8") as f:
    record = json.load(f)
  assert record["provenance"] == fresh["provenance"] and "git_commit" in record["redecided_by"]
  with open(os.path.join(out, "ATLAS.md"), encoding="utf-8") as f:
    assert "Re-decided from atlas.json's measurements" in f.read()
  # a run whose record is gone is reported missing, by its cell (atlas.json keeps the directory name)
  victim = grid_lib.cells(config)[0].name
  drop_record(os.path.join(workdir, "train"), victim, 0)
  wide = axes_lib.part_cells(config, "width")[0]
  drop_record(os.path.join(workdir, "width"), wide.cell.name, 0)
  m = report_lib.write(config, workdir, out)
  with open(os.path.join(out, "ATLAS.md"), encoding="utf-8") as f:
    text = f.read()
  assert "PARTIAL: 7 of 8 runs" in text and f"* `{victim}`" in text
  assert f"**PARTIAL: 1 of 2 runs**; 1 cell(s) missing: {wide.arm}, d={wide.x:g}." in text
  assert m["axes"]["width"]["missing"] == [wide.cell.name]


def test_skipinit_at_alpha_0_is_rezero_bit_for_bit(tmp_path):
  """Why the atlas counts SkipInit once (configs/atlas.py): its arm (x + αF, α = 0 learned, no norm, Xavier weights)
  and ReZero's train to the same losses, bit for bit."""
  from tests.test_experiments import tiny_config

  no_norm = "model.norm_type=none;model.norm_position=none"
  grid = (
      f"{no_norm};model.residual=rezero;init.scheme=rezero|{no_norm};model.residual=skipinit;model.skipinit_alpha=0.0;"
      "init.scheme=xavier"
  )
  records = sweep_lib.run_sweep(
      tiny_config(**{"sweep.grid": grid, "sweep.seeds": 1, "optim.learning_rate": 1e-2}), str(tmp_path), emit=print
  )
  losses = [
      [r["loss"] for r in metrics_lib.read_metrics(str(tmp_path / rec["workdir"]), split="train")] for rec in records
  ]
  assert len(losses) == 2 and len(losses[0]) == 4 and losses[0] == losses[1], losses
  assert losses[0][0] != losses[0][-1]  # it trained: α moved off 0
