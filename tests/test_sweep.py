"""The sweep (experiments/sweep.py): a 2 × 2 grid × 2 seeds end to end at the tiny size — records with provenance,
the table, the figures, progress with an ETA, a diverged cell recorded while the others finish, a rerun through main.py
that trains nothing, and unfinished runs resumed (one crashing, recorded). Grid parsing and its errors:
tests/test_grid.py."""

import json
import math
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

import train.loop
from experiments import study as study_lib
from experiments import sweep as sweep_lib
from tests import tiny
from train import metrics as metrics_lib

REPO = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------------------------- end to end


def _git_head():
  return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
def test_sweep_end_to_end_resumable_with_outcomes(tmp_path, monkeypatch):
  workdir = tmp_path / "sweep"
  real_train = train.loop.train_and_evaluate
  now, calls, lines = [0.0], [], []

  def timed_train(exp, hooks=()):  # every run takes one fake minute on the sweep's clock
    calls.append(exp.workdir)
    now[0] += 60.0
    return real_train(exp, hooks)

  monkeypatch.setattr(train.loop, "train_and_evaluate", timed_train)
  records = sweep_lib.run_sweep(tiny.sweep_config(), str(workdir), clock=lambda: now[0], emit=lines.append)

  # 2 × 2 cells × 2 seeds = 8 records, in grid order; the 1e30 cells diverged and the others still finished
  # both seeds.
  assert len(calls) == 8
  expected = [
      (f"optim.learning_rate={lr}__model.norm_position={norm}", seed, outcome)
      for lr, outcome in (("0.001", "finished"), ("1e+30", "diverged"))
      for norm in ("post", "pre")
      for seed in (0, 1)
  ]
  assert [(r["cell"], r["seed"], r["outcome"]) for r in records] == expected
  progress = [l for l in lines if l.startswith("cell ")]
  assert [l.split(" | ")[:3] for l in progress] == [
      [
          f"cell {i // 2 + 1}/4, seed {i % 2}: {expected[i][0]}",
          f"elapsed 0:{i:02d}:00",
          "ETA ?" if i == 0 else f"ETA 0:{8 - i:02d}:00",  # measured: one minute per run
      ]
      for i in range(8)
  ]
  on_disk = [json.loads(l) for l in (workdir / "results.jsonl").read_text().splitlines()]
  assert len(on_disk) == 8 and [r["seed"] for r in on_disk] == [0, 1] * 4
  head = _git_head()
  for r in on_disk:
    run = workdir / r["workdir"]
    config = json.loads((run / "config.json").read_text())
    assert config["train"]["seed"] == r["seed"]
    assert config["optim"]["learning_rate"] == r["params"]["optim.learning_rate"]
    assert config["model"]["norm_position"] == r["params"]["model.norm_position"]
    p = r["provenance"]
    assert p["git_commit"] == head and len(head) == 40 and isinstance(p["git_dirty"], bool)
    assert p["packages"]["jax"] == jax.__version__ and p["packages"]["orbax-checkpoint"] and p["packages"]["grain"]
    assert p["backend"] == "cpu" and p["device_count"] == jax.device_count() and p["hostname"]
    assert r["wall_time_s"] == 60.0 and r["resumed_from_step"] == 0
  finished, diverged = on_disk[:4], on_disk[4:]
  for r in finished:
    last_eval = metrics_lib.read_metrics(str(workdir / r["workdir"]), split="eval")[-1]
    assert last_eval["step"] == 4 and r["final"]["eval/loss"] == last_eval["loss"] and r["error"] is None
  assert finished[0]["final"]["eval/loss"] != finished[1]["final"]["eval/loss"]  # the seeds differ
  for r in diverged:
    assert r["status"]["status"] == "diverged" and r["status"]["step"] == 2 and "non-finite loss" in r["error"]
    assert "eval/loss" not in r["final"] and math.isnan(r["final"]["train/loss"])

  losses = [r["final"]["eval/loss"] for r in finished[:2]]
  table = (workdir / "results.md").read_text()
  assert f"| 0.001 | post | {np.mean(losses):.4f} ± {np.std(losses, ddof=1):.4f} | 2 | 2 finished |" in table
  assert "| 1e+30 | pre | — | 0 | 2 diverged |" in table
  assert "warmup 0" in table and "lr " not in table  # the fixed settings name warmup, not the swept lr
  for name in ("curves.png", "final_metric.png"):
    data = (workdir / name).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
  assert len(list((workdir / "tensorboard_hparams").glob("*/seed_*"))) == 8

  # Rerun through main.py: all eight runs are done, none trains, the records are kept as they were.
  args = [f"--config.{k}={v}" for k, v in tiny.SWEEP.items()]
  out = subprocess.run(
      [sys.executable, "main.py", "--config=configs/sweeps/warmup.py", f"--workdir={workdir}", *args],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "8 run(s); 8 already done, 0 to run" in out.stderr
  assert len(re.findall(r"\| already (finished|diverged), skipped", out.stderr)) == 8
  assert "elapsed" not in out.stderr.split("Sweep done")[0]
  assert [json.loads(l) for l in (workdir / "results.jsonl").read_text().splitlines()] == on_disk

  # The same workdir with another base config: refused before anything runs, naming the key.
  with pytest.raises(
      ValueError, match=r"seed_0/config.json was trained with another config \(train.num_steps: 4 -> 8\)"
  ):
    sweep_lib.run_sweep(tiny.sweep_config(**{"train.num_steps": 8}), str(workdir), emit=lines.append)

  # Two runs killed before their status said so: both resume from checkpoint 4; one crashes (recorded, with its
  # type and message) and the sweep still resumes the other.
  for seed in (0, 1):
    run = str(workdir / finished[seed]["workdir"])
    metrics_lib.write_status(run, "running", 4)
  calls.clear()

  def crash_seed_0(exp, hooks=()):
    calls.append(exp.workdir)
    if exp.workdir.endswith("seed_0"):
      raise RuntimeError("boom")
    return real_train(exp, hooks)

  monkeypatch.setattr(train.loop, "train_and_evaluate", crash_seed_0)
  again = sweep_lib.run_sweep(tiny.sweep_config(), str(workdir), emit=lines.append)
  assert len(calls) == 2
  assert [(r["outcome"], r["error"], r["resumed_from_step"]) for r in again[:2]] == [
      ("crashed", "RuntimeError: boom", 4),
      ("finished", None, 4),
  ]
  assert again[1]["final"]["eval/loss"] == finished[1]["final"]["eval/loss"]  # nothing retrained or re-evaluated
  assert again[2:] == on_disk[2:]
  assert f"| 0.001 | post | {losses[1]:.4f} | 1 | 1 finished, 1 crashed |" in (workdir / "results.md").read_text()


@pytest.mark.parametrize(
    "setting, params, given, expected",
    [("auto", 1000, None, False), ("auto", 5_000_000, None, True), ("on", 1000, None, True), ("auto", 5_000_000, False, False)],
)  # fmt: skip
def test_analyze_prints_progress_as_analysis_progress_says(setting, params, given, expected, monkeypatch):
  """main.py's `analyze(exp, workdir)` resolves `analysis.progress` by the model's parameter count ('auto': lines from
  5M parameters on, so a tiny analysis's programs stay cacheable); a sweep's explicit `progress=False` wins."""
  import types  # noqa: PLC0415

  import analysis.run as analysis_run  # noqa: PLC0415

  seen = []
  monkeypatch.setattr(analysis_run, "run_analysis", lambda *a, **k: seen.append(k["progress"]))
  config = tiny.sweep_config(**{"analysis.progress": setting})
  leaves = {"w": np.zeros((params,), np.float32)}
  state = types.SimpleNamespace(step=0, params=leaves, model_variables=lambda: {"params": leaves})
  exp = types.SimpleNamespace(
      config=config, state=state, model=None, batches=lambda n, size: [], init_variables=None, mesh=None
  )
  sweep_lib.analyze(exp, "/unused", **({} if given is None else {"progress": given}))
  assert seen == [expected]


@pytest.mark.slow
def test_analysis_at_init_writes_step_0_of_each_run(tmp_path, monkeypatch):
  """`sweep.analysis_at_init`: analysis.run at step 0 into the run's analysis/step_0/ (as main.py's at_init), its
  Lanczos programs built without a progress callback (a host callback keeps the persistent cache from storing them,
  so every seed would compile them again)."""
  import curvax  # noqa: PLC0415

  callbacks, top_eigenvalues = [], curvax.top_eigenvalues  # every top-eigenvalue program the analyses build
  monkeypatch.setattr(
      curvax, "top_eigenvalues", lambda *a, **k: callbacks.append(k.get("callback")) or top_eigenvalues(*a, **k)
  )
  analysis = {
      **tiny.ANALYSIS,
      "analysis.lanczos_steps": 6,
      "analysis.preconditioned_top_k": 1,
      "analysis.update_sharpness": True,
  }
  config = tiny.sweep_config(
      **{"sweep.grid": "", "sweep.seeds": 1, "sweep.analysis_at_init": True, "train.num_steps": 1}, **analysis
  )
  (record,) = sweep_lib.run_sweep(config, str(tmp_path))
  step_0 = tmp_path / record["workdir"] / "analysis" / "step_0"
  meta = json.loads((step_0 / "metadata.json").read_text())
  assert record["outcome"] == "finished" and meta["step"] == 0 and meta["at_init"] is True
  (top,) = json.loads((step_0 / "eigenvalues.json").read_text())["top"]["values"]
  assert math.isfinite(top) and top > 0.0 and (step_0 / "signal.json").exists()
  # The stability predictors get the run's optim.b1 / optim.eps and reuse the top eigenvalue of H.
  stab = json.loads((step_0 / "stability.json").read_text())
  assert (stab["beta1"], stab["eps"]) == (config.optim.b1, config.optim.eps) and stab["lambda_max"] == top
  assert stab["max_stable_lr_adam"] == pytest.approx(38.0 / stab["preconditioned_lambda_max"], rel=1e-6)
  assert callbacks and all(c is None for c in callbacks), callbacks


@pytest.mark.slow
def test_analysis_steps_analyze_kept_checkpoints_also_of_finished_runs(tmp_path):
  """`sweep.analysis_steps`: each checkpoint restored and analyzed into analysis/step_<k>/ after training; steps added
  on a rerun are analyzed for runs an earlier invocation finished, without training them again."""
  analysis = {"analysis.batch_size": 4, "analysis.top_k": 0, "analysis.spectrum": False, "analysis.trace_probes": 0}
  analysis.update({"analysis.blocks": False, "analysis.grad_norms": False, "analysis.param_stats": True})
  base = {"sweep.grid": "", "sweep.seeds": 1, "train.num_steps": 4, "train.checkpoint_every": 2, **analysis}
  (record,) = sweep_lib.run_sweep(tiny.sweep_config(**base, **{"sweep.analysis_steps": (4,)}), str(tmp_path))
  run = tmp_path / record["workdir"]
  assert record["outcome"] == "finished" and sorted(p.name for p in (run / "analysis").iterdir()) == ["step_4"]
  meta = json.loads((run / "analysis" / "step_4" / "metadata.json").read_text())
  assert meta["step"] == 4 and meta["at_init"] is False
  # The restored step-4 parameters are the trained ones: their stats differ from step 2's, analyzed on the rerun.
  trained = metrics_lib.read_metrics(str(run))
  sweep_lib.run_sweep(tiny.sweep_config(**base, **{"sweep.analysis_steps": (2, 4)}), str(tmp_path))
  assert sorted(p.name for p in (run / "analysis").iterdir()) == ["step_2", "step_4"]
  assert metrics_lib.read_metrics(str(run)) == trained  # nothing retrained
  stats = {k: json.loads((run / "analysis" / f"step_{k}" / "params.json").read_text()) for k in (2, 4)}
  assert [p["path"] for p in stats[2]] == [p["path"] for p in stats[4]]
  assert any(a["std"] != b["std"] for a, b in zip(stats[2], stats[4]))


@pytest.mark.slow
def test_a_sweep_reading_another_sweeps_runs_shares_them_and_keeps_its_own_records(tmp_path):
  """`sweep.cells_dir`: a study over a subset of another sweep's cells (a claim on the atlas's runs) trains nothing
  already there, trains what is missing there, and writes its results.jsonl (paths that resolve) in its own folder."""
  quiet = lambda _: None
  first = str(tmp_path / "atlas")
  sweep_lib.run_sweep(
      tiny.sweep_config(**{"sweep.grid": "optim.warmup_steps=0,1", "sweep.seeds": 1}), first, emit=quiet
  )
  with open(os.path.join(first, "results.jsonl"), encoding="utf-8") as f:
    before = f.read()
  lines, mine = [], str(tmp_path / "claim")
  config = tiny.sweep_config(**{"sweep.grid": "W: optim.warmup_steps=1,2", "sweep.seeds": 1, "sweep.cells_dir": first})
  sweep_lib.run_sweep(config, mine, emit=lines.append)
  assert [line.endswith("skipped") for line in lines if line.startswith("cell ")] == [True, False]  # 2 is new
  assert os.path.isdir(os.path.join(first, "cells", "optim.warmup_steps=2", "seed_0"))  # trained where the runs live
  assert not os.path.exists(os.path.join(mine, "cells"))
  with open(os.path.join(first, "results.jsonl"), encoding="utf-8") as f:
    assert f.read() == before  # the other sweep's records untouched
  results = study_lib.Results.load(mine)
  assert [(r.arm, r.params["optim.warmup_steps"]) for r in results.runs] == [("W", 1), ("W", 2)]
  assert [r.record["workdir"] for r in results.runs] == [
      os.path.join("..", "atlas", "cells", f"optim.warmup_steps={w}", "seed_0") for w in (1, 2)
  ]
  assert all(r.metrics("train") for r in results.runs)  # each path resolves to the run's folder


def test_the_compilation_cache_is_the_sweeps_when_asked(tmp_path):
  """sweep.compilation_cache: '' leaves JAX's persistent cache alone; 'auto' puts it in the runs' folder (the claims
  and the atlas at cpu and paper; not at tiny, the tests); a folder is taken as given."""
  from configs.claims import tfixup  # pylint: disable=g-import-not-at-top
  from configs.claims import warmup as warmup_claim

  before = jax.config.jax_compilation_cache_dir
  try:
    assert sweep_lib.use_compilation_cache(tiny.sweep_config(), str(tmp_path)) is None
    assert jax.config.jax_compilation_cache_dir == before
    shared = tiny.sweep_config(**{"sweep.compilation_cache": "auto", "sweep.cells_dir": str(tmp_path / "atlas")})
    assert sweep_lib.use_compilation_cache(shared, str(tmp_path / "claim")) == str(tmp_path / "atlas" / "jax_cache")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "atlas" / "jax_cache")
  finally:
    jax.config.update("jax_compilation_cache_dir", before)
  for module in (warmup_claim, tfixup):
    assert module.get_config("cpu").sweep.compilation_cache == "auto"
    assert module.get_config("tiny").sweep.compilation_cache == ""


@pytest.mark.slow
def test_a_union_sweep_over_runs_of_one_cell_grids_reports_every_swept_key(tmp_path):
  """Runs made cell by cell (each by a one-product grid) are skipped by the union's sweep,
  whose records and results.md carry every swept key: the base value where a product does not set it."""
  grid = "model.norm_position=post;optim.warmup_steps=0 | model.norm_position=pre;init.scheme=bert"
  config = tiny.sweep_config(**{"sweep.grid": "Post: " + grid.replace("| ", "| Pre: "), "sweep.seeds": 1})
  for product in grid.split(" | "):
    sweep_lib.run_sweep(
        tiny.sweep_config(**{"sweep.grid": product, "sweep.seeds": 1}), str(tmp_path), emit=lambda _: None
    )
  records = sweep_lib.run_sweep(config, str(tmp_path), emit=lambda _: None)
  assert [r["params"] for r in records] == [
      {"model.norm_position": "post", "optim.warmup_steps": 0, "init.scheme": "xavier"},
      {"model.norm_position": "pre", "optim.warmup_steps": 0, "init.scheme": "bert"},
  ]
  assert [r["arm"] for r in records] == ["Post", "Pre"]  # this grid's labels, though other grids ran the runs
  table = (tmp_path / "results.md").read_text()
  assert "| post | 0 | xavier |" in table and "| pre | 0 | bert |" in table
