"""Workdirs go through `etils.epath` (issue 13): metrics.jsonl, status.json, config.json and the TensorBoard folder are
written under a local path given as a string or an `epath.Path`, and a `gs://bucket/run` workdir reaches the filesystem
layer as it is, not as a local folder `gs:/bucket/run`.

No network: `gs://` is served by `LocalBucket`, an epath backend (the layer gcsfs or tensorflow's gfile fills in a real
run) that keeps the objects in a local folder, records every path it is asked for, and, like an object store, has no
append mode.
"""

import io
import json
import os

import pytest
import tensorboardX
import tensorboardX.record_writer
from etils import epath
from etils.epath import backend as epath_backend
from etils.epath import gpath

from tests import tiny
from train import loop
from train import metrics as metrics_lib
from train.metrics import read_metrics, read_status

PREFIX = "gs://"


class LocalBucket(epath_backend._OsPathBackend):  # noqa: SLF001 - the os backend does the work on the local copy
  """An epath backend for gs:// paths kept under `root` (`gs://b/x` -> `root/b/x`); `seen` lists the paths asked
  for, as they arrived."""

  def __init__(self, root):
    self.root, self.seen = str(root), []

  def _local(self, path):
    path = os.fspath(path)
    if path.startswith(PREFIX):
      self.seen.append(path)
      return os.path.join(self.root, path[len(PREFIX) :])
    assert not path.startswith(self.root), path  # never a local path into the bucket
    return path

  def _uri(self, path):
    return PREFIX + os.path.relpath(os.fspath(path), self.root)

  def open(self, path, mode):
    if "a" in mode:
      raise io.UnsupportedOperation(f"{path}: an object store has no append mode")
    return super().open(self._local(path), mode)

  def exists(self, path):
    return super().exists(self._local(path))

  def isdir(self, path):
    return super().isdir(self._local(path))

  def listdir(self, path):
    return super().listdir(self._local(path))

  def glob(self, path):
    return [self._uri(p) for p in super().glob(self._local(path))]

  def walk(self, top, **kwargs):
    for root, dirs, files in super().walk(self._local(top), **kwargs):
      yield self._uri(root), dirs, files

  def makedirs(self, path, **kwargs):
    return super().makedirs(self._local(path), **kwargs)

  def mkdir(self, path, **kwargs):
    return super().mkdir(self._local(path), **kwargs)

  def rmtree(self, path):
    return super().rmtree(self._local(path))

  def remove(self, path):
    return super().remove(self._local(path))

  def rename(self, path, dst):
    return super().rename(self._local(path), self._local(dst))

  def replace(self, path, dst):
    return super().replace(self._local(path), self._local(dst))

  def copy(self, path, dst, overwrite):
    return super().copy(self._local(path), self._local(dst), overwrite)

  def stat(self, path):
    return super().stat(self._local(path))


class NoCheckpoints:
  """A checkpointer that saves nothing (orbax writes gs:// through TensorStore's own driver, which needs the
  network)."""

  def __init__(self, directory, **kwargs):
    self.directory = directory

  def all_steps(self):
    return []

  def latest_step(self):
    return None

  def restore(self, *args, **kwargs):
    return None

  def should_save(self, *args, **kwargs):
    return False

  def reached_preemption(self, step):
    return False

  def save(self, *args, **kwargs):
    return False

  def wait(self):
    pass


@pytest.fixture
def bucket(tmp_path, monkeypatch):
  """gs:// served from tmp_path/bucket; the working directory is tmp_path/cwd, where a mangled path would land."""
  fake = LocalBucket(tmp_path / "bucket")
  monkeypatch.setitem(gpath._PREFIX_TO_BACKEND, "gs", fake)  # noqa: SLF001
  monkeypatch.setattr(gpath, "_is_tf_installed", lambda: False)  # tensorflow's gfile would be picked first
  (tmp_path / "cwd").mkdir()
  monkeypatch.chdir(tmp_path / "cwd")
  return fake


def _no_local_mangling(tmp_path):
  assert list((tmp_path / "cwd").iterdir()) == []  # no `gs:` folder beside the run
  assert not os.path.exists("/gs:")


@pytest.mark.parametrize("as_path", [False, True])
def test_local_workdir_as_a_string_or_an_epath(tmp_path, as_path):
  workdir = tmp_path / "run" / "nested"  # missing parents are created
  workdir = epath.Path(workdir) if as_path else str(workdir)
  with metrics_lib.MetricWriter(workdir, primary=True) as writer:
    for step in (1, 2, 3):
      writer.write_scalars(step, {"loss": 1.0 / step})
  assert isinstance(writer.path, epath.Path) and writer.path == epath.Path(workdir) / "metrics.jsonl"
  with metrics_lib.MetricWriter(workdir, resume_step=2, primary=True) as writer:  # a rerun from step 2
    writer.write_scalars(3, {"loss": 0.25})
  assert [(r["step"], r["loss"]) for r in read_metrics(workdir)] == [(1, 1.0), (2, 0.5), (3, 0.25)]
  metrics_lib.write_status(workdir, "preempted", 3, primary=True, last_checkpoint=3)
  assert read_status(workdir)["status"] == "preempted" and read_status(str(workdir))["last_checkpoint"] == 3
  assert len(list((epath.Path(workdir) / "tensorboard" / "train").iterdir())) == 2  # one event file per writer
  assert sorted(p.name for p in epath.Path(workdir).iterdir()) == ["metrics.jsonl", "status.json", "tensorboard"]


def test_a_gs_workdir_reaches_the_filesystem_layer_unmangled(tmp_path, bucket, caplog):
  workdir = "gs://bucket/run"
  with caplog.at_level("WARNING"):
    writer = metrics_lib.MetricWriter(workdir, primary=True)
  # tensorboardX writes gs:// only through google-cloud-storage, not installed here: skipped, with a warning.
  assert not tensorboardX.record_writer.GCS_ENABLED
  assert any("No TensorBoard events for gs://bucket/run" in r.getMessage() for r in caplog.records)
  with writer:
    writer.write_scalars(1, {"loss": 2.0})
    writer.write_scalars(2, {"loss": 1.5})
    # every record is in the object as soon as it is written (no append: the object is rewritten whole)
    assert [r["step"] for r in read_metrics(workdir)] == [1, 2]
  with metrics_lib.MetricWriter(workdir, resume_step=1, primary=True) as writer:
    writer.write_scalars(2, {"loss": 1.25})
  metrics_lib.write_status(workdir, "running", 2, primary=True, loss=1.25)

  assert [(r["step"], r["loss"]) for r in read_metrics(workdir)] == [(1, 2.0), (2, 1.25)]
  assert read_status(workdir)["step"] == 2
  local = tmp_path / "bucket" / "bucket" / "run"
  assert sorted(p.name for p in local.iterdir()) == ["metrics.jsonl", "status.json"]
  assert json.loads((local / "status.json").read_text())["loss"] == 1.25
  assert "gs://bucket/run/metrics.jsonl" in bucket.seen and "gs://bucket/run/status.json" in bucket.seen
  assert all(p.startswith("gs://bucket/run") for p in bucket.seen)
  _no_local_mangling(tmp_path)


def test_tensorboard_gets_the_gs_logdir_where_tensorboardx_supports_it(tmp_path, bucket, monkeypatch):
  """With google-cloud-storage installed tensorboardX writes gs:// itself: it must get the URI unchanged."""
  logdirs = []

  class FakeSummaryWriter:

    def __init__(self, logdir, **kwargs):
      logdirs.append(logdir)

    def add_scalar(self, *args, **kwargs):
      pass

    flush = close = add_scalar

  monkeypatch.setattr(tensorboardX.record_writer, "GCS_ENABLED", True)
  monkeypatch.setattr(tensorboardX, "SummaryWriter", FakeSummaryWriter)
  with metrics_lib.MetricWriter("gs://bucket/run", primary=True) as writer:
    writer.write_scalars(1, {"loss": 2.0})
    writer.write_scalars(1, {"loss": 2.5}, split="eval")
  assert logdirs == ["gs://bucket/run/tensorboard/train", "gs://bucket/run/tensorboard/eval"]
  _no_local_mangling(tmp_path)
  unsupported = metrics_lib.tensorboard_unsupported
  assert unsupported(epath.Path("gs://bucket/run")) is None and unsupported(epath.Path(tmp_path)) is None
  assert unsupported(epath.Path("az://container/run")) == "tensorboardX has no writer for az:// paths"
  monkeypatch.setattr(tensorboardX.record_writer, "S3_ENABLED", False)
  assert unsupported(epath.Path("s3://bucket/run")) == "tensorboardX writes s3:// paths only with boto3 installed"


@pytest.mark.slow
def test_the_training_loop_writes_a_gs_workdir(tmp_path, bucket, monkeypatch):
  """setup + train_and_evaluate on gs://bucket/run: the workdir, config.json, metrics.jsonl and status.json land in
  the bucket. (Checkpoint arrays go through TensorStore's own gs:// driver, which needs the network: the checkpointer
  is replaced by one that saves nothing.)"""

  monkeypatch.setattr(loop.checkpoint_lib, "Checkpointer", NoCheckpoints)
  config = tiny.run_config(
      **{
          "train.num_steps": 2,
          "train.log_every": 1,
          "train.eval_every": 1000,
          "train.num_decode_examples": 0,
          "data.embedded.num_train": 64,
          "data.embedded.num_eval": 8,
          "data.batch_size": 8,
          "data.eval_batch_size": 8,
          "model.arch": "decoder",
          "model.num_decoder_layers": 1,
      }
  )
  exp = loop.setup(config, "gs://bucket/run")
  assert os.fspath(exp.checkpointer.directory) == "gs://bucket/run/checkpoints"
  loop.train_and_evaluate(exp)
  local = tmp_path / "bucket" / "bucket" / "run"
  assert {"config.json", "metrics.jsonl", "status.json"} <= {p.name for p in local.iterdir()}
  assert json.loads((local / "config.json").read_text())["train"]["num_steps"] == 2
  assert [r["step"] for r in read_metrics("gs://bucket/run", split="train")] == [1, 2]
  assert read_status("gs://bucket/run")["status"] == "finished"
  assert "gs://bucket/run/config.json" in bucket.seen
  _no_local_mangling(tmp_path)
