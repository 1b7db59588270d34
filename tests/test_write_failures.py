"""A write that fails (a full disk, a bucket's quota) during a checkpoint save: one error naming the step, the path,
the OS's reason and the last good checkpoint; status.json `failed` with that reason; the partial checkpoint folder
removed; the last good checkpoint intact, and the rerun (with space) resumes from it and finishes."""

import errno
import logging
import os
import shutil
import subprocess
import sys
import types
import uuid

import pytest

from tests.test_preemption import REPO, TIMEOUT, TINY, config
from train import checkpoint as checkpoint_lib
from train import checkpoint_errors, loop, stops
from train import metrics as metrics_lib
from train.metrics import read_metrics, read_status

TENSORSTORE_ENOSPC = (
    'RESOURCE_EXHAUSTED: Error writing "params.w/0.0" in OCDBT database at local file "{dir}/": Failed writing: '
    "\"{dir}/d/9e84\": Failed to write 128484 bytes to file 21: No space left on device [os_error_code='28']"
)


def test_the_reason_is_the_oss_words():
  assert checkpoint_errors.write_failure_reason(OSError(errno.ENOSPC, "No space left on device")) == (
      "No space left on device [errno 28]"
  )
  wrapped = ValueError(TENSORSTORE_ENOSPC.format(dir="/w/checkpoints/20.orbax-checkpoint-tmp"))
  assert checkpoint_errors.write_failure_reason(wrapped) == "No space left on device [errno 28]"
  try:
    try:
      raise OSError(errno.EDQUOT, "Disk quota exceeded")
    except OSError as e:
      raise RuntimeError("commit failed") from e
  except RuntimeError as e:
    assert checkpoint_errors.write_failure_reason(e) == "Disk quota exceeded [errno 122]"
  assert checkpoint_errors.write_failure_reason(KeyError("x")) == "KeyError: 'x'"


def test_a_failed_save_is_one_error_and_its_partial_folder_is_removed(tmp_path, monkeypatch):
  """orbax's save raising as tensorstore does on a full disk, after it made the step's temporary folder."""
  import jax.numpy as jnp  # noqa: PLC0415

  ckpt = checkpoint_lib.Checkpointer(tmp_path / "checkpoints", max_to_keep=None, save_every=2)
  state = {"w": jnp.ones(3)}
  assert ckpt.save(2, state)
  real_save = ckpt._manager.save

  def full_disk(step, *args, **kwargs):
    partial = tmp_path / "checkpoints" / f"{step}.orbax-checkpoint-tmp" / "state"
    partial.mkdir(parents=True)
    raise ValueError(TENSORSTORE_ENOSPC.format(dir=partial))

  monkeypatch.setattr(ckpt._manager, "save", full_disk)
  with pytest.raises(checkpoint_errors.CheckpointWriteError) as raised:
    ckpt.save(4, state)
  e = raised.value
  assert str(e) == (
      f"checkpoint 4 could not be written to {tmp_path / 'checkpoints' / '4'}: No space left on device [errno 28]; "
      "the last good checkpoint is 2"
  )
  assert (e.step, e.last_good, e.errno) == (4, 2, None) and isinstance(e, OSError)
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2"]  # the partial folder is gone
  monkeypatch.setattr(ckpt._manager, "save", real_save)
  assert ckpt.save(4, state) and ckpt.all_steps() == [2, 4]


@pytest.fixture
def small_disk(tmp_path):
  """A 3 MB tmpfs (it needs root and a kernel that lets this process mount; else the test is skipped), its size
  raised to 64 MB by calling the fixture's value."""
  mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
  mount.mkdir()
  if not shutil.which("mount") or os.geteuid() != 0:
    pytest.skip("mounting a small tmpfs needs root")
  made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True, text=True)
  if made.returncode:
    pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
  grow = lambda: subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
  try:
    yield mount, grow
  finally:
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_fails_the_run_cleanly_and_the_rerun_resumes(small_disk):
  disk, grow = small_disk
  workdir = str(disk / "run")
  cfg = config()
  cfg.train.num_steps, cfg.train.checkpoint_every, cfg.train.keep_checkpoints = 40, 2, 100
  with pytest.raises(stops.WriteFailed) as raised:
    loop.train_and_evaluate(loop.setup(cfg, workdir))
  failed = raised.value
  assert isinstance(failed.error, checkpoint_errors.CheckpointWriteError)
  status = read_status(workdir)
  assert status["status"] == "failed" and status["step"] == failed.step
  assert "No space left on device [errno 28]" in status["reason"] and status["reason"] in str(failed)
  last = status["last_checkpoint"]
  steps = sorted(int(n) for n in os.listdir(os.path.join(workdir, "checkpoints")) if n.isdigit())
  assert last == steps[-1] == failed.step - 2  # every good checkpoint kept
  assert not [n for n in os.listdir(os.path.join(workdir, "checkpoints")) if "tmp" in n]  # no partial folder
  grow()
  resumed = loop.setup(cfg, workdir)
  assert resumed.start_step == last
  loop.train_and_evaluate(resumed)
  assert read_status(workdir)["status"] == "finished"
  assert [r["step"] for r in read_metrics(workdir, split="train")] == list(range(2, 41, 2))


def test_the_echoes_of_a_failed_write_are_dropped_while_saving_and_after(monkeypatch):
  """orbax's writer threads' tracebacks, asyncio's unretrieved futures, tensorstore's 'Event loop is closed' and
  the write's coroutines never awaited (module docstring of train/checkpoint_errors.py) are dropped while a save runs or
  after one failed; any other record, unraisable error or warning passes, and all pass at --verbosity=1."""
  quiet = checkpoint_errors._QuietWriteFailures()  # noqa: SLF001
  seen, warned = [], []
  quiet._previous_unraisable = seen.append  # noqa: SLF001 (what sys.unraisablehook was)
  quiet._previous_showwarning = lambda message, *_: warned.append(str(message))  # noqa: SLF001
  never_awaited = "coroutine 'async_serialize.<locals>.write_fragment' was never awaited"
  failure = ValueError("RESOURCE_EXHAUSTED: Failed to write 204 bytes to file 21: No space left on device")

  def record(name, pathname, msg, exc=None):
    return logging.LogRecord(name, logging.ERROR, pathname, 1, msg, (), (type(exc), exc, None) if exc else None)

  orbax_echo = record("absl", "/site-packages/orbax/checkpoint/_src/futures/future.py", "run() raised", failure)
  asyncio_echo = record("asyncio", "/lib/asyncio/base_events.py", f"Future exception was never retrieved {failure!r}")
  other = record("absl", "/site-packages/orbax/checkpoint/checkpoint_manager.py", "something else broke")
  closed = types.SimpleNamespace(exc_type=RuntimeError, exc_value=RuntimeError("Event loop is closed"))
  assert quiet.filter(orbax_echo) and quiet.filter(asyncio_echo)  # no save running: shown
  quiet._unraisable(closed)  # noqa: SLF001
  quiet._showwarning(never_awaited, RuntimeWarning, "f.py", 1)  # noqa: SLF001
  assert len(seen) == 1 and warned == [never_awaited]
  quiet.active = 1  # a save runs
  assert not quiet.filter(orbax_echo) and not quiet.filter(asyncio_echo) and quiet.filter(other)
  quiet._unraisable(closed)  # noqa: SLF001
  quiet._showwarning(never_awaited, RuntimeWarning, "f.py", 1)  # noqa: SLF001
  quiet._showwarning("coroutine 'x' was never awaited", UserWarning, "f.py", 1)  # noqa: SLF001 (not a RuntimeWarning)
  quiet._showwarning("divide by zero", RuntimeWarning, "f.py", 1)  # noqa: SLF001
  assert len(seen) == 1 and quiet.dropped == 4 and quiet.failed
  assert warned == [never_awaited, "coroutine 'x' was never awaited", "divide by zero"]
  quiet.active = 0  # after the failure: still dropped
  assert not quiet.filter(orbax_echo)
  quiet._unraisable(types.SimpleNamespace(exc_type=KeyError, exc_value=KeyError("x")))  # noqa: SLF001
  assert len(seen) == 2
  monkeypatch.setattr(checkpoint_errors.logging, "level_debug", lambda: True)  # --verbosity=1: everything shows
  assert quiet.filter(orbax_echo)


FILLS_THE_DISK = [
    "--config.train.num_steps=40",
    "--config.train.checkpoint_every=2",
    "--config.train.keep_checkpoints=100",
    # no metrics between checkpoints: a checkpoint is the write that finds the disk full (with a record every step,
    # one that crosses a block could find it first when a checkpoint left less than a block; then there are no
    # orbax tracebacks to hide)
    "--config.train.log_every=40",
    "--config.train.eval_every=40",
]


@pytest.mark.slow
def test_main_py_on_a_full_disk_says_one_error_without_orbaxs_tracebacks(small_disk):
  """main.py whose checkpoint save fails with ENOSPC: exit 5, the error line, one line saying orbax's tracebacks are
  not shown, and none of them (the run on the same full disk printed ~200 lines of them)."""
  disk, _ = small_disk
  proc = subprocess.run(
      [sys.executable, "main.py", f"--workdir={disk / 'run'}", *TINY, *FILLS_THE_DISK],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=TIMEOUT,
  )
  assert proc.returncode == 5, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if not line.startswith("I")]  # INFO: progress lines
  assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr, proc.stderr[-3000:]
  assert len(lines) == 2, lines
  assert "the tracebacks of orbax's writer threads, which failed the same way, are not shown" in lines[0]
  assert "could not be written to" in lines[1] and "No space left on device [errno 28]" in lines[1]
  assert read_status(str(disk / "run"))["status"] == "failed"


def test_status_json_says_failed_on_a_disk_with_no_block_left(small_disk):
  """The atomic write needs a new block for its temp file, which a full disk does not have; status.json is then
  rewritten over its own block (CI once saw 'status.json could not be written either' and a stale 'running')."""
  disk, _ = small_disk
  metrics_lib.write_status(disk, "running", 8, total_steps=40)
  fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
  try:
    with pytest.raises(OSError) as full:  # noqa: PT012 (a block at a time until none is left)
      while True:
        os.write(fd, b"\0" * 4096)
  finally:
    os.close(fd)
  assert full.value.errno == errno.ENOSPC
  with pytest.raises(OSError, match="No space left"):
    metrics_lib.write_text_atomic(disk / "other.json", "{}")
  reason = "checkpoint 10 could not be written to /x: No space left on device [errno 28]; the last good one is 8"
  metrics_lib.write_status(disk, "failed", 10, reason=reason, last_checkpoint=8)
  status = read_status(disk)
  assert (status["status"], status["step"], status["reason"], status["last_checkpoint"]) == ("failed", 10, reason, 8)
  assert sorted(os.listdir(disk)) == ["filler", "status.json"]  # no temp file left behind


def test_status_json_is_rewritten_in_place_only_when_the_disk_is_full(tmp_path, monkeypatch):
  """The fallback on any machine (no tmpfs needed): ENOSPC/EDQUOT rewrite the existing file, a shorter record leaves
  no tail of the longer one; any other error, or a disk full before the first status.json, is raised."""
  metrics_lib.write_status(tmp_path, "running", 1, note="x" * 500)

  def fails_with(code):
    def write(path, text):
      raise OSError(code, os.strerror(code))

    monkeypatch.setattr(metrics_lib, "write_text_atomic", write)

  for code in (errno.ENOSPC, errno.EDQUOT):
    fails_with(code)
    metrics_lib.write_status(tmp_path, "failed", 2 + code, reason="full")
    assert read_status(tmp_path)["step"] == 2 + code and "note" not in read_status(tmp_path)
  fails_with(errno.EACCES)
  with pytest.raises(PermissionError):
    metrics_lib.write_status(tmp_path, "failed", 3)
  fails_with(errno.ENOSPC)
  with pytest.raises(OSError, match="No space left"):
    metrics_lib.write_status(tmp_path / "new", "failed", 3)
