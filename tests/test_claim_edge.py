"""Study 11 (experiments/claims/edge.py and edge_rules.py, configs/claims/edge.py): each predictor's threshold, the
study read from hand-made runs (λ₀, scores, tables, traces, figure), its adaptive grid, and one run at tiny. The scores
on hand-made cells whose answer is known: tests/test_edge_rules.py."""

import copy
import json
import math

import pytest

from analysis import outcomes, stability
from analysis import records as analysis_records
from configs.claims import edge as edge_config
from experiments import grid as grid_lib
from experiments import run as claims_run
from experiments import shard as shard_lib
from experiments import study
from experiments import sweep as sweep_lib
from experiments.claims import edge
from experiments.claims.shared import boundary_rules, edge_report, edge_rules
from train import metrics as metrics_lib


def test_thresholds_are_each_predictors_theory():
  assert edge.threshold("gd", 0.9) == 2.0 and edge.threshold("batch", 0.9) == 2.0
  assert edge.threshold("adam", 0.9) == pytest.approx(38.0) and edge.threshold("adam", 0.0) == 2.0
  with pytest.raises(ValueError, match="not one of"):
    edge.threshold("hessian", 0.9)
  assert (
      edge_rules.margin(0.1, 40.0, 2.0) == pytest.approx(math.log(2.0))
      and edge_rules.margin(0.1, 0.0, 2.0) == -math.inf
  )
  assert stability.eps_decides(1.0, 2.5) and not stability.eps_decides(1.0, 1.9) and stability.eps_decides(0.0, 1.0)


# ------------------------------------------------------------------------------------------- the study over its runs
def test_step0_lambdas_reads_each_predictor_from_stability_json():
  s = dict(
      lambda_max=4.0,
      lambda_max_bound=0.1,
      preconditioned_lambda_max=900.0,
      preconditioned_lambda_max_bound=2.0,
      first_step_critical_lr=0.5,  # 2gᵀd/dᵀHd: λ₀ = c/η* = 2/0.5
      ggn_lambda_max=3.0,
      ggn_lambda_max_bound=0.05,
      batch_sharpness=1.5,
  )
  got = edge.step0_lambdas(s, 0.9)
  assert got == {
      "gd": {"lambda": 4.0, "bound": 0.1},
      "adam": {"lambda": 900.0, "bound": 2.0},
      "update": {"lambda": 4.0, "bound": None},
      "ggn": {"lambda": 3.0, "bound": 0.05},
      "batch": {"lambda": 1.5, "bound": None},
  }
  # A first step that never overshoots (dᵀHd ≤ 0: critical lr ∞) predicts stable at every η: λ₀ = 0.
  assert edge.step0_lambdas({"first_step_critical_lr": math.inf}, 0.9) == {"update": {"lambda": 0.0, "bound": None}}
  # ... as stability.json holds it: strict JSON writes the ∞ as null, and the negative dᵀHd/dᵀd says why (Post-LN +
  # BERT 0.02 in the cpu run, every seed); a null critical lr with no negative curvature (NaN) is no λ₀.
  written = json.loads(
      json.dumps(analysis_records.jsonable({"first_step_critical_lr": math.inf, "update_sharpness": -0.01}))
  )
  assert written == {"first_step_critical_lr": None, "update_sharpness": -0.01}
  assert edge.step0_lambdas(written, 0.9) == {"update": {"lambda": 0.0, "bound": None}}
  assert edge.step0_lambdas({"first_step_critical_lr": None, "update_sharpness": None}, 0.9) == {}
  # At the threshold: η·λ₀ = c exactly at η = the critical first step.
  assert edge_rules.margin(0.5, got["update"]["lambda"], 2.0) == pytest.approx(0.0)


def _write_run(root, cell, seed, *, arm, params, train=(), stability=None, cls=None, outcome="finished"):
  folder = root / "cells" / cell / f"seed_{seed}"
  folder.mkdir(parents=True)
  lines = [dict(step=s, split="train", loss=v) for s, v in train]
  (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
  if stability is not None:
    (folder / "analysis" / "step_0").mkdir(parents=True)
    (folder / "analysis" / "step_0" / "stability.json").write_text(json.dumps(stability))
  return dict(
      cell=cell, seed=seed, arm=arm, params=params, outcome=outcome, final={}, workdir=f"cells/{cell}/seed_{seed}",
      **{"class": cls},
  )  # fmt: skip


def _study_runs(tmp_path, lam_adam: dict, eps_decides=(), update_eps_decides=()):
  """Per method an at-init run with λ_max(P⁻¹H) = lam_adam[method] and training runs (warmup 0 and 5) whose early
  class follows Adam's rule: unstable (a 3-nat spike at step 3) iff η·λ > 38. ε decides λ(P⁻¹H) of the methods in
  `eps_decides` and the update predictor's λ₀ of those in `update_eps_decides` (seed 1 only)."""
  records = []
  for method, lam in lam_adam.items():
    for seed in (0, 1):
      stab = dict(lambda_max=1.0, preconditioned_lambda_max=lam * (1 + 0.01 * seed), eps_decides=method in eps_decides,
                  update_eps_decides=seed == 1 and method in update_eps_decides)  # fmt: skip
      records.append(
          _write_run(tmp_path, f"{method}-init", seed, arm=method, params={"analysis.at_init": True}, stability=stab)
      )
      for lr in (1e-3, 1e-2, 1e-1):
        for w in (0, 5):
          bad = lr * lam > 38 and not w
          losses = [(s, 5.0 - 0.1 * s + (3.0 if bad and s == 3 else 0.0)) for s in range(1, 9)]
          params = {"analysis.at_init": False, "optim.learning_rate": lr, "optim.warmup_steps": w}
          cls = outcomes.DIVERGED if bad else outcomes.TRAINED
          records.append(
              _write_run(tmp_path, f"{method}-{lr}-{w}", seed, arm=method, params=params, train=losses, cls=cls)
          )
  return study.Results(str(tmp_path), records, _Config())


class _Config:

  class optim:  # noqa: N801 (a stand-in for config.optim)
    b1 = 0.9


def test_measure_reads_lambda0_per_method_the_classes_and_scores_them(tmp_path):
  lam = {"a": 1e2, "b": 1e3, "c": 1e4, "d": 1e5, "e": 3e5}
  m = edge.measure(_study_runs(tmp_path, lam, eps_decides=("e",), update_eps_decides=("a", "e")))
  assert m["lam0"]["b"]["adam"] == pytest.approx(1e3 * 1.005)  # the median of the two seeds
  assert m["flagged"] == {"a": ["update"], "e": ["adam", "update"]}  # any seed's flag flags the method
  assert m["thresholds"]["adam"] == pytest.approx(38.0)
  early = m["scores"]["early"]["adam"]
  # e is flagged (ε decides its λ): 4 methods × 3 lrs scored; unstable where η·λ > 38: b at 0.1, c at 0.01 and 0.1,
  # d at all three.
  assert (early["methods"], early["cells"], early["unstable"]) == (4, 12, 6)
  assert early["auc"] == 1.0 and early["accuracy"] == 1.0
  assert m["grid"]["a"]["add"] == [0.2] and m["grid"]["d"]["add"] == [5e-4] and m["grid"]["b"]["bracketed"]
  # Warmup 5 rescues every cell unstable without it.
  rescue = m["rescue"]["early"]["5"]["adam"]
  assert rescue["rescued"] == rescue["unstable without warmup"] == 6
  # the boundary rules head the summary
  assert edge_report.summary(m) == boundary_rules.boundary_summary(edge_report.boundary_of(m))
  assert (
      edge_report.boundary_of(m)["bounds"] == study.jsonable(boundary_rules.boundaries(m["runs"], 0))
      and "boundary" not in m
  )


def test_the_reports_tables_read_every_predictor_and_read_the_same_from_claim_json(tmp_path):
  """Study 11's tables (Study.tables): every predictor × outcome against both baselines, the warmup question, and per
  method λ₀, what ε decides and the boundary; the same from claim.json's measurements (JSON keys are strings there)."""
  m = edge.measure(_study_runs(tmp_path, {"a": 1e2, "b": 1e3, "c": 1e4, "d": 1e5, "e": 3e5}, eps_decides=("e",)))
  *boundary_tables, scores, rescue, methods = edge_report.tables(m)
  assert boundary_tables == boundary_rules.boundary_tables(edge_report.boundary_of(m))
  assert [(r[0], r[1]) for r in scores["rows"]] == [
      (which, edge_report.PREDICTOR_NAMES[p]) for which in ("early", "final") for p in edge_rules.PREDICTORS
  ]
  adam = next(r for r in scores["rows"] if r[:2] == ["early", "λ_max(P⁻¹H)"])
  row = dict(zip(scores["header"], adam))
  assert (row["methods"], row["cells"], row["unstable"], row["AUC"], row["accuracy"]) == (4, 12, 6, 1.0, 1.0)
  assert all(len(r) == len(t["header"]) for t in (scores, rescue, methods) for r in t["rows"])
  assert [r[:3] for r in rescue["rows"] if r[0] == "early" and r[2] == "λ_max(P⁻¹H)"] == [["early", 5, "λ_max(P⁻¹H)"]]
  per = {r[0]: dict(zip(methods["header"], r)) for r in methods["rows"]}
  assert per["e"]["ε decides"] == "adam" and per["a"]["ε decides"] == "—"
  assert per["b"]["boundary"] == "0.01 → 0.1" and per["a"]["boundary"] == "not bracketed"
  assert per["b"]["lrs run"] == "0.001 – 0.1" and per["b"]["λ_max(P⁻¹H)"] == pytest.approx(1005.0)
  read_back = json.loads(json.dumps(study.jsonable(m)))  # claim.json's measurements, as --redecide reads them
  assert edge_report.tables(read_back) == edge_report.tables(m)
  assert edge.verdict(read_back) == edge.verdict(m) and edge_report.summary(read_back) == edge_report.summary(m)


def test_a_trace_reads_the_sharpness_at_the_end_of_the_warmup_against_the_same_seeds_step0(tmp_path):
  """Kalra & Barkeshli 2024's mechanism measured: λ(P⁻¹H) falls from λ₀ = 1000 (the at-init run) to 250 by the end
  of a 20-step warmup (ratio 0.25); η(t)·λ(t) peaks at its first record, 1e-2·500 = 5 = 38 × 0.132."""
  records = [_write_run(tmp_path, "a-init", 0, arm="a", params={"analysis.at_init": True},
                        stability=dict(lambda_max=10.0, preconditioned_lambda_max=1000.0))]  # fmt: skip
  curve = [(10, 500.0), (20, 250.0), (30, 400.0)]
  lines = [dict(step=s, split="train", loss=5.0) for s in range(1, 31)]
  lines += [
      {"step": s, "split": "train", "curvature/lambda_max": p / 100, "curvature/preconditioned_lambda_max": p,
       "curvature/lr_times_lambda_max": 1e-2 * p / 100, "curvature/lr_times_preconditioned_lambda_max": 1e-2 * p}
      for s, p in curve
  ]  # fmt: skip
  params = {"optim.learning_rate": 1e-2, "optim.warmup_steps": 20, "train.curvature_every": 10}
  rec = _write_run(tmp_path, "a-trace", 0, arm="a", params=params, cls=outcomes.TRAINED)
  (tmp_path / rec["workdir"] / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
  m = edge.measure(study.Results(str(tmp_path), records + [rec], _Config()))
  (t,) = m["traces"]
  assert m["runs"] == []  # a trace is not a cell of the grid
  assert t["end_of_warmup"]["step"] == 20 and t["end_of_warmup"]["adam_over_step0"] == pytest.approx(0.25)
  assert t["end_of_warmup"]["gd_over_step0"] == pytest.approx(0.25)  # 2.5 / 10
  assert t["max_over_c"]["adam"] == pytest.approx(5.0 / 38.0) and t["max_over_c"]["gd"] == pytest.approx(0.025)
  assert (
      edge_report.summary(dict(m, crashed=[]))["trace, warmup 20: λ(P⁻¹H) at step 20 / λ₀"] == "0.25 (seeds 0.25–0.25)"
  )
  assert edge_report._trace_figure(m, str(tmp_path), "s") == ["trace.png"]
  # the control: the same method without warmup, read at the same step 20 (it falls to 100: 0.1 of λ₀)
  lines0 = [dict(x, **{"curvature/preconditioned_lambda_max": 3e4 / x["step"] - 1400}) if "curvature/lambda_max" in x else x for x in lines]  # fmt: skip
  rec0 = _write_run(tmp_path, "a-trace0", 0, arm="a", params=dict(params, **{"optim.warmup_steps": 0}), cls=outcomes.TRAINED)  # fmt: skip
  (tmp_path / rec0["workdir"] / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines0))
  m = edge.measure(study.Results(str(tmp_path), records + [rec, rec0], _Config()))
  summary = edge_report.summary(json.loads(json.dumps(study.jsonable(dict(m, crashed=[])))))
  assert summary["trace, warmup 0: λ(P⁻¹H) at step 20 / λ₀"] == "0.1 (seeds 0.1–0.1)"  # (3e4/20 − 1400) / 1000
  assert summary["trace, warmup 20: λ(P⁻¹H) at step 20 / λ₀"] == "0.25 (seeds 0.25–0.25)"


@pytest.mark.slow
def test_verdict_is_the_boundary_rules_said_as_a_re_reading():
  """Study 11's verdict is boundary_rules.boundary_verdict on its rows (computed from them for a record measured before
  the rules: --redecide), prefixed by the re-reading's label; a crash still decides first."""
  rows, lam0 = [], {}
  for i in range(10):
    lam = 38.0 * 10 ** (1 + 2.0 * i / 9)
    lam0[f"m{i}"] = {"adam": lam}
    eta = 0.02 * (38.0 / lam / 0.01)  # η* = c/λ₀ up to a constant: slope 1
    for lr in [1e-3 * 2**k for k in range(10)]:
      for seed in range(3):
        final = outcomes.COLLAPSED if lr > eta else outcomes.TRAINED
        rows.append(dict(method=f"m{i}", lr=lr, warmup=0, seed=seed, early=outcomes.STABLE, final=final))
  m = dict(crashed=[], runs=rows, lam0=lam0, flagged={}, beta1=0.9)
  v = edge.verdict(m)
  result, reason = boundary_rules.boundary_verdict(edge_report.boundary_of(m))
  assert v.verdict == result == study.REPRODUCED and v.reason == f"{edge.REREADING}. {reason}"
  assert edge.verdict(dict(m, crashed=["x seed 0: boom"])).verdict == study.INCONCLUSIVE


def test_the_figure_draws_every_method_and_predictor(tmp_path):
  m = edge.measure(_study_runs(tmp_path / "runs", {"a": 1e2, "b": 1e3}))
  assert edge_report.figure(m, None, str(tmp_path), "settings")[0] == "edge.png"
  assert (tmp_path / "edge.png").stat().st_size > 10_000


def test_extend_grid_adds_one_product_per_label_with_only_new_values():
  config = edge_config.get_config("tiny")
  grid = grid_lib.format_grid(grid_lib.sweep_products(config))  # the command line's form of the claim's products
  more = grid_lib.extend_grid(grid, config, {"Pre-LN": {"optim.learning_rate": [0.1, 0.2]}})  # 0.1 is there
  assert (
      more
      == grid + " | Pre-LN: model.norm_position=pre;init.scheme=xavier;optim.warmup_steps=0,2;optim.learning_rate=0.2"
  )
  assert grid_lib.extend_grid(more, config, {"Pre-LN": {"optim.learning_rate": [0.2]}}) == more  # nothing new
  assert grid_lib.extend_grid(grid, config, {"no such label": {"optim.learning_rate": [0.2]}}) == grid
  cells = grid_lib.cells(_with_grid(config, more))
  assert sum(c.arm == "Pre-LN" and c.params["optim.learning_rate"] == 0.2 for c in cells) == 2  # both warmups


def _with_grid(config, grid):
  out = copy.deepcopy(config)
  out.sweep.grid = grid
  return out


def test_every_method_has_its_at_init_cell_on_the_runs_own_first_batch():
  for scale in ("tiny", "cpu", "paper"):
    config = edge_config.get_config(scale)
    cells = grid_lib.cells(config)
    at_init = [c for c in cells if c.params.get("analysis.at_init")]
    assert sorted(c.arm for c in at_init) == sorted({c.arm for c in cells})  # one per method
    assert all(c.overrides["train.num_steps"] == 0 for c in at_init)
    assert config.analysis.batch_size == config.data.batch_size and config.analysis.num_batches == 1
    assert config.analysis.dtype == "float64" and config.mode == "claim" and config.claim.name == "edge"
  cpu = edge_config.get_config("cpu")
  assert "skipinit" not in grid_lib.format_grid(grid_lib.sweep_products(cpu))  # SkipInit counted once, as ReZero


def _one_method():
  """Study 11 at tiny on one method (Pre-LN): its at-init analysis (λ_max(H) and Adam's) and two lrs, 3 runs."""
  config = edge_config.get_config("tiny")
  config.sweep.grid = (
      "Pre-LN: model.norm_position=pre;init.scheme=xavier;optim.warmup_steps=0;optim.learning_rate=0.001,0.1 | "
      "Pre-LN: model.norm_position=pre;init.scheme=xavier;train.num_steps=0;analysis.at_init=true"
  )
  config.analysis.update_sharpness = False
  config.analysis.edge_predictors = False
  return config


@pytest.mark.slow
def test_edge_at_tiny_end_to_end_extends_its_grid_and_decides(tmp_path):
  """One method, its at-init analysis and its training cells, run as two shards one after the other (a job
  array): the first runs its share and leaves the claim undecided; the second gathers, adds the lr above the grid
  until the early boundary is bracketed, trains every added run itself and decides (inconclusive: one method); a
  rerun trains nothing."""
  config = _one_method()
  config.sweep.shard = "1/2"  # of the plan's 3 runs, the second; shard 0/2 then gathers and the round adds run 3,
  first = claims_run.run_claim(config, str(tmp_path), emit=print)  # which is shard 1/2's by the plan's order
  assert "verdict" not in first and sum(first["runs"].values()) == 1, first  # not decided
  assert not (tmp_path / "claim.json").exists()
  config.sweep.shard = "0/2"
  lines = []
  result = claims_run.run_claim(config, str(tmp_path), emit=lines.append)
  added = "adds {'Pre-LN': {'optim.learning_rate': [0.2]}}"
  assert any(f"round 1 of at most {edge_rules.MAX_ROUNDS} {added}" in x for x in lines), lines
  assert (tmp_path / "claim.json").exists()
  assert result["number"] == 11 and result["verdict"] == study.INCONCLUSIVE
  assert set(result["measured"]["lam0"]["Pre-LN"]) == {"gd", "adam"}
  assert result["measured"]["grid"]["Pre-LN"]["bracketed"]
  assert result["tables"] == edge_report.tables(result["measured"])  # claim.json holds the report's tables (run.py)
  assert sorted({r["lr"] for r in result["measured"]["runs"]}) == [0.001, 0.1, 0.2]
  assert (tmp_path / "edge.png").exists()
  again = []
  claims_run.run_claim(config, str(tmp_path), emit=again.append)
  assert not any(x.startswith("cell ") and not x.endswith("skipped") for x in again), again


@pytest.mark.slow
def test_parallel_claim_runs_every_round_in_k_processes_and_decides_once(tmp_path, monkeypatch):
  """`sweep.parallel=2` (experiments/run.py `run_claim_parallel`), as two tasks of a job array: each round's
  runs go to 2 processes with `claim.decide=false` and the round's grid, the first round as the invocation's shard,
  the extension round as every run (the other task has ended); only the parent decides, once. The processes are
  `run_claim` here, in this process (main.py's subprocesses: tests/test_shard.py)."""
  config = _one_method()
  calls = []

  def processes(argv, k, shard):  # shard_lib.run_parallel's children, one after the other
    grids = [a.split("=", 1)[1] for a in argv if a.startswith("--config.sweep.grid=")]
    assert len(grids) == 1 and argv[-1] == "--config.claim.decide=false" and "--config.claim.decide=true" not in argv
    calls.append((grids[0], k, shard))
    for spec in shard_lib.child_shards(shard, k):
      child = copy.deepcopy(config)
      child.sweep.grid, child.sweep.shard, child.claim.decide = grids[0], spec, False
      assert "verdict" not in claims_run.run_claim(child, str(tmp_path), emit=print)
    return 0

  monkeypatch.setattr(shard_lib, "run_parallel", processes)
  argv = ["--config=configs/claims/edge.py:tiny", "--config.sweep.grid=ignored", "--config.claim.decide=true"]
  lines = []
  assert claims_run.run_claim_parallel(config, str(tmp_path), argv, 2, (1, 2), emit=lines.append) == 0
  assert calls == [(config.sweep.grid, 2, (1, 2))] and not (tmp_path / "claim.json").exists()  # task 0 still runs
  assert claims_run.run_claim_parallel(config, str(tmp_path), argv, 2, (0, 2), emit=lines.append) == 0
  assert [(k, shard) for _, k, shard in calls] == [(2, (1, 2)), (2, (0, 2)), (2, (0, 1))]
  assert "optim.learning_rate=0.2" in calls[2][0] and "0.2" not in calls[1][0]  # round 1 adds the lr above
  decided = [x for x in lines if x.startswith("Claim 11 (edge, scale tiny)")]
  assert len(decided) == 1 and json.loads((tmp_path / "claim.json").read_text())["verdict"] == study.INCONCLUSIVE
  result = json.loads((tmp_path / "claim.json").read_text())
  assert sorted({r["lr"] for r in result["measured"]["runs"]}) == [0.001, 0.1, 0.2]


@pytest.mark.slow
def test_skipinit_at_alpha_0_is_rezero_bit_for_bit(tmp_path):
  """Why the atlas counts SkipInit once (configs/atlas.py, and so study 11): its arm (x + αF, α = 0 learned, no norm, Xavier weights)
  and ReZero's train to the same losses, bit for bit."""
  from tests import tiny

  no_norm = "model.norm_type=none;model.norm_position=none"
  grid = (
      f"{no_norm};model.residual=rezero;init.scheme=rezero|{no_norm};model.residual=skipinit;model.skipinit_alpha=0.0;"
      "init.scheme=xavier"
  )
  records = sweep_lib.run_sweep(
      tiny.sweep_config(**{"sweep.grid": grid, "sweep.seeds": 1, "optim.learning_rate": 1e-2}),
      str(tmp_path),
      emit=print,
  )
  losses = [
      [r["loss"] for r in metrics_lib.read_metrics(str(tmp_path / rec["workdir"]), split="train")] for rec in records
  ]
  assert len(losses) == 2 and len(losses[0]) == 4 and losses[0] == losses[1], losses
  assert losses[0][0] != losses[0][-1]  # it trained: α moved off 0
