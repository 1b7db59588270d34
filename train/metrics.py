"""Metric records (JSONL + TensorBoard), a one-line progress reporter, and `status.json`.

Contract:
  * `MetricWriter(workdir)` appends one JSON object per `write_scalars` call to `<workdir>/metrics.jsonl`:
    {"step": int, "split": str, <name>: float, ...}, flushed at once so a killed run keeps every record written so
    far; non-finite values are written as Python's json does (`NaN`): a diverged run's last loss is a result. The
    same scalars go to TensorBoard under `<workdir>/tensorboard/<split>/` (tensorboardX; one run per split, so train
    and eval curves of one tag overlay) and to the trackers it is given (train/trackers.py) as `<split>/<name>`.
  * Resuming: `MetricWriter(workdir, resume_step=S)` drops the JSONL records with step > S and tells TensorBoard to
    purge them too (`purge_step=S + 1`), so every step appears once; S = 0 (no checkpoint: the run starts afresh and
    writes its step-0 evaluation again) drops them all (`purge_step=0`).
  * `ProgressReporter` formats "step 120/1000 (12.0%) | loss 3.2100 | <rate> steps/s | ETA 0:03:14" from an
    injectable clock; the rate is taken over a sliding window.
  * `write_status` / `read_status`: `<workdir>/status.json` is replaced atomically (temp file, fsync, `os.replace`),
    so a reader never sees a partial one. On a full disk (ENOSPC, EDQUOT) it is rewritten in place instead (a record
    is far smaller than one block, so this allocates nothing): a run that fails because the disk is full says so.
  * One writer: in a multi-process run only process 0 (`primary`) writes files; the others validate the same values
    and write nothing. Progress lines are logged by every process.
  * Paths go through `etils.epath`, so a workdir such as `gs://bucket/run` reaches the filesystem library as it is.
    An object store has no append and no rename: there metrics.jsonl is rewritten whole at each record and
    status.json is uploaded directly. TensorBoard (tensorboardX) supports only local paths, `gs://` and `s3://`; for
    any other workdir it is skipped with a warning.
"""

import collections
import errno
import json
import math
import os
import socket
import tempfile
import time
import uuid
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import numpy as np
import tensorboardX
import tensorboardX.record_writer
from absl import logging
from etils import epath

METRICS_FILE = "metrics.jsonl"
STATUS_FILE = "status.json"
TENSORBOARD_DIR = "tensorboard"
STATUSES = ("running", "finished", "diverged", "preempted", "interrupted", "failed")
_RESERVED = ("step", "split")


def is_local(path: epath.PathLike) -> bool:
  """Whether `path` is on the local filesystem (no URI scheme such as gs://)."""
  return "://" not in os.fspath(path)


def tensorboard_unsupported(workdir: epath.Path) -> Optional[str]:
  """Why tensorboardX (2.6) cannot write under `workdir`, or None when it can. It opens event files with Python's
  open() unless the path starts with a prefix it registered a writer for (`gs`: google-cloud-storage, `s3`: boto3),
  so any other URI would become a local folder named `gs:`."""
  if is_local(workdir):
    return None
  scheme = os.fspath(workdir).split("://")[0]
  enabled = {"gs": "GCS_ENABLED", "s3": "S3_ENABLED"}
  if scheme not in enabled:
    return f"tensorboardX has no writer for {scheme}:// paths"
  if not getattr(tensorboardX.record_writer, enabled[scheme], False):
    package = {"gs": "google-cloud-storage", "s3": "boto3"}[scheme]
    return f"tensorboardX writes {scheme}:// paths only with {package} installed"
  return None


def _primary(primary: Optional[bool]) -> bool:
  """Whether this process writes files: `primary` if given, else process 0 of the run."""
  return jax.process_index() == 0 if primary is None else primary


def _to_float(name: str, value: Any) -> float:
  """float() of a Python/numpy/jax scalar; anything with more than one element is an error."""
  array = np.asarray(value)
  if array.size != 1:
    raise ValueError(f"metric {name!r} has shape {array.shape}; valid choices: a scalar")
  return float(array.reshape(()))


class MetricWriter:
  """Writes scalar records to `<workdir>/metrics.jsonl` and TensorBoard.

  Args:
    workdir: run directory (created if missing): a local path or a URI such as gs://bucket/run.
    resume_step: when resuming from a checkpoint at this step, records with a larger step
      (left by the killed run) are removed first; None keeps the file as is.
    tensorboard: also write TensorBoard event files (skipped with a warning where tensorboardX
      cannot write, see the module docstring).
    primary: whether this process writes (default: it is process 0); False checks every
      record as usual and writes nothing, touching no file.
    trackers: open trackers (`train.trackers.open_trackers`) that get every record too; closed with the writer.
  """

  def __init__(
      self,
      workdir: epath.PathLike,
      *,
      resume_step: Optional[int] = None,
      tensorboard: bool = True,
      primary: Optional[bool] = None,
      trackers: Sequence[Any] = (),
  ):
    self.workdir = epath.Path(workdir)
    self.path = self.workdir / METRICS_FILE
    self.primary = _primary(primary)
    self._resume_step = resume_step
    self._file = None
    self._lines: Optional[list[str]] = None  # an object store's whole file (no append there)
    if self.primary:
      self.workdir.mkdir(parents=True, exist_ok=True)
      if not is_local(self.path):
        self._lines = [_record_line(r) for r in read_metrics(self.workdir) if not _dropped(r, resume_step)]
        write_text_atomic(self.path, "".join(self._lines))
      else:
        if resume_step is not None and self.path.exists():
          kept = [r for r in read_metrics(self.workdir) if not _dropped(r, resume_step)]
          write_text_atomic(self.path, "".join(_record_line(r) for r in kept))
        self._file = self.path.open("a")
    self._tensorboard = tensorboard and self.primary
    if self._tensorboard and (reason := tensorboard_unsupported(self.workdir)):
      logging.warning("No TensorBoard events for %s: %s (metrics.jsonl has every record)", self.workdir, reason)
      self._tensorboard = False
    self._tb_writers: dict[str, tensorboardX.SummaryWriter] = {}
    self._trackers = list(trackers) if self.primary else []

  def write_scalars(self, step: int, scalars: Mapping[str, Any], *, split: str = "train") -> None:
    """Appends {"step", "split", **scalars} as one line and logs each scalar to TensorBoard.

    Args:
      step: the training step the values belong to.
      scalars: name -> scalar (Python, numpy or jax; converted with float()).
      split: "train", "eval", ... (the TensorBoard run name).
    """
    bad = [name for name in scalars if name in _RESERVED]
    if bad:
      raise ValueError(f"metric name {bad[0]!r} is reserved; valid choices: any name but {_RESERVED}")
    values = {name: _to_float(name, value) for name, value in scalars.items()}
    record = {"step": int(step), "split": str(split), **values}
    if self._lines is not None:
      self._lines.append(_record_line(record))
      write_text_atomic(self.path, "".join(self._lines))  # an object: one upload holds every record so far
    elif self._file is not None:
      self._file.write(_record_line(record))
      self._file.flush()  # a killed process keeps every line written so far
    else:
      return
    for tracker in self._trackers:
      tracker.log(int(step), {f"{split}/{name}": value for name, value in values.items()})
    if self._tensorboard:
      writer = self._tb_writer(split)
      for name, value in values.items():
        writer.add_scalar(name, value, global_step=int(step))
      writer.flush()

  def _tb_writer(self, split: str) -> tensorboardX.SummaryWriter:
    if split not in self._tb_writers:
      purge = None if self._resume_step is None else (self._resume_step + 1 if self._resume_step else 0)
      self._tb_writers[split] = tensorboardX.SummaryWriter(
          logdir=os.fspath(self.workdir / TENSORBOARD_DIR / split),
          purge_step=purge,
          # tensorboardX names files by the second and host only; a writer reopened within
          # the same second (a quick resume) would truncate the previous file without this.
          filename_suffix=f".{os.getpid()}.{uuid.uuid4().hex[:8]}",
      )
    return self._tb_writers[split]

  def flush(self) -> None:
    if self._file is not None:
      self._file.flush()
    for writer in self._tb_writers.values():
      writer.flush()

  def close(self) -> None:
    if self._file is not None and not self._file.closed:
      self._file.close()
    for writer in self._tb_writers.values():
      writer.close()
    self._tb_writers.clear()
    trackers, self._trackers = self._trackers, []  # closed once, whoever closes first
    for tracker in trackers:
      tracker.close()

  def __enter__(self) -> "MetricWriter":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def _record_line(record: Mapping[str, Any]) -> str:
  return json.dumps(record, allow_nan=True) + "\n"


def _dropped(record: Mapping[str, Any], resume_step: Optional[int]) -> bool:
  """Whether a record left by an earlier run is one the resumed run writes again: after the step it starts from, or
  any at all when it starts from 0 (a run killed before its first checkpoint: its step-0 evaluation is rerun)."""
  return resume_step is not None and (record["step"] > resume_step or resume_step == 0)


def read_metrics(workdir: epath.PathLike, *, split: Optional[str] = None) -> list[dict]:
  """All records of `<workdir>/metrics.jsonl` in file order (optionally one split).

  A last line cut short by a kill (no trailing newline, invalid JSON) is skipped.
  """
  path = epath.Path(workdir) / METRICS_FILE
  if not path.exists():
    return []
  records = []
  lines = path.read_text(encoding="utf-8").split("\n")
  for i, line in enumerate(lines):
    if not line:
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      if i == len(lines) - 1:  # only the unterminated last line may be partial
        continue
      raise
    if split is None or record["split"] == split:
      records.append(record)
  return records


# ------------------------------------------------------------------------------ progress


def format_duration(seconds: float) -> str:
  """H:MM:SS (hours unbounded); '?' when unknown or infinite."""
  if seconds is None or not math.isfinite(seconds):
    return "?"
  total = int(round(max(seconds, 0.0)))
  return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


class ProgressReporter:
  """One progress line per `update`: step/total, scalars, steps/s and ETA.

  Args:
    total_steps: the step at which the run ends.
    window: number of past `update` calls the steps/s average spans (a sliding window, so
      compilation time at the start stops counting once it leaves the window).
    clock: seconds as a float (time.monotonic; tests pass a fake clock).
    emit: receives each line (absl logging.info by default).
  """

  def __init__(
      self,
      total_steps: int,
      *,
      window: int = 10,
      clock: Callable[[], float] = time.monotonic,
      emit: Callable[[str], Any] = logging.info,
  ):
    if total_steps <= 0 or window < 1:
      raise ValueError(f"total_steps={total_steps!r}, window={window!r}; valid choices: both integers >= 1")
    self.total_steps = total_steps
    self._clock = clock
    self._emit = emit
    self._history: collections.deque = collections.deque(maxlen=window + 1)

  def steps_per_sec(self) -> Optional[float]:
    """Steps per second over the window; None before two updates (or with no time elapsed)."""
    if len(self._history) < 2:
      return None
    (step0, t0), (step1, t1) = self._history[0], self._history[-1]
    return (step1 - step0) / (t1 - t0) if t1 > t0 else None

  def eta_seconds(self) -> Optional[float]:
    rate = self.steps_per_sec()
    if not rate:
      return None
    return (self.total_steps - self._history[-1][0]) / rate

  def update(self, step: int, **scalars: Any) -> str:
    """Records (step, now), emits and returns the progress line."""
    self._history.append((int(step), self._clock()))
    parts = [f"step {step}/{self.total_steps} ({100.0 * step / self.total_steps:.1f}%)"]
    parts += [f"{name} {_to_float(name, value):.4f}" for name, value in scalars.items()]
    rate = self.steps_per_sec()
    parts.append("? steps/s" if rate is None else f"{rate:.2f} steps/s")
    eta = self.eta_seconds()
    parts.append(f"ETA {format_duration(eta) if eta is not None else '?'}")
    line = " | ".join(parts)
    self._emit(line)
    return line


# -------------------------------------------------------------------------------- status


def write_text_atomic(path: epath.PathLike, text: str) -> None:
  """Local: writes `text` to a temp file next to `path`, fsyncs it, then os.replace()s `path`. An object store
  (gs://...): uploads `path` directly; an object becomes visible whole or not at all (and there is no rename)."""
  if not is_local(path):
    epath.Path(path).write_text(text, encoding="utf-8")
    return
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic on POSIX: readers see the old or the new file
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_status(
    workdir: epath.PathLike, status: str, step: int, *, primary: Optional[bool] = None, **fields: Any
) -> dict:
  """Atomically writes `<workdir>/status.json` and returns what was written (process 0 only).

  Args:
    workdir: run directory (created if missing): a local path or a URI such as gs://bucket/run.
    status: one of STATUSES ("running", "finished", "diverged", "preempted", "interrupted", "failed").
    step: the last completed step.
    primary: whether this process writes (default: it is process 0); the others return the
      record without writing it.
    **fields: extra JSON-able fields, e.g. nonfinite_params=["decoder/layer_3/mlp_out"],
      loss=float("nan").

  Returns:
    The dict written: {"status", "step", "time" (Unix seconds), "pid", "host", **fields}.
  """
  if status not in STATUSES:
    raise ValueError(f"status={status!r} is invalid; valid choices: {list(STATUSES)}")
  # pid and host: a reader tells a dead run ('running', its pid gone from its host) from a live one
  record = {"status": status, "step": int(step), "time": time.time(), "pid": os.getpid(), "host": socket.gethostname(),
            **fields}  # fmt: skip
  if not _primary(primary):
    return record
  workdir = epath.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  text = json.dumps(record, indent=1) + "\n"
  try:
    write_text_atomic(workdir / STATUS_FILE, text)
  except OSError as e:
    if e.errno not in _DISK_FULL or not is_local(workdir) or not (workdir / STATUS_FILE).exists():
      raise
    _rewrite_in_place(os.fspath(workdir / STATUS_FILE), text)
  return record


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _rewrite_in_place(path: str, text: str) -> None:
  """Overwrites the existing file `path` with `text` without truncating it first ("r+": its blocks are reused, so
  nothing is allocated while `text` fits them), then cuts it to the new length."""
  data = text.encode("utf-8")
  with open(path, "r+b") as f:
    f.write(data)
    f.truncate(len(data))
    f.flush()
    os.fsync(f.fileno())


def read_status(workdir: epath.PathLike) -> Optional[dict]:
  """The content of `<workdir>/status.json`, or None if the run never wrote one."""
  path = epath.Path(workdir) / STATUS_FILE
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except ValueError as e:  # torn: rewritten in place on a full disk (write_status) and cut short
    logging.warning("%s does not parse (%s): the run is read as not finished (a rerun resumes it)", path, e)
    return None
