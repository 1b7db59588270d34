"""The atlas's axis parts (trace, width, depth, transfer): measures on hand-made numbers, the cpu grids as issue 15
states them, `--parts`, and the driver + report end to end at `tiny`."""

import json
import math
import os
import subprocess
import sys

import pytest

import train.config
from configs import atlas as atlas_config
from experiments import grid as grid_lib
from experiments import sweep as sweep_lib
from experiments.atlas import axes as axes_lib
from experiments.atlas import axis_collect, axis_figures, axis_report
from experiments.atlas import axis_measures as A
from experiments.atlas import cells as cells_lib
from experiments.atlas import run as run_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------------------------------------------------------ measures


def test_loglog_slope_hand_computed():
  assert A.loglog_slope([1, 2, 4], [3, 6, 12]) == pytest.approx(1.0)
  assert A.loglog_slope([2, 8, 32], [3 / math.sqrt(2), 3 / math.sqrt(8), 3 / math.sqrt(32)]) == pytest.approx(-0.5)
  # ln x = (0, a, 2a), ln y = (0, a, a), a = ln 2: Σ(x − x̄)(y − ȳ) = a², Σ(x − x̄)² = 2a², so the slope is 1/2
  assert A.loglog_slope([1, 2, 4], [1, 2, 2]) == pytest.approx(0.5)
  # non-positive and missing points are left out; fewer than two distinct x: no fit
  assert A.loglog_slope([1, 2, 4, 8], [None, 2, 4, -1]) == pytest.approx(1.0)
  assert A.n_points([1, 2, 4, 8], [None, 2, 4, -1]) == 2
  assert A.loglog_slope([2, 2], [1, 3]) is None and A.loglog_slope([1, 2], [1, None]) is None


def test_width_flatness_rule():
  assert A.flatness([1.0, 1.5, 2.0]) == 2.0
  assert A.decide_flat([1.0, 1.5, 2.0], [0.01] * 3) == "reproduced"  # ratio 2: at the threshold
  assert A.decide_flat([1.0, 1.5, 2.1], [0.01] * 3) == "not reproduced"
  assert A.decide_flat([1.0, 1.5], [0.01] * 2) == "inconclusive"  # two widths are too few
  assert A.decide_flat([1.0, 1.5, 2.0], [0.01, 0.2, 0.01]) == "inconclusive"  # 0.2 > 10% of 1.5: not converged
  assert A.decide_flat([1.0, -1.5, 2.0], [0.01] * 3) == "inconclusive"
  assert A.flatness([1.0]) is None


def test_depth_slope_verdicts():
  n = [2, 6, 12, 24]
  pre = [0.8 * k**-0.5 for k in n]
  assert A.decide_slope(n, pre, A.GRAD_SLOPES["Pre-LN"], A.GRAD_TOL) == "reproduced"
  assert A.decide_slope(n, [0.8] * 4, A.GRAD_SLOPES["Pre-LN"], A.GRAD_TOL) == "not reproduced"  # flat is 0.5 off −0.5
  assert A.decide_slope(n, [k**-0.2 for k in n], 0.0, A.GRAD_TOL) == "reproduced"
  assert A.decide_slope(n, [k**-0.3 for k in n], 0.0, A.GRAD_TOL) == "not reproduced"
  lam = [50.0 / k for k in n]  # λ ∝ N^-1: Pre-LN's Gauss–Newton reference
  assert A.decide_slope(n, lam, A.LAMBDA_SLOPES["Pre-LN"], A.LAMBDA_TOL, [0.1] * 4) == "reproduced"
  assert A.decide_slope(n, lam, A.LAMBDA_SLOPES["Post-LN + Xavier"], A.LAMBDA_TOL, [0.1] * 4) == "not reproduced"
  assert A.decide_slope(n, lam, -1.0, A.LAMBDA_TOL, [0.1, 0.1, 0.1, 1.0]) == "inconclusive"  # 1.0 > 10% of 50/24
  assert A.decide_slope(n[:2], lam[:2], -1.0, A.LAMBDA_TOL) == "inconclusive"
  assert A.decide_slope(n, lam, None, A.LAMBDA_TOL) == "inconclusive"  # no prediction (DeepNorm, T-Fixup, Admin)


LRS = (1e-4, 3e-4, 1e-3, 3e-3)


def test_optimal_lr_with_divergence_and_censoring():
  assert A.optimal_lr(dict(zip(LRS, (5.0, 4.0, 3.5, math.inf)))) == (2, "")
  assert A.optimal_lr(dict(zip(LRS, (3.0, math.inf, math.inf, math.inf)))) == (0, "below")
  assert A.optimal_lr(dict(zip(LRS, (5.0, 4.0, 3.5, 3.0)))) == (3, "above")
  assert A.optimal_lr(dict(zip(LRS, (5.0, 3.5, 3.5, 4.0)))) == (1, "")  # a tie goes to the smaller lr
  assert A.optimal_lr(dict(zip(LRS, (math.inf,) * 4))) is None  # every run diverged
  assert A.optimal_lr(dict(zip(LRS, (5.0, None, 3.5, 4.0)))) is None  # a crashed or missing run


def test_lr_shift_and_transfer_verdict():
  small = A.optimal_lr(dict(zip(LRS, (5.0, 4.0, 3.5, math.inf))))  # index 2
  one_down = A.optimal_lr(dict(zip(LRS, (4.5, 3.2, math.inf, math.inf))))  # index 1
  assert A.lr_shift(small, one_down) == (-1.0, -1.0)
  assert A.decide_transfer(A.lr_shift(small, one_down)) == "reproduced"
  bottom = A.optimal_lr(dict(zip(LRS, (3.0, math.inf, math.inf, math.inf))))  # index 0 or below
  assert A.lr_shift(small, bottom) == (-math.inf, -2.0)
  assert A.decide_transfer(A.lr_shift(small, bottom)) == "not reproduced"  # every shift the interval allows is ≤ −2
  top = A.optimal_lr(dict(zip(LRS, (5.0, 4.0, 3.5, 3.0))))  # index 3 or above
  assert A.lr_shift(top, small) == (-math.inf, -1.0)
  assert A.decide_transfer(A.lr_shift(top, small)) == "inconclusive"  # −1 (held) and −5 (failed) both possible
  assert A.lr_shift(top, top) == (-math.inf, math.inf)
  assert A.decide_transfer(A.lr_shift(None, small)) == "inconclusive"


def test_trace_max_ratio_and_thresholds():
  steps, values = [10, 20, 30], [1.0, 3.0, 5.0]
  assert A.max_ratio(steps, values, 2.0, 20) == pytest.approx(1.5)  # t ≤ 20: max(1, 3)/2
  assert A.max_ratio(steps, values, 2.0, 30) == pytest.approx(2.5)
  assert A.max_ratio(steps, [1.0, float("nan"), None], 2.0, 30) == pytest.approx(0.5)  # non-finite left out
  assert A.max_ratio(steps, values, 2.0, 5) is None
  assert A.adam_threshold(0.9) == pytest.approx(38.0)  # (2 + 2β₁)/(1 − β₁)
  assert (A.trace_window(0), A.trace_window(20), A.trace_window(5)) == (A.EARLY_STEPS, 20, 5)


def _trace_collected(preconditioned: bool) -> dict:
  """Two hand-made runs: Post-LN without warmup (diverged at step 30) and with warmup 20."""
  curves = lambda lam, lr, p: dict(
      steps=[10, 20, 30],
      lambda_max=lam,
      lambda_max_bound=[0.1] * 3,
      lr=lr,
      lr_lambda=[a * b for a, b in zip(lam, lr)],
      p_lambda=p if preconditioned else [None] * 3,
      p_lambda_bound=[1.0] * 3 if preconditioned else [None] * 3,
      lr_p_lambda=[a * b for a, b in zip(p, lr)] if preconditioned else [None] * 3,
  )
  runs = [
      dict(arm="Post-LN, warmup 0", x=0.0, lr=1e-2, seed=0, outcome="diverged", loss=None)
      | curves([100.0, 300.0, float("nan")], [1e-2] * 3, [1900.0, 3800.0, 7600.0]),
      dict(arm="Post-LN, warmup 20", x=20.0, lr=1e-2, seed=0, outcome="finished", loss=4.0)
      | curves([100.0, 300.0, 500.0], [5e-3, 1e-2, 1e-2], [1900.0, 3800.0, 7600.0]),
  ]
  return dict(
      runs=runs, missing=[], missing_labels=[], expected=2, arms=[r["arm"] for r in runs], xs=[0.0, 20.0], lrs=[1e-2]
  )


@pytest.mark.parametrize("preconditioned", [True, False])
def test_trace_measure_and_figure_on_synthetic_metrics(tmp_path, monkeypatch, preconditioned):
  m = axis_collect.measure(_trace_collected(preconditioned), "trace", 0.9)
  no_wu, wu = m["rows"]["Post-LN, warmup 0"][0], m["rows"]["Post-LN, warmup 20"][0]
  # without warmup: t ≤ 20, η·λ = (1, 3) → 3/2; η·λ_P = (19, 38) → 38/38; the NaN record of the diverged step dropped
  assert no_wu["max_gd"] == pytest.approx(1.5) and no_wu["diverged"] and no_wu["window"] == A.EARLY_STEPS
  # warmup 20: η = (5e-3, 1e-2) at t = 10, 20: η·λ = (0.5, 3) → 1.5; over the whole run 5 → 2.5
  assert wu["max_gd"] == pytest.approx(1.5) and wu["max_gd_run"] == pytest.approx(2.5) and not wu["diverged"]
  if preconditioned:
    assert no_wu["max_adam"] == pytest.approx(1.0) and wu["max_adam"] == pytest.approx(1.0)
  else:
    assert no_wu["max_adam"] is None
  json.dumps(m, allow_nan=False)  # strict JSON: the NaN record became None
  drawn = []
  monkeypatch.setattr(axis_figures.report, "save_figure", lambda fig, path: drawn.append(fig) or path)
  axis_figures.trace(m, str(tmp_path), "synthetic")
  assert len(drawn[0].axes) == (2 if preconditioned else 1)  # Adam's panel only where the records hold it
  thresholds = [line.get_ydata()[0] for ax in drawn[0].axes for line in ax.get_lines() if line.get_linestyle() == "--"]
  assert thresholds == ([2.0, pytest.approx(38.0)] if preconditioned else [2.0])


def test_transfer_measure_on_hand_made_runs():
  lrs = [1e-3, 1e-2, 1e-1]
  losses = {  # (parameterization, width) -> final loss per lr (None: diverged)
      ("standard", 32.0): [4.0, 3.0, 3.5],
      ("standard", 128.0): [3.2, None, None],  # the optimum moves down one step (and is censored below)
      ("mup", 32.0): [4.0, 3.0, 3.5],
      ("mup", 128.0): [3.6, 2.9, None],
  }
  runs = [
      dict(arm=arm, x=x, lr=lr, seed=0, outcome="diverged" if v is None else "finished", loss=v)
      for (arm, x), vs in losses.items()
      for lr, v in zip(lrs, vs)
  ]
  c = dict(runs=runs, missing=[], missing_labels=[], expected=12, arms=["standard", "mup"], xs=[32.0, 128.0], lrs=lrs)
  m = axis_collect.measure(c, "transfer", 0.9)
  assert m["rows"]["mup"]["shift"] == [0.0, 0.0] and m["verdicts"] == {"mup_transfer": "reproduced"}
  sp = m["rows"]["standard"]
  assert sp["shift"] == [None, -1.0] and sp["shift_factor"] == pytest.approx(0.1)  # (−∞, −1]: reported
  assert sp["widths"][1]["diverged"] == [False, True, True] and sp["widths"][1]["censored"] == "below"
  assert m["outcomes"] == {"finished": 9, "diverged": 3, "crashed": 0}


# ------------------------------------------------------------------------------------------------ configs


def _cpu() -> "atlas_config.ml_collections.ConfigDict":
  config = atlas_config.get_config("cpu")
  config.data.dir = "/nonexistent"  # resolving reads no data
  return config


def _resolved(part: str):
  cfg = run_lib.plan(_cpu(), part)
  return cfg, [
      (c, train.config.resolve(grid_lib.cell_config(cfg, c, 0), groups=sweep_lib.GROUPS)) for c in grid_lib.cells(cfg)
  ]


def test_cpu_width_grid():
  cfg, cells = _resolved("width")
  got = sorted((r.model.parameterization, r.model.d_model, r.model.d_ff, r.init.scheme) for _, r in cells)
  schemes = {"standard": "xavier", "ntk": "ntk", "mup": "mup"}
  assert got == sorted((p, d, 4 * d, schemes[p]) for p in schemes for d in (32, 64, 128, 256))
  assert cfg.sweep.seeds >= 1 and cfg.sweep.analysis_at_init
  for _, r in cells:
    m, a = r.model, r.groups["analysis"]
    assert (m.norm_position, m.num_heads, m.num_encoder_layers, m.num_decoder_layers) == ("pre", 2, 2, 2)
    assert r.data.vocab_size == 2000 and r.train.num_steps == 1
    assert (a.top_k, a.bottom_k, a.preconditioned_top_k) == (1, 0, 1)
    assert not (a.blocks or a.spectrum or a.trace_probes or a.signal or a.grad_norms or a.update_sharpness)
    if m.parameterization == "mup":  # as configs/mup.py: untied readout, 1/d_k attention, base width the smallest
      assert (m.tie_embeddings, m.scale_embeddings, m.attention_logit_scale, m.mup_base_width) == (
          False,
          False,
          "dk",
          32,
      )


def test_cpu_depth_grid():
  cfg, cells = _resolved("depth")
  methods = [c.arm for c, _ in cells]  # the labels configs/atlas.py gives the depth grid's products
  assert sorted(set(methods)) == sorted(["Post-LN + Xavier", "Pre-LN", "DeepNorm", "T-Fixup", "Admin"])
  got = sorted((c.arm, r.model.num_decoder_layers) for c, r in cells)
  assert got == sorted((m, n) for m in set(methods) for n in (2, 6, 12, 24))
  for _, r in cells:
    m, a = r.model, r.groups["analysis"]
    assert m.num_encoder_layers == m.num_decoder_layers and (m.d_model, m.num_heads, m.d_ff) == (32, 2, 128)
    assert (a.top_k, a.bottom_k, a.preconditioned_top_k, a.grad_norms) == (1, 0, 0, True) and not a.blocks
    assert r.train.num_steps == 1 and r.groups["sweep"].analysis_at_init


def test_cpu_transfer_grid():
  cfg, cells = _resolved("transfer")
  got = sorted((r.model.parameterization, r.model.d_model, r.model.d_ff, r.optim.learning_rate) for _, r in cells)
  lrs = (1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2, 3.16e-2)
  assert got == sorted((p, d, 4 * d, lr) for p in ("standard", "ntk", "mup") for d in (32, 64, 128) for lr in lrs)
  assert cfg.sweep.seeds == 1 and not cfg.sweep.analysis_at_init
  for _, r in cells:
    o, t, d = r.optim, r.train, r.data
    assert (t.num_steps, d.batch_size, o.warmup_steps, o.schedule) == (100, 32, 10, "linear_warmup")
    assert (o.name, o.b1, o.b2, o.eps) == ("adam", 0.9, 0.98, 1e-9)  # configs/claims/_training.py's _TRAIN
    assert (d.max_eval_loss_examples, t.num_decode_examples, t.curvature_every) == (256, 0, 0)
    assert (r.model.norm_position, r.model.num_heads, r.model.num_encoder_layers) == ("pre", 2, 2)


def test_cpu_trace_grid():
  cfg, cells = _resolved("trace")
  got = [(c.arm, r.model.norm_position, r.optim.warmup_steps) for c, r in cells]
  assert got == [
      ("Post-LN + Xavier (warmup 0)", "post", 0),
      ("Post-LN + Xavier (warmup 20)", "post", 20),
      ("Pre-LN (warmup 0)", "pre", 0),
  ]
  for _, r in cells:
    a = r.groups["analysis"]
    assert (r.optim.learning_rate, r.train.num_steps, r.train.curvature_every) == (1e-3, 200, 10)
    assert (a.batch_size, a.lanczos_steps, a.preconditioned_top_k) == (16, 20, 1)
    assert (r.model.num_encoder_layers, r.model.d_model) == (6, 32)


def test_the_atlas_group_changes_no_existing_cell():
  """init and train cells, their names and configs, are those of the atlas config without its `atlas` group (the
  runs in a workdir started before the axis parts resume), and a run's config.json may differ in that group."""
  config, bare = _cpu(), _cpu()
  with bare.unlocked():
    del bare["atlas"]
  for build in (cells_lib.init_config, cells_lib.train_config):
    assert build(config).to_dict() == build(bare).to_dict() and "atlas" not in build(config)
  names = {c.name for _, c in cells_lib.init_cells(config)}
  assert {  # some of the names runs/atlas/init/ already holds
      "model.norm_position=post__init.scheme=xavier",
      "model.norm_position=pre__init.scheme=xavier",
      "model.norm_type=none__model.norm_position=none__init.scheme=tfixup",
      "model.norm_position=post__model.residual=deepnorm__init.scheme=deepnet",
      "model.norm_position=post__model.scale_embeddings=False__model.position=learned__model.embedding_norm=True"
      "__init.scheme=bert",
  } <= names


def test_a_rerun_may_change_groups_no_run_reads(tmp_path):
  config = atlas_config.get_config("tiny")
  cell = grid_lib.cells(config)[0]
  resolved = train.config.resolve(grid_lib.cell_config(config, cell, 0), groups=sweep_lib.GROUPS)
  recorded = json.loads(json.dumps(resolved.to_dict()))
  recorded.pop("atlas")  # written before the axis parts existed
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  train.config.check_unchanged(str(tmp_path), resolved, "here")  # the atlas group differs: resumes
  recorded["optim"]["learning_rate"] *= 2
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  with pytest.raises(ValueError, match=r"here: .* another config \(optim.learning_rate: 0.002 -> 0.001\)"):
    train.config.check_unchanged(str(tmp_path), resolved, "here")


# ------------------------------------------------------------------------------------------------ --parts


def test_a_partial_part_names_its_first_missing_cells_by_arm_and_x():
  labels = [f"µP, d={d}" for d in (32, 64, 128, 256)] + [f"SP, d={d}" for d in (32, 64, 128, 256)]
  m = dict(done=4, expected=12, missing=[f"dir{i}" for i in range(8)], missing_labels=labels)
  status = axis_report._status(m)
  assert status.startswith("**PARTIAL: 4 of 12 runs**; 8 cell(s) missing: µP, d=32; µP, d=64; ")
  assert "SP, d=64; and 2 more (atlas.json's `missing` names them)" in status and "SP, d=128" not in status
  assert "dir0" not in status
  assert axis_report._status(dict(done=3, expected=3, missing=[], missing_labels=[])) == "**complete** (3 runs)"


def test_parse_parts():
  assert axes_lib.parse_parts("width, depth") == ("width", "depth")
  assert axes_lib.parse_parts(",".join(axes_lib.PARTS)) == axes_lib.PARTS
  assert axes_lib.parse_parts("") == axes_lib.PARTS  # '' = every part, in order
  valid = r"valid: comma-separated parts of \['init', 'train', 'length', 'trace', 'width', 'depth', 'transfer'\]"
  with pytest.raises(
      ValueError, match=r"config.atlas.parts='width,widht' is invalid \('widht' is not a part\); " + valid
  ):
    axes_lib.parse_parts("width,widht")
  with pytest.raises(ValueError, match=r"config.atlas.parts='init,init' is invalid \(a part is named twice\)"):
    axes_lib.parse_parts("init,init")


def test_bad_parts_fail_before_any_compute(tmp_path):
  with pytest.raises(ValueError, match="'trainn' is not a part"):
    run_lib.run_atlas(atlas_config.get_config("tiny"), str(tmp_path / "w"), str(tmp_path / "o"), parts=("trainn",))
  workdir = tmp_path / "cli"
  proc = subprocess.run(
      [
          sys.executable,
          "main.py",
          "--config=configs/atlas.py:tiny",
          "--config.atlas.parts=width,bogus",
          f"--workdir={workdir}",
          f"--config.atlas.out={tmp_path}",
      ],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert "config.atlas.parts='width,bogus' is invalid ('bogus' is not a part)" in proc.stderr
  assert not workdir.exists() and not (tmp_path / "w").exists()


def test_main_py_atlas_mode_report_only(tmp_path):
  """main.py's atlas mode (configs/atlas.py sets it) with atlas.report_only: the report of an empty workdir, no run."""
  out, workdir = tmp_path / "out", tmp_path / "w"
  cmd = [sys.executable, "main.py", "--config=configs/atlas.py:tiny", f"--workdir={workdir}"]
  proc = subprocess.run(
      cmd + ["--config.atlas.report_only=true", f"--config.atlas.out={out}"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  text = (out / "ATLAS.md").read_text()
  assert "PARTIAL: 0 of 12 runs" in text and "python main.py --config=configs/atlas.py:tiny" in text
  assert not (workdir / "train" / "cells").exists()


# ------------------------------------------------------------------------------------------------ end to end


def test_a_rerun_of_a_run_older_than_a_key_resumes_while_the_key_holds_its_default(tmp_path):
  """A key added to the code after a run was trained (absent from its config.json) is unchanged at its default;
  train.eval_at_init changes nothing trained, whatever its value."""
  config = atlas_config.get_config("tiny")
  cell = grid_lib.cells(config)[0]
  resolved = train.config.resolve(grid_lib.cell_config(config, cell, 0), groups=sweep_lib.GROUPS)
  recorded = json.loads(json.dumps(resolved.to_dict()))
  for key in ("decay_start", "schedule"):
    recorded["optim"].pop(key)  # keys the old run did not know (schedule: the default is linear_warmup, as set)
  recorded["train"].pop("eval_at_init")
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  assert resolved.optim.schedule == "linear_warmup" and resolved.train.eval_at_init is True
  train.config.check_unchanged(str(tmp_path), resolved, "here")
  recorded["optim"]["schedule"] = "constant"  # present and different: a change
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  with pytest.raises(ValueError, match=r"optim.schedule: 'constant' -> 'linear_warmup'"):
    train.config.check_unchanged(str(tmp_path), resolved, "here")
