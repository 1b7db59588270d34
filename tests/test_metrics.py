"""MetricWriter (JSONL + TensorBoard read back), resume, ProgressReporter with a fake clock,
atomic status.json."""

import glob
import json
import math
import os
import struct

import jax.numpy as jnp
import numpy as np
import pytest
from tensorboardX.crc32c import crc32c
from tensorboardX.proto import event_pb2

from train import metrics


def _read_events(run_dir):
  """Independent TFRecord reader: [u64 len][u32 masked crc(len)][data][u32 masked crc(data)]."""

  def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

  events = []
  for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
    with open(path, "rb") as f:
      blob = f.read()
    pos = 0
    while pos < len(blob):
      header = blob[pos : pos + 8]
      (length,) = struct.unpack("<Q", header)
      assert struct.unpack("<I", blob[pos + 8 : pos + 12])[0] == masked(header)
      data = blob[pos + 12 : pos + 12 + length]
      assert struct.unpack("<I", blob[pos + 12 + length : pos + 16 + length])[0] == masked(data)
      pos += 16 + length
      event = event_pb2.Event()
      event.ParseFromString(data)
      events.append(event)
  return events


def _scalars(events):
  return [(e.step, v.tag, v.simple_value) for e in events if e.HasField("summary") for v in e.summary.value]


def test_jsonl_and_tensorboard_round_trip(tmp_path):
  workdir = str(tmp_path)
  with metrics.MetricWriter(workdir) as writer:
    writer.write_scalars(10, {"loss": 2.5, "learning_rate": jnp.float32(1e-3)})
    writer.write_scalars(10, {"loss": 3.0, "bleu": np.float64(12.25)}, split="eval")
    writer.write_scalars(20, {"loss": float("nan")})
    # Flushed at once: readable before close.
    lines = open(os.path.join(workdir, "metrics.jsonl")).read().splitlines()
    assert len(lines) == 3
  records = [json.loads(line) for line in lines]
  assert records[0] == {"step": 10, "split": "train", "loss": 2.5, "learning_rate": pytest.approx(1e-3, rel=1e-7)}
  assert records[1] == {"step": 10, "split": "eval", "loss": 3.0, "bleu": 12.25}
  assert records[2]["step"] == 20 and math.isnan(records[2]["loss"])
  assert [r["step"] for r in metrics.read_metrics(workdir, split="train")] == [10, 20]

  train = _scalars(_read_events(os.path.join(workdir, "tensorboard", "train")))
  assert train[:2] == [(10, "loss", 2.5), (10, "learning_rate", pytest.approx(1e-3, rel=1e-7))]
  assert train[2][:2] == (20, "loss") and math.isnan(train[2][2])
  evals = _scalars(_read_events(os.path.join(workdir, "tensorboard", "eval")))
  assert evals == [(10, "loss", 3.0), (10, "bleu", 12.25)]


def test_append_across_writers_and_resume_drops_lost_steps(tmp_path):
  workdir = str(tmp_path)
  with metrics.MetricWriter(workdir, tensorboard=False) as writer:
    for step in (1, 2, 3):
      writer.write_scalars(step, {"loss": float(step)})
  with metrics.MetricWriter(workdir, tensorboard=False) as writer:  # plain reopen appends
    writer.write_scalars(4, {"loss": 4.0})
  assert [r["step"] for r in metrics.read_metrics(workdir)] == [1, 2, 3, 4]
  # The killed run got to step 4 but its last checkpoint was step 2: resume drops 3 and 4.
  with metrics.MetricWriter(workdir, resume_step=2) as writer:
    writer.write_scalars(3, {"loss": 30.0})
  records = metrics.read_metrics(workdir)
  assert [(r["step"], r["loss"]) for r in records] == [(1, 1.0), (2, 2.0), (3, 30.0)]
  events = _read_events(os.path.join(workdir, "tensorboard", "train"))
  purge = [e.step for e in events if e.HasField("session_log")]
  assert purge == [3]  # TensorBoard drops older events with step >= 3
  assert _scalars(events) == [(3, "loss", 30.0)]


def test_a_rerun_from_step_0_drops_the_killed_attempts_records_its_step_0_evaluation_included(tmp_path):
  """A run killed before its first checkpoint starts afresh (resume_step 0) and evaluates at step 0 again: the
  killed attempt's records, that evaluation included, are dropped, so its file equals an uninterrupted run's."""
  workdir = str(tmp_path)

  def attempt(last, resume_step=None):
    with metrics.MetricWriter(workdir, resume_step=resume_step) as writer:
      writer.write_scalars(0, {"loss": 7.6}, split="eval")
      for step in range(1, last + 1):
        writer.write_scalars(step, {"loss": 5.0 - step})

  attempt(2)  # killed at step 2, no checkpoint
  attempt(3, resume_step=0)
  got = [(r["split"], r["step"]) for r in metrics.read_metrics(workdir)]
  assert got == [("eval", 0), ("train", 1), ("train", 2), ("train", 3)]
  events = _read_events(os.path.join(workdir, "tensorboard", "eval"))
  assert [e.step for e in events if e.HasField("session_log")] == [0]  # TensorBoard purges from step 0


def test_tensorboard_files_of_quickly_reopened_writers_are_kept(tmp_path):
  for step in (1, 2):  # same second, same process: must not overwrite the first file
    with metrics.MetricWriter(str(tmp_path)) as writer:
      writer.write_scalars(step, {"loss": float(step)})
  events = _read_events(os.path.join(str(tmp_path), "tensorboard", "train"))
  assert sorted(_scalars(events)) == [(1, "loss", 1.0), (2, "loss", 2.0)]


def test_read_metrics_skips_truncated_last_line(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text('{"step": 1, "split": "train", "loss": 1.0}\n{"step": 2, "spl')
  assert metrics.read_metrics(str(tmp_path)) == [{"step": 1, "split": "train", "loss": 1.0}]
  path.write_text('{"step": 1, "spl\n{"step": 2, "split": "train", "loss": 1.0}\n')
  with pytest.raises(json.JSONDecodeError):  # corruption in the middle is not hidden
    metrics.read_metrics(str(tmp_path))


def test_bad_scalars_raise(tmp_path):
  with metrics.MetricWriter(str(tmp_path), tensorboard=False) as writer:
    with pytest.raises(ValueError, match=r"'step' is reserved"):
      writer.write_scalars(1, {"step": 1.0})
    with pytest.raises(ValueError, match=r"'loss' has shape \(2,\)"):
      writer.write_scalars(1, {"loss": np.ones(2)})
  assert metrics.read_metrics(str(tmp_path)) == []


# ------------------------------------------------------------------------------ progress


class FakeClock:

  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_progress_rate_and_eta_with_fake_clock():
  clock, lines = FakeClock(), []
  reporter = metrics.ProgressReporter(1000, window=2, clock=clock, emit=lines.append)
  line = reporter.update(0, loss=5.0)
  assert line == "step 0/1000 (0.0%) | loss 5.0000 | ? steps/s | ETA ?"
  clock.now += 60.0  # first interval: slow (compilation), 100 steps in 60 s
  reporter.update(100)
  clock.now += 10.0  # then 100 steps per 10 s
  reporter.update(200)
  # Window of 2 intervals: (200 - 0) / 70 s.
  assert reporter.steps_per_sec() == pytest.approx(200 / 70)
  clock.now += 10.0
  line = reporter.update(300, loss=2.34567)
  # Compilation interval has left the window: 200 steps / 20 s = 10 steps/s, 700 left -> 70 s.
  assert reporter.steps_per_sec() == pytest.approx(10.0)
  assert reporter.eta_seconds() == pytest.approx(70.0)
  assert line == "step 300/1000 (30.0%) | loss 2.3457 | 10.00 steps/s | ETA 0:01:10"
  assert lines[-1] == line and len(lines) == 4


def test_format_duration():
  assert metrics.format_duration(0) == "0:00:00"
  assert metrics.format_duration(3 * 3600 + 25 * 60 + 7.4) == "3:25:07"
  assert metrics.format_duration(100 * 3600) == "100:00:00"
  assert metrics.format_duration(float("inf")) == "?"


def test_progress_bad_total():
  with pytest.raises(ValueError, match=r"total_steps=0"):
    metrics.ProgressReporter(0)


# -------------------------------------------------------------------------------- status


def test_status_round_trip_and_overwrite(tmp_path):
  workdir = str(tmp_path / "run")
  assert metrics.read_status(workdir) is None
  metrics.write_status(workdir, "running", 10)
  written = metrics.write_status(
      workdir, "diverged", 37, loss=float("nan"), nonfinite_params=["decoder/layer_3/mlp_out/kernel"]
  )
  status = metrics.read_status(workdir)
  assert status["status"] == "diverged" and status["step"] == 37
  assert status["nonfinite_params"] == ["decoder/layer_3/mlp_out/kernel"]
  assert math.isnan(status["loss"]) and status["time"] == written["time"]
  assert os.listdir(workdir) == ["status.json"]  # no temp file left behind


def test_status_write_is_atomic_when_replace_fails(tmp_path, monkeypatch):
  workdir = str(tmp_path)
  metrics.write_status(workdir, "running", 5)

  def crash(src, dst):
    raise OSError("killed during replace")

  monkeypatch.setattr(metrics.os, "replace", crash)
  with pytest.raises(OSError, match="killed"):
    metrics.write_status(workdir, "finished", 6)
  assert metrics.read_status(workdir)["status"] == "running"  # old file intact
  assert os.listdir(workdir) == ["status.json"]


def test_status_bad_value():
  with pytest.raises(ValueError, match=r"status='done'.*'running', 'finished', 'diverged'"):
    metrics.write_status("/nonexistent-never-created", "done", 1)


def test_status_names_the_process_and_host_that_wrote_it(tmp_path):
  """A reader tells a dead run from a live one: status.json carries the writer's pid and host (issue 41)."""
  import socket  # noqa: PLC0415

  metrics.write_status(str(tmp_path), "running", 3, primary=True)
  got = metrics.read_status(str(tmp_path))
  assert (got["pid"], got["host"], got["status"], got["step"]) == (os.getpid(), socket.gethostname(), "running", 3)
