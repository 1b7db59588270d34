"""The boundary rules (experiments/claims/shared/boundary_rules.py) and study 14 (experiments/claims/edge_boundary.py,
configs/claims/edge_boundary.py): brackets by the failing fraction, the regression's verdict on every branch from
hand-made records, the design against study 11's record, and a tiny run end to end."""

import json
import math
import os

import numpy as np
import pytest

from analysis import outcomes
from configs import atlas
from configs.claims import edge_boundary as config_lib
from experiments import grid as grid_lib
from experiments import study
from experiments.claims import edge, edge_boundary
from experiments.claims.shared import boundary_rules, edge_rules

LRS = [1e-3 * 2**k for k in range(10)]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _runs(etas: dict, seeds=3, flip=None):
  """Rows whose seeds fail (collapse) exactly above each method's η*; `flip`: (method, lr, seed) that trains."""
  rows = []
  for method, eta in etas.items():
    for lr in LRS:
      for seed in range(seeds):
        bad = lr > eta and (method, lr, seed) != flip
        final = outcomes.COLLAPSED if bad else outcomes.TRAINED
        rows.append(dict(method=method, lr=lr, warmup=0, seed=seed, early=outcomes.STABLE, final=final))
  return rows


def test_a_cell_fails_at_a_failing_fraction_of_one_half_and_brackets_its_boundary():
  rows = _runs({"a": 0.005}, flip=("a", 0.008, 0))  # 2 of 3 fail at 0.008: still a failing cell
  b = boundary_rules.boundaries(rows)["a"]
  assert (b["lo"], b["hi"], b["open"]) == (0.004, 0.008, None)
  assert b["eta"] == pytest.approx(math.sqrt(0.004 * 0.008))
  k, n, lo, hi = b["cells"][0.008]
  assert (k, n) == (2, 3) and 0 < lo < 2 / 3 < hi < 1  # Clopper–Pearson around 2/3
  one = [r for r in rows if not (r["lr"] == 0.008 and r["seed"] == 1)]
  one = [dict(r, final=outcomes.TRAINED) if r["lr"] == 0.008 else r for r in one]  # 0 of 2 fail: trains
  assert boundary_rules.boundaries(one)["a"]["hi"] == 0.016
  spiked = [dict(r, early=outcomes.UNSTABLE, final=outcomes.TRAINED) if r["lr"] > 0.005 else r for r in rows]
  assert boundary_rules.boundaries(spiked)["a"]["hi"] == 0.008  # a spike that recovers fails
  assert boundary_rules.boundaries(_runs({"a": 1.0}))["a"]["open"] == "above"
  assert boundary_rules.boundaries(_runs({"a": 1e-4}))["a"]["open"] == "below"


def _design(slope, noise=0.0, methods=12, seed=0):
  """(rows, λ₀) of methods whose λ₀ span two decades and whose η* = 0.02·(100·c/λ₀)^slope·e^noise, in the grid."""
  rng = np.random.default_rng(seed)
  c = edge_rules.threshold("adam", 0.9)
  lam0, etas = {}, {}
  for i in range(methods):
    lam = 38.0 * 10 ** (1 + 2.0 * i / (methods - 1))  # c/λ₀ from 1e-1 to 1e-3
    lam0[f"m{i}"] = {"adam": lam}
    etas[f"m{i}"] = 0.02 * math.exp(slope * math.log(c / lam / 0.01) + noise * rng.standard_normal())
  return _runs(etas), lam0


def _record(slope, noise=0.0, methods=12, seed=0):
  """The boundary rules' measurement of `_design`."""
  return boundary_rules.boundary_measure(*_design(slope, noise, methods, seed), {}, beta1=0.9)


@pytest.mark.parametrize(
    "slope, noise, verdict",
    [
        (1.0, 0.05, study.REPRODUCED),  # η* = c/λ₀ up to the grid's factor 2: slope ≈ 1, tight
        (-0.8, 0.05, study.NOT_REPRODUCED),  # smaller curvature, earlier boundary: slope < 0
        (0.0, 1.0, study.INCONCLUSIVE),  # no relation and a wide scatter: straddles 0
    ],
)
def test_the_regression_verdict_on_every_branch(slope, noise, verdict):
  b = study.jsonable(_record(slope, noise))
  result, reason = boundary_rules.boundary_verdict(b)
  assert result == verdict, reason
  if verdict == study.REPRODUCED:
    _, lo, hi = b["regressions"]["adam"]["slope_boot"]
    assert lo <= 1 <= hi and lo > 0.5
  if verdict == study.INCONCLUSIVE:
    assert "methods" in reason  # names the design that would decide it


def test_a_slope_that_excludes_0_and_1_is_said_to_order_the_boundaries_not_to_scale_them():
  b = study.jsonable(_record(0.4, 0.02))
  result, reason = boundary_rules.boundary_verdict(b)
  assert result == study.INCONCLUSIVE and "excludes 0 and 1" in reason


def test_slope_reading_branches():
  assert boundary_rules.slope_reading((1.0, 0.8, 1.2)) == study.REPRODUCED
  assert boundary_rules.slope_reading((-1.0, -1.5, -0.2)) == study.NOT_REPRODUCED
  assert boundary_rules.slope_reading((-0.2, -0.9, 0.0)) == study.NOT_REPRODUCED  # at or below 0
  assert boundary_rules.slope_reading((0.3, -0.2, 0.8)) == study.INCONCLUSIVE
  assert boundary_rules.slope_reading((0.4, 0.2, 0.6)) == study.INCONCLUSIVE
  assert boundary_rules.slope_reading(None) == study.INCONCLUSIVE


def test_methods_to_decide_projects_the_t_interval_and_grows_as_the_slope_shrinks():
  rng = np.random.default_rng(0)
  x = np.linspace(-3, -1, 10)
  y = 0.3 * x + 0.5 * rng.standard_normal(10)
  near = boundary_rules.methods_to_decide(x, y)
  far = boundary_rules.methods_to_decide(x, 0.2 * x + (y - 0.3 * x))
  assert near is not None and near >= 10 and (far is None or far > near)
  assert boundary_rules.methods_to_decide(x, 2.0 * x + 0.01 * rng.standard_normal(10)) == 10  # decided already


def test_warmup_rescue_rises_with_lambda0_when_the_sharper_methods_are_rescued():
  cold, lam0 = _design(1.0, 0.05)
  b = boundary_rules.boundary_measure(cold, lam0, {}, beta1=0.9)
  rows = list(cold)
  for i, (method, bb) in enumerate(sorted(b["bounds"].items(), key=lambda kv: int(kv[0][1:]))):
    for seed in range(3):
      final = outcomes.TRAINED if seed < i // 4 else outcomes.COLLAPSED  # m0–m3: 0 of 3 rescued … m8+: 2 of 3
      rows.append(dict(method=method, lr=bb["hi"], warmup=100, seed=seed, early=outcomes.STABLE, final=final))
  r = boundary_rules.rescue(rows, b["bounds"], lam0, "adam", warmup=100)
  assert r["reading"] == "rises with λ₀" and r["spearman"][1] > 0
  assert all(c[3] == b["bounds"][m]["hi"] for m, c in r["cells"].items())


def test_the_rescue_reads_the_warmup_cell_the_design_ran_where_it_fails_without_warmup():
  """Study 14 runs its warmup at study 11's η_hi: the rescue reads that cell when the fresh seeds fail there without
  warmup (a bracket that moved down), and leaves out a method whose fresh seeds train there (nothing to rescue)."""
  fail, train = outcomes.COLLAPSED, outcomes.TRAINED
  rows = [dict(method=m, lr=lr, warmup=0, seed=s, early=outcomes.STABLE, final=train if lr < hi else fail)
          for m, hi in (("a", 0.004), ("b", 0.016)) for lr in (0.002, 0.004, 0.008, 0.016) for s in range(3)]  # fmt: skip
  rows += [
      dict(method=m, lr=0.008, warmup=100, seed=s, early=outcomes.STABLE, final=train) for m in "ab" for s in range(3)
  ]
  bounds = boundary_rules.boundaries(rows, 0)
  r = boundary_rules.rescue(rows, bounds, {"a": {"gd": 10.0}, "b": {"gd": 20.0}}, "gd", warmup=100)
  assert bounds["a"]["hi"] == 0.004 and r["cells"] == {"a": [3, 3, 10.0, 0.008]}  # b trains at 0.008 without warmup


def test_the_design_is_study_11s_record_re_read():
  """configs/claims/edge_boundary.py's brackets are those the boundary rules give on study 11's record (LayerScale,
  open above there, gets the next lr of its grid)."""
  with open(os.path.join(REPO, "reports/reproduction/edge/claim.json"), encoding="utf-8") as f:
    m = json.load(f)["measured"]
  bounds = boundary_rules.boundaries(m["runs"], 0)
  expected = {k: (b["lo"], b["hi"] if b["hi"] else 2 * b["lo"]) for k, b in bounds.items()}
  assert config_lib.BRACKETS["cpu"] == expected
  cfg = config_lib.get_config("cpu")
  grid = grid_lib.format_grid(grid_lib.sweep_products(cfg))
  assert grid.count("optim.warmup_steps=100") == len(expected)
  assert "LayerScale: " in grid and "optim.learning_rate=0.128,0.181,0.256" in grid
  assert (cfg.sweep.first_seed, cfg.sweep.seeds) == (6, 3)  # fresh: study 11 ran 0–2, the two-machine record 3–5


def test_paper_scale_runs_study_11s_paper_grid_on_fresh_seeds():
  from configs.claims import edge as edge_config  # noqa: PLC0415

  cfg = config_lib.get_config("paper")
  lrs = ",".join(repr(lr) for lr in edge_config.LRS["paper"])
  methods = len(atlas.METHODS["paper"])  # every method of the registry: no study 11 record at paper
  grid = grid_lib.format_grid(grid_lib.sweep_products(cfg))
  assert grid.count(f"optim.learning_rate={lrs}") == methods and "warmup_steps=100" not in grid
  assert (cfg.sweep.first_seed, cfg.sweep.seeds) == (3, 3)


@pytest.mark.slow
def test_study_11_redecides_its_record_as_a_labelled_re_reading():
  with open(os.path.join(REPO, "reports/reproduction/edge/claim.json"), encoding="utf-8") as f:
    m = json.load(f)["measured"]
  v = edge.CLAIM.verdict({k: v for k, v in m.items() if k != "boundary"})
  assert v.reason.startswith("A re-reading of seeds 0–2") and "study 14" in v.reason


def test_extensions_step_past_an_open_end_by_sqrt_2():
  assert edge_boundary._step(0.008, up=False) == 0.00566
  assert edge_boundary._step(0.256, up=True) == 0.362


@pytest.mark.slow
def test_edge_boundary_at_tiny_end_to_end(tmp_path):
  """The tiny config trains its fresh seeds (seed 3), reads λ₀ from study 11's record and decides."""
  import ml_collections  # noqa: PLC0415

  from experiments import run as claims_run  # noqa: PLC0415

  config = config_lib.get_config("tiny")
  assert isinstance(config, ml_collections.ConfigDict)
  result = claims_run.run_claim(config, str(tmp_path))
  assert result["verdict"] in study.VERDICTS
  assert {r["seed"] for r in result["measured"]["runs"]} == {3}
  assert result["measured"]["predictors_from"]["path"] == edge_boundary.PREDICTORS_FROM
  assert (tmp_path / "cells").exists()


def test_the_init_scale_pilot_runs_only_step_0_analyses_of_its_arms():
  """configs/claims/edge_scale_pilot.py: 2 architectures × 4 stds and Pre-LN at 4 widths, each one at-init product on
  one seed, no training step; Post-LN's arm is the atlas's Post-LN + BERT keys at the arm's std, the widths' the
  atlas's Pre-LN with d_ff = 4d."""
  from configs.claims import edge_scale_pilot as pilot  # noqa: PLC0415

  cfg = pilot.get_config("cpu")
  assert cfg.mode == "sweep" and cfg.sweep.seeds == 1
  grid = grid_lib.sweep_products(cfg)
  cells = grid_lib.format_grid(grid)
  assert cells.count("analysis.at_init=true") == 12 and cells.count("train.num_steps=0") == 12
  for std in pilot.STDS:
    assert cells.count(f"init.std={std!r}") == 2
  post = dict(pilot.products()[0][1:])
  assert post == {
      **dict(atlas.BERT),
      "init.scheme": "bert",
      "init.std": 0.0025,
      "train.num_steps": 0,
      "analysis.at_init": True,
  }
  widest = dict(pilot.products()[-1][1:])
  assert widest == {
      **dict(atlas.ARMS["preln"]),
      "model.d_model": 256,
      "model.d_ff": 1024,
      "train.num_steps": 0,
      "analysis.at_init": True,
  }
  assert cfg.model.d_ff == 4 * cfg.model.d_model  # d = 32's cell is the registry's Pre-LN model
  assert cfg.analysis.edge_predictors and cfg.analysis.dtype == "float64"
