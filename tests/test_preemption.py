"""A run survives preemption, Ctrl-C and a damaged checkpoint: SIGTERM (or a first Ctrl-C) mid-run checkpoints the
current step, says `preempted` (`interrupted`) in status.json, exits 143 (130) from main.py, and the rerun ends bit
for bit where an uninterrupted run ends; a second Ctrl-C aborts at once; a truncated file in the latest checkpoint sends the rerun back to the previous checkpoint, with a warning.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests import tiny
from train import checkpoint as checkpoint_lib
from train import cli, loop, preemption, stops
from train import metrics as metrics_lib
from train.metrics import read_metrics, read_status

REPO = pathlib.Path(__file__).resolve().parents[1]
NUM_STEPS = 12


def config():
  return tiny.run_config(
      **{
          "train.num_steps": NUM_STEPS,
          "train.checkpoint_every": 4,
          "train.log_every": 2,
          "train.eval_every": 1000,
          "train.num_decode_examples": 0,
          "data.embedded.num_train": 600,
          "data.batch_size": 8,
          "data.eval_batch_size": 8,
          "model.arch": "decoder",  # one decoder layer: the test's time goes to compiling, and this compiles fastest
          "model.num_decoder_layers": 1,
          "model.dropout_rate": 0.1,  # the rng key must resume too
      }
  )


def assert_same_state(a, b):
  leaves_a = jax.tree.leaves((a.params, a.opt_state, a.variables))
  leaves_b = jax.tree.leaves((b.params, b.opt_state, b.variables))
  assert len(leaves_a) == len(leaves_b) > 0
  for x, y in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  assert int(a.step) == int(b.step)
  np.testing.assert_array_equal(jax.random.key_data(a.rng), jax.random.key_data(b.rng))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """An uninterrupted run: (workdir, final state)."""
  workdir = tmp_path_factory.mktemp("reference")
  return workdir, loop.train_and_evaluate(loop.setup(config(), str(workdir)))


@pytest.mark.parametrize(
    "signum, stop, status",
    [(signal.SIGTERM, stops.Preempted, "preempted"), (signal.SIGINT, stops.Interrupted, "interrupted")],
)
@pytest.mark.slow
def test_a_signal_checkpoints_the_current_step_and_the_rerun_is_bitwise(
    tmp_path, monkeypatch, reference, signum, stop, status
):
  """SIGTERM (a preemption) or a first Ctrl-C (SIGINT) arrives while step 4 is logged; the loop notices at the end
  of step 5, saves step 5 (not a multiple of checkpoint_every: forced), writes `preempted` / `interrupted`, raises
  Preempted / Interrupted and puts both signals' handlers back."""
  original = metrics_lib.write_status

  def write_status(workdir, status, step, **fields):
    if status == "running" and step == 4:
      os.kill(os.getpid(), signum)  # the process survives: the loop's handler only takes note
    return original(workdir, status, step, **fields)

  monkeypatch.setattr(metrics_lib, "write_status", write_status)
  handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
  exp = loop.setup(config(), str(tmp_path))
  with pytest.raises(stop, match=f"^{status} at step 5") as raised:
    loop.train_and_evaluate(exp)
  assert type(raised.value) is stop
  assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
  got = read_status(str(tmp_path))
  assert got["status"] == status and got["step"] == 5 and got["last_checkpoint"] == 5
  assert exp.checkpointer.all_steps() == [4, 5]
  monkeypatch.setattr(metrics_lib, "write_status", original)
  resumed_exp = loop.setup(config(), str(tmp_path))
  assert resumed_exp.start_step == 5
  resumed = loop.train_and_evaluate(resumed_exp)
  assert_same_state(resumed, reference[1])
  assert read_metrics(str(tmp_path)) == read_metrics(str(reference[0]))
  assert read_status(str(tmp_path))["status"] == "finished"


def test_a_second_ctrl_c_aborts_at_once():
  """The first SIGINT only takes note (the step finishes and is saved); the second raises KeyboardInterrupt in the
  main thread at once, with Python's handler back."""

  class NoCheckpointer:

    def reached_preemption(self, step):
      return False

  before = signal.getsignal(signal.SIGINT)
  with pytest.raises(KeyboardInterrupt):
    with preemption.PreemptionNotice(NoCheckpointer()) as notice:
      assert not notice.reached(1)
      os.kill(os.getpid(), signal.SIGINT)
      assert notice.reached(2) and notice.interrupted
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(1)  # the handler runs between bytecodes: the sleep is interrupted
      pytest.fail("a second Ctrl-C did not abort")
  assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
def test_a_second_ctrl_c_in_the_loop_leaves_interrupted_and_a_rerun_resumes(tmp_path, monkeypatch, reference):
  """Two Ctrl-Cs as step 4 is logged: the second aborts the step (KeyboardInterrupt in the loop), status.json says
  `interrupted` at the step the loop was at with its last checkpoint (none yet: step 4's is saved after this
  record), Aborted (an Interrupted: exit 130) is raised, and the rerun reaches the uninterrupted run's state."""
  original = metrics_lib.write_status

  def write_status(workdir, status, step, **fields):
    if status == "running" and step == 4:
      os.kill(os.getpid(), signal.SIGINT)
      os.kill(os.getpid(), signal.SIGINT)  # the second: abort now
      time.sleep(1)
    return original(workdir, status, step, **fields)

  monkeypatch.setattr(metrics_lib, "write_status", write_status)
  exp = loop.setup(config(), str(tmp_path))
  with pytest.raises(stops.Aborted, match=r"step 4 by a second Ctrl-C, not checkpointed; a rerun starts over"):
    loop.train_and_evaluate(exp)
  monkeypatch.setattr(metrics_lib, "write_status", original)
  got = read_status(str(tmp_path))
  assert got["status"] == "interrupted" and got["last_checkpoint"] is None and got["pid"] == os.getpid()
  resumed = loop.train_and_evaluate(loop.setup(config(), str(tmp_path)))
  assert_same_state(resumed, reference[1])


@pytest.mark.slow
def test_truncated_latest_checkpoint_resumes_from_the_previous_one(tmp_path, caplog, reference):
  """The reference run's checkpoints are 4, 8, 12; with a data file of 12 truncated the rerun warns naming it,
  resumes from 8, saves 12 again (the bad one moved aside) and ends bit for bit where the reference ended."""
  workdir = tmp_path / "run"
  shutil.copytree(reference[0], workdir)
  ckpt_dir = workdir / "checkpoints"
  data_file = max((p for p in (ckpt_dir / "12" / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  os.truncate(data_file, data_file.stat().st_size // 2)
  with caplog.at_level("WARNING"):
    exp = loop.setup(config(), str(workdir))
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert any(f"Checkpoint {ckpt_dir / '12'} does not restore" in w and "trying step 8" in w for w in warnings)
  assert exp.start_step == 8 and exp.checkpointer.all_steps() == [4, 8]
  resumed = loop.train_and_evaluate(exp)
  assert exp.checkpointer.all_steps() == [4, 8, 12]
  assert_same_state(resumed, reference[1])
  assert len(list(ckpt_dir.glob("12.unrestorable-*"))) == 1


TINY = [
    "--config=configs/xavier_postln.py",
    "--config.model.preset=tiny",
    "--config.model.arch=decoder",
    "--config.model.num_decoder_layers=1",
    "--config.model.dropout_rate=0.1",
    "--config.data.embedded.num_train=300",
    "--config.data.embedded.num_eval=16",
    "--config.data.batch_size=8",
    "--config.data.eval_batch_size=8",
    "--config.train.num_decode_examples=0",
    "--config.train.num_steps=30",
    "--config.train.log_every=1",
    "--config.train.eval_every=10",
    "--config.train.checkpoint_every=20",
]
TIMEOUT = 240  # seconds for one run of main.py; a run takes about 15 s on 2 CPU cores


def main_py(workdir):
  return subprocess.Popen(
      [sys.executable, "main.py", f"--workdir={workdir}", *TINY],
      cwd=REPO,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
  )


def final_state(workdir):
  """The arrays of the last checkpoint of `workdir`, as saved (no template: numpy arrays)."""
  step = checkpoint_lib.Checkpointer(workdir / "checkpoints").latest_step()
  return step, ocp.StandardCheckpointer().restore(workdir / "checkpoints" / str(step) / "state")


@pytest.mark.slow
def test_main_py_sigterm_exits_143_and_the_rerun_equals_an_uninterrupted_run(tmp_path):
  """A real SIGTERM to `python main.py` once metrics.jsonl shows progress: exit status 143, status.json `preempted`
  at the step of a checkpoint on disk; the rerun finishes with the metrics records and final arrays of an
  uninterrupted run (which runs beside it), bit for bit."""
  straight_dir, preempted_dir = tmp_path / "straight", tmp_path / "preempted"
  procs = []
  try:
    procs.append(straight := main_py(straight_dir))
    procs.append(preempted := main_py(preempted_dir))
    deadline = time.monotonic() + TIMEOUT
    metrics = preempted_dir / metrics_lib.METRICS_FILE
    while not (metrics.exists() and metrics.read_text().strip()):
      assert preempted.poll() is None, preempted.stderr.read()[-3000:]
      assert time.monotonic() < deadline, "no metrics record before the timeout"
      time.sleep(0.02)
    preempted.send_signal(signal.SIGTERM)
    _, stderr = preempted.communicate(timeout=TIMEOUT)
    assert preempted.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr
    status = json.loads((preempted_dir / metrics_lib.STATUS_FILE).read_text())
    step = status["step"]
    assert status["status"] == "preempted" and 1 <= step < 30 and status["last_checkpoint"] == step, status
    assert step in checkpoint_lib.Checkpointer(preempted_dir / "checkpoints").all_steps()
    assert max(r["step"] for r in read_metrics(str(preempted_dir))) == step
    procs.append(rerun := main_py(preempted_dir))
    for proc in (straight, rerun):
      _, stderr = proc.communicate(timeout=TIMEOUT)
      assert proc.returncode == 0, stderr[-3000:]
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  assert read_status(str(preempted_dir))["status"] == "finished"
  records = read_metrics(str(preempted_dir))
  assert [r["step"] for r in records if r["split"] == "train"] == list(range(1, 31))
  assert records == read_metrics(str(straight_dir))
  (step_a, a), (step_b, b) = final_state(straight_dir), final_state(preempted_dir)
  assert step_a == step_b == 30
  leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
  assert jax.tree.structure(a) == jax.tree.structure(b) and len(leaves_a) > 10
  for x, y in zip(leaves_a, leaves_b):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # orbax restores a typed key as one
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_main_py_exit_codes_of_a_stop():
  assert cli.exit_code(stops.Interrupted(5)) == cli.EXIT_INTERRUPTED == 128 + signal.SIGINT
  assert cli.exit_code(stops.Preempted(5)) == cli.EXIT_PREEMPTED == 128 + signal.SIGTERM
  assert cli.exit_code(stops.SetupStopped("interrupted", 0)) == cli.EXIT_INTERRUPTED
  assert cli.exit_code(stops.SetupStopped("preempted", 0)) == cli.EXIT_PREEMPTED


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, "preempted"), (signal.SIGINT, "interrupted")])
def test_a_signal_during_setup_leaves_a_true_status_and_the_handler(tmp_path, signum, status):
  """SIGTERM or Ctrl-C while setting up (no loop handler yet): SetupStopped, status.json at step 0 with pid and host,
  SIGTERM's handler back as it was."""
  before = signal.getsignal(signal.SIGTERM)
  # A process a non-interactive shell starts in the background (`pytest ... &`) inherits SIGINT ignored, and Python
  # then installs no KeyboardInterrupt handler: give the test the one an interactive Ctrl-C meets.
  int_before = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(stops.SetupStopped, match=f"^{status} during setup, before step 0 trained") as stop:
      with stops.stops_during_setup(str(tmp_path)):
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises at the next bytecode: never reached
  finally:
    signal.signal(signal.SIGINT, int_before)
  assert stop.value.status == status and stop.value.step == 0
  written = read_status(str(tmp_path))
  assert written["status"] == status and written["step"] == 0, written
  assert written["pid"] == os.getpid() and written["host"]
  assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_during_setup_resumes_from_the_last_checkpoint_and_keeps_a_finished_status(tmp_path):
  """The status names the step a rerun resumes from (the newest checkpoint); a finished run's status is kept (an
  analysis of it stopped midway changes nothing)."""
  with checkpoint_lib.Checkpointer(tmp_path / "checkpoints", save_every=1) as ckpt:
    for s in (4, 8):
      ckpt.save(s, {"w": np.ones(2, np.float32)})
  with pytest.raises(stops.SetupStopped, match="before step 8"):
    with stops.stops_during_setup(str(tmp_path)):
      raise KeyboardInterrupt
  assert read_status(str(tmp_path))["status"] == "interrupted" and read_status(str(tmp_path))["last_checkpoint"] == 8
  metrics_lib.write_status(str(tmp_path), "finished", 8)
  with pytest.raises(stops.SetupStopped):
    with stops.stops_during_setup(str(tmp_path)):
      raise KeyboardInterrupt
  assert read_status(str(tmp_path))["status"] == "finished"


@pytest.mark.slow
def test_main_py_ctrl_c_during_setup_is_one_line_and_interrupted(tmp_path):
  """A real Ctrl-C to `python main.py` a second after it logs its devices (while setup builds data and compiles): exit
  130, no traceback, status.json `interrupted` with pid and host."""
  # The disposition an interactive shell gives its foreground job: a suite started in the background by a
  # non-interactive shell passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler. A handled
  # signal is reset to its default at exec (an ignored one stays ignored), so the child starts with SIGINT's default.
  int_before = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    proc = subprocess.Popen(
        [sys.executable, "main.py", f"--workdir={tmp_path}", *TINY],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
  finally:
    signal.signal(signal.SIGINT, int_before)
  try:
    lines = []
    for line in proc.stderr:  # the log goes to stderr
      lines.append(line)
      if "JAX devices" in line:  # setup (data, init, compiling) takes seconds after it
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        break
    rest = proc.communicate(timeout=TIMEOUT)[1]
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  stderr = "".join(lines) + rest
  assert proc.returncode == 130, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  status = read_status(str(tmp_path))
  assert status["status"] == "interrupted" and status["pid"] == proc.pid and status["host"], status
