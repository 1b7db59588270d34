"""A sweep spread over a job array (experiments/shard.py): the claims that keep two processes from training one run
(fresh, stale, taken over, released), two shards started at once on one workdir through main.py, a killed shard's run
resumed by its resubmission, and the tokenizer built once by `sweep.stage=prepare`. The shard each scheduler's
variables give, and a local run's children: tests/test_shard_assignment.py."""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import pytest

from experiments import shard as shard_lib
from experiments import sweep as sweep_lib
from tests import tiny
from tests.conftest import multi30k_copy  # noqa: F401 (a fixture)
from train import metrics as metrics_lib

REPO = pathlib.Path(__file__).resolve().parents[1]
GRID = "optim.learning_rate=0.001,0.002;model.norm_position=post,pre"  # 4 cells × 2 seeds
# The end-to-end tests train every run of their sweep: 2 cells × 2 seeds (one architecture) gives each of 2 shards
# 2 runs, a skipped or taken-over run others beside it, and costs half of GRID's 8 runs; GRID stays where a test
# indexes beyond 4 runs or trains none.
SMALL_GRID = "optim.learning_rate=0.001,0.002"
THREE_CELLS = "optim.learning_rate=0.001,0.002,0.003"  # one run per cell for each of 3 torn files


def test_sweep_keys_are_checked_before_any_compute(tmp_path):
  for key, value, match in (
      ("sweep.shard", "3/3", "config.sweep.shard='3/3' is invalid"),
      ("sweep.stage", "collect", r"config.sweep.stage='collect' is invalid; valid: \['run', 'prepare', 'gather'\]"),
      ("sweep.claim_timeout_s", 0.0, "config.sweep.claim_timeout_s=0.0 is invalid"),
  ):
    with pytest.raises(ValueError, match=match):
      sweep_lib.run_sweep(tiny.sweep_config(**{key: value}), str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


# ---------------------------------------------------------------------------------------------------- claims


def test_a_fresh_claim_holds_a_stale_one_is_taken_over_and_release_frees_it(tmp_path):
  run = str(tmp_path / "run")
  assert shard_lib.claim(run, "a", timeout_s=60) is None
  assert shard_lib.claim(run, "b", timeout_s=60) == "a"  # fresh: b skips the run
  later = time.time() + 61
  assert shard_lib.claim(run, "b", timeout_s=60, clock=lambda: later) is None  # a's heartbeat is 61 s old: stale
  held = json.loads((tmp_path / "run" / shard_lib.CLAIM_FILE).read_text())
  assert held["owner"] == "b" and held["pid"] == os.getpid()
  shard_lib.release(run, "a")  # not a's any more: left alone
  assert shard_lib.claim(run, "c", timeout_s=60) == "b"
  shard_lib.release(run, "b")
  assert sorted(os.listdir(run)) == []  # the claim and the stale one set aside are gone
  assert shard_lib.claim(run, "c", timeout_s=60) is None


def test_the_heartbeat_keeps_a_claim_fresh_and_stops_once_taken_over(tmp_path):
  run = str(tmp_path / "run")
  path = tmp_path / "run" / shard_lib.CLAIM_FILE
  assert shard_lib.claim(run, "a", timeout_s=0.4) is None
  with shard_lib.Heartbeat(run, "a", every_s=0.1):
    time.sleep(0.6)  # past the timeout: without the heartbeat the claim would be stale
    assert shard_lib.claim(run, "b", timeout_s=0.4) == "a"
    first = json.loads(path.read_text())["heartbeat"]
    assert time.time() - first < 0.4
    path.write_text(json.dumps({"owner": "b", "heartbeat": time.time()}))  # taken over meanwhile
    time.sleep(0.3)
    assert json.loads(path.read_text())["owner"] == "b"  # a's beat does not overwrite b's claim


# ------------------------------------------------------------------------------------ sweeps over shards, end to end


def _cli(workdir) -> list[str]:
  """main.py's sweep over the tiny 2-cell × 2-seed grid."""
  overrides = {**tiny.SWEEP, "sweep.grid": SMALL_GRID, "sweep.seeds": 2}
  return [
      sys.executable,
      "main.py",
      "--config=configs/sweeps/warmup.py",
      f"--workdir={workdir}",
      *[f"--config.{k}={v}" for k, v in overrides.items()],
  ]


def _comparable(record: dict) -> dict:
  """A record without what differs between two invocations that trained the same run: its wall time, the times and
  pid in its status, and the time and XLA_FLAGS in its provenance."""
  out = {k: v for k, v in record.items() if k != "wall_time_s"}
  out["status"] = {k: v for k, v in (record["status"] or {}).items() if k not in ("time", "pid")}
  # XLA_FLAGS: sweep.parallel's children get their own host-platform device count (shard.child_env), named per run
  out["provenance"] = {k: v for k, v in (record["provenance"] or {}).items() if k not in ("time", "xla_flags")}
  return out


@pytest.mark.slow
def test_two_shards_at_once_train_every_run_once_and_gather_the_unsharded_records(tmp_path):
  """SLURM tasks 0 and 1 of an array of 2, started together on one workdir: each trains its 2 runs, none twice
  (every run's metrics.jsonl has one row per step), the last to finish gathers, and results.jsonl equals an
  unsharded sweep's records but for wall times."""
  workdir = tmp_path / "sharded"
  procs = [
      subprocess.Popen(
          _cli(workdir),
          cwd=REPO,
          env={**os.environ, "SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_COUNT": "2"},
          stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT,
          text=True,
      )
      for i in range(2)
  ]
  logs = [p.communicate(timeout=600)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], "\n".join(log[-3000:] for log in logs)
  assert all("shard" in log and "runs 2 of them" in log for log in logs), logs[0][-2000:]
  assert sum("Gathered 4 of 4 run(s)" in log for log in logs) >= 1
  sharded = [json.loads(line) for line in (workdir / sweep_lib.RESULTS_FILE).read_text().splitlines()]
  for record in sharded:
    steps = [r["step"] for r in metrics_lib.read_metrics(str(workdir / record["workdir"]), split="train")]
    assert steps == [1, 2, 3, 4], (record["cell"], record["seed"], steps)  # trained once
    assert not (workdir / record["workdir"] / shard_lib.CLAIM_FILE).exists()  # released
  assert (workdir / "results.md").exists() and (workdir / "curves.png").exists()
  unsharded = sweep_lib.run_sweep(
      tiny.sweep_config(**{"sweep.grid": SMALL_GRID}), str(tmp_path / "one"), emit=print, env={}
  )
  assert [_comparable(r) for r in sharded] == [_comparable(r) for r in unsharded]


@pytest.mark.slow
def test_a_killed_shards_run_is_resumed_by_its_resubmission(tmp_path, monkeypatch):
  """Shard 0/2 is stopped in its first run (its claim stays, with a heartbeat and this process's pid, which is alive);
  resubmitted at once it skips the run (a fresh claim of a live process may be a live shard), trains its others and
  raises SweepIncomplete naming the run; once the claim is stale it takes the run over and resumes it from its
  checkpoint."""
  config = tiny.sweep_config(
      **{"sweep.grid": SMALL_GRID, "sweep.shard": "0/2", "sweep.claim_timeout_s": 3.0, "train.checkpoint_every": 2}
  )
  workdir = str(tmp_path / "w")
  original = metrics_lib.write_status

  def die_after_step_2(run_workdir, status, step, **fields):
    if status == "running" and step == 3:
      raise SystemExit("killed")  # the process ends here: nothing in the sweep runs after it
    return original(run_workdir, status, step, **fields)

  monkeypatch.setattr(metrics_lib, "write_status", die_after_step_2)
  monkeypatch.setattr(shard_lib, "release", lambda *a: None)  # a killed process releases nothing
  with pytest.raises(SystemExit):
    sweep_lib.run_sweep(config, workdir, emit=print, env={})
  monkeypatch.undo()
  first = sweep_lib.grid_lib.cells(config)[0]
  rdir = sweep_lib.run_dir(workdir, first, 0)
  assert metrics_lib.read_status(rdir)["status"] == "running"
  lines = []
  with pytest.raises(sweep_lib.SweepIncomplete, match=f"{first.name}/seed_0"):  # its own run undone: not a success
    sweep_lib.run_sweep(config, workdir, emit=lines.append, env={})
  assert any("claimed by" in line for line in lines)  # the fresh claim held (this process's pid: it is alive)
  time.sleep(3.1)  # the killed shard's heartbeat is now older than sweep.claim_timeout_s
  resumed = sweep_lib.run_sweep(config, workdir, emit=print, env={})
  assert len(resumed) == 2 and resumed[0]["resumed_from_step"] == 2 and resumed[0]["outcome"] == "finished"
  steps = [r["step"] for r in metrics_lib.read_metrics(rdir, split="train")]
  assert steps == [1, 2, 3, 4]


def _dead_pid() -> int:
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_a_claim_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  path = run / shard_lib.CLAIM_FILE
  host = socket.gethostname()
  for pid, other_host, taken in (
      (_dead_pid(), host, True),
      (os.getppid(), host, False),
      (_dead_pid(), "elsewhere", False),
  ):
    path.write_text(json.dumps({"owner": "x", "host": other_host, "pid": pid, "heartbeat": time.time()}))
    assert shard_lib.dead_here(json.loads(path.read_text())) is taken
    holder = shard_lib.claim(str(run), "me", timeout_s=600)
    assert (holder is None) is taken, holder  # a dead pid here: at once; a live one or another host's: the timeout
    shard_lib.release(str(run), "me")


@pytest.mark.slow
def test_a_killed_shard_rerun_at_once_takes_its_run_over_and_completes(tmp_path):
  """kill -9 leaves a claim with a fresh heartbeat and a pid that no longer exists on this host: the rerun takes the
  run over at once (no claim_timeout_s wait), trains every run of the sweep and returns them all."""
  config = tiny.sweep_config(**{"sweep.grid": SMALL_GRID, "sweep.claim_timeout_s": 600.0})
  workdir = str(tmp_path / "w")
  first = sweep_lib.grid_lib.cells(config)[0]
  rdir = sweep_lib.run_dir(workdir, first, 0)
  os.makedirs(rdir)
  held = {"owner": f"{socket.gethostname()}:1:dead", "host": socket.gethostname(), "pid": _dead_pid()}
  (pathlib.Path(rdir) / shard_lib.CLAIM_FILE).write_text(json.dumps({**held, "heartbeat": time.time()}))
  records = sweep_lib.run_sweep(config, workdir, emit=print, env={})
  assert len(records) == len(sweep_lib.grid_lib.cells(config)) * config.sweep.seeds
  assert all(r["outcome"] == "finished" for r in records)


def test_prepare_builds_the_tokenizer_once_for_every_shard(tmp_path, multi30k_copy):  # noqa: F811
  """`sweep.stage=prepare` checks every cell and trains the shared SentencePiece model; a shard's run then finds it
  (the file is not written again)."""
  import train.data  # noqa: PLC0415

  config = tiny.sweep_config(
      **{
          "sweep.grid": GRID,
          "sweep.stage": "prepare",
          "data.name": "multi30k",
          "data.dir": str(multi30k_copy),
          "data.vocab_size": 200,
          "data.spm_max_corpus_chars": 200_000,
      }
  )
  workdir = tmp_path / "w"
  assert sweep_lib.run_sweep(config, str(workdir), emit=print, env={}) == []
  (model,) = (workdir / "tokenizer").glob("spm_*.model")
  before = model.stat()
  assert not (workdir / "cells").exists()  # nothing trained
  cell, seed, resolved = sweep_lib.plan(config, str(workdir))[5]  # another cell's run, as a shard builds it
  train.data.build(resolved.data, workdir=sweep_lib.run_dir(str(workdir), cell, seed))
  after = model.stat()
  assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
  assert sorted(p.name for p in (workdir / "tokenizer").iterdir()) == [model.name]


def test_a_claim_is_decided_only_by_the_shard_that_gathered_every_run(tmp_path, monkeypatch):
  """A shard whose sweep other shards still run (fewer records than cells × seeds) writes no claim.json; with every
  record the claim is decided as always."""
  import configs.claims.tfixup as tfixup  # noqa: PLC0415
  from experiments import run as claim_run  # noqa: PLC0415

  config = tfixup.get_config("tiny")
  expected = len(sweep_lib.grid_lib.cells(config)) * config.sweep.seeds
  record = {"outcome": "finished"}
  decided = []
  monkeypatch.setattr(
      claim_run,
      "decide",
      lambda c, w, records, s: decided.append(len(records))
      or {"number": 8, "claim": "tfixup", "verdict": "v", "reason": "r", "runs": {}},
  )
  monkeypatch.setattr(sweep_lib, "run_sweep", lambda c, w, emit: [record] * (expected - 1))
  assert claim_run.run_claim(config, str(tmp_path)) == {"runs": {"finished": expected - 1, "diverged": 0, "crashed": 0}}
  assert decided == []
  monkeypatch.setattr(sweep_lib, "run_sweep", lambda c, w, emit: [record] * expected)
  claim_run.run_claim(config, str(tmp_path))
  assert decided == [expected]


# --------------------------------------------------------------------------------------- runs at once on one machine


@pytest.mark.slow
def test_parallel_claim_its_processes_train_and_main_py_decides_once(tmp_path):
  """A claim with `sweep.parallel=2` through main.py: two processes train a run each (`claim.decide=false`), and
  main.py, which touched no device, gathers and decides once (the rounds of an adaptive grid:
  tests/test_claim_edge.py)."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
  cmd = ["--config=configs/claims/identity_path.py:tiny", f"--workdir={tmp_path}", "--config.sweep.parallel=2"]
  proc = subprocess.run(
      [sys.executable, "main.py", *cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  for spec in ("0/2", "1/2"):
    assert f"2 run(s); shard {spec} (sweep.shard) runs 1 of them; 0 already done, 1 to run" in proc.stderr
  assert len(re.findall(r"Claim \d+ \(identity_path, scale tiny\): ", proc.stderr)) == 1, proc.stderr[-3000:]
  claim = json.loads((tmp_path / "claim.json").read_text())
  assert claim["runs"] == {"finished": 2}
  assert claim["provenance"]["device_count"] == 2  # main.py's view of the host (a process's is 1 device)


@pytest.mark.slow
def test_parallel_two_runs_at_once_each_on_its_own_device_equal_sequential(tmp_path):
  """`sweep.parallel=2` with 2 host devices: main.py starts two processes of itself, one run each, each with one
  device; the runs overlap in time and their records equal the same sweep run in one process."""
  grid = "optim.learning_rate=0.001,0.002"
  workdir = tmp_path / "parallel"
  cmd = [a for a in _cli(workdir) if not a.startswith(("--config.sweep.grid=", "--config.sweep.seeds="))]
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
  proc = subprocess.run(
      [*cmd, f"--config.sweep.grid={grid}", "--config.sweep.seeds=1", "--config.sweep.parallel=2"],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Gathered 2 of 2 run(s)" in proc.stderr
  records = [json.loads(line) for line in (workdir / sweep_lib.RESULTS_FILE).read_text().splitlines()]
  assert [r["provenance"]["device_count"] for r in records] == [1, 1]  # each child on its own device
  spans = []
  for r in records:
    run = workdir / r["workdir"]
    spans.append(((run / "config.json").stat().st_mtime, json.loads((run / "status.json").read_text())["time"]))
  assert max(s for s, _ in spans) < min(e for _, e in spans)  # both were training at once
  one = sweep_lib.run_sweep(
      tiny.sweep_config(**{"sweep.grid": grid, "sweep.seeds": 1}), str(tmp_path / "one"), emit=print, env={}
  )
  assert [_comparable(r) for r in records] == [_comparable(r) for r in one]


# ------------------------------------------------------------------------------------------------------ torn files


@pytest.mark.slow
def test_a_torn_status_record_or_config_is_named_and_the_sweep_completes(tmp_path, caplog):
  """A finished sweep whose run files were cut short (a crash while a file was rewritten in place on a full disk):
  status.json, sweep_record.json or config.json that does not parse is named in one warning; the run is read as not
  finished and resumed (status, config) or its record rebuilt (sweep_record), and every run ends finished."""
  config = tiny.sweep_config(**{"sweep.grid": THREE_CELLS, "sweep.seeds": 1})
  workdir = str(tmp_path / "w")
  first = sweep_lib.run_sweep(config, workdir, emit=print, env={})
  cells = sweep_lib.grid_lib.cells(config)
  torn = {name: sweep_lib.run_dir(workdir, cells[i], 0) for i, name in enumerate(("status.json", "sweep_record.json", "config.json"))}  # fmt: skip
  for name, rdir in torn.items():
    path = pathlib.Path(rdir) / name
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
  with caplog.at_level("WARNING"):
    again = sweep_lib.run_sweep(config, workdir, emit=print, env={})
  assert [r["outcome"] for r in again] == ["finished"] * len(first)
  assert [r["final"] for r in again] == [r["final"] for r in first]  # resumed bit for bit, or its record rebuilt
  for name, rdir in torn.items():
    assert any(str(pathlib.Path(rdir) / name) in m and "does not parse" in m for m in caplog.messages), name
  assert metrics_lib.read_status(torn["status.json"])["status"] == "finished"


@pytest.mark.slow
def test_main_exits_6_naming_its_own_run_that_a_live_process_holds(tmp_path):
  """A run of this shard claimed by a live process (here: this test's, on this host) is skipped; the sweep trains
  the others and main.py exits EXIT_INCOMPLETE (6) naming the run, so a requeued array task does not "succeed"."""
  workdir = tmp_path / "w"
  config = tiny.sweep_config(**{"sweep.grid": SMALL_GRID, "sweep.seeds": 2})
  first = sweep_lib.grid_lib.cells(config)[0]
  rdir = pathlib.Path(sweep_lib.run_dir(str(workdir), first, 1))
  rdir.mkdir(parents=True)
  live = {"owner": "a-live-shard", "host": socket.gethostname(), "pid": os.getpid(), "heartbeat": time.time() + 3600}
  (rdir / shard_lib.CLAIM_FILE).write_text(json.dumps(live))
  out = subprocess.run(_cli(workdir), cwd=REPO, capture_output=True, text=True, timeout=600)
  assert out.returncode == 6, out.stderr[-3000:]
  assert f"{first.name}/seed_1 (by a-live-shard)" in out.stderr
