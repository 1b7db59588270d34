"""Experiment trackers beside metrics.jsonl: the `metrics` config group, and W&B / Trackio runs fed the same scalars.

Contract:
  * `config.metrics.writers` (configs/default.py) names where a run's scalars go: 'jsonl' (metrics.jsonl, always: a
    rerun, a sweep and its reports read it), 'tensorboard' (event files), 'wandb' (Weights & Biases) and 'trackio'
    (Hugging Face's local-first tracker). Neither tracker is a dependency of this project: each is imported when a run
    opens it, never by importing the project, and a writer whose library is not installed is a config error before
    any compute (`MetricsConfig`, at the config boundary), naming the key, the value and the `pip install` to run.
  * `open_trackers(metrics, workdir, config)`: on process 0 only (the others get none), one tracker run per writer,
    its id derived from the workdir alone (`run_id`), so a rerun that resumes the workdir continues its own tracker
    run (W&B: `id=`, `resume="allow"`; Trackio, which resumes a run by its name: `name=`, `resume="allow"`); grouped
    by `metrics.group` (a sweep sets its own name there, experiments/sweep.py); the resolved config as the run's
    config. `train.metrics.MetricWriter` logs every record it writes to metrics.jsonl to each tracker, at the same
    step, as `<split>/<name>` (the sweep's naming of final metrics), and finishes them when it closes.
  * Registry: `TRACKERS` (name -> class), `get_tracker(name)`; a tracker is `(workdir, project, group, config)` with
    `log(step, scalars)` and `close()`.
W&B drops what a resumed run logs at a step below the last it recorded (its steps only grow): the records of the
steps between a run's last checkpoint and the kill that the rerun repeats stay as first logged there (metrics.jsonl
drops and rewrites them).
"""

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import re
from typing import Any, Mapping, Optional

from configs.schema import Section, invalid

WRITERS = ("jsonl", "tensorboard", "wandb", "trackio")
_PIP = {"wandb": "wandb", "trackio": "trackio"}  # writer -> the package that provides it


@dataclasses.dataclass(frozen=True)
class MetricsConfig(Section):
  """The `config.metrics` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "metrics"
  writers: Any
  project: str
  group: str

  def __post_init__(self):
    writers = self.writers
    if isinstance(writers, list):
      writers = tuple(writers)
      object.__setattr__(self, "writers", writers)
    valid = f"a tuple of {list(WRITERS)} holding 'jsonl' (reruns, sweeps and reports read metrics.jsonl), no repeats"
    if (
        not isinstance(writers, tuple)
        or not all(isinstance(w, str) and w in WRITERS for w in writers)
        or "jsonl" not in writers
        or len(set(writers)) != len(writers)
    ):
      raise invalid("metrics.writers", self.writers, valid)
    for name in writers:
      if name in _PIP and importlib.util.find_spec(name) is None:
        raise invalid(
            "metrics.writers",
            self.writers,
            f"writers whose library is installed (pip install {_PIP[name]}; not a dependency of this project)",
            f"{name!r} needs the {_PIP[name]} package, which is not installed",
        )
    if not self.project:
      raise invalid("metrics.project", self.project, "a non-empty tracker project name")


def default_metrics_config() -> MetricsConfig:
  """configs/default.py's `metrics` group (for a run whose config predates the group)."""
  from configs import default  # noqa: PLC0415 (the defaults live there; loading them imports no library)

  return MetricsConfig.from_config(default.get_config().metrics)


def canonical_workdir(workdir: Any) -> str:
  """The workdir as one string whatever the form it was given in: a URI unchanged (trailing '/' dropped), a local
  path absolute and normalized."""
  path = os.fspath(workdir)
  if "://" in path:
    return path.rstrip("/")
  return os.path.normpath(os.path.abspath(path))


def run_id(workdir: Any) -> str:
  """The tracker run's id and name of the run in `workdir`: its last two path parts (readable: a sweep's
  `<cell>_seed_<s>`) and 10 hex digits of the SHA-256 of the whole canonical path (unique), in the characters W&B
  allows in an id. The same workdir gives the same id in every process, on every rerun."""
  path = canonical_workdir(workdir)
  tail = "_".join(path.replace("://", "/").rstrip("/").split("/")[-2:])
  tail = re.sub(r"[^A-Za-z0-9._-]", "-", tail)[-48:].strip("-_.") or "run"
  return f"{tail}-{hashlib.sha256(path.encode()).hexdigest()[:10]}"


class WandbTracker:
  """A Weights & Biases run (`wandb.init(id=run_id, resume="allow", ...)`); its local files under the workdir when
  that is local (`<workdir>/wandb/`), else wandb's default folder. `WANDB_MODE=offline` works as usual."""

  def __init__(self, workdir: Any, project: str, group: str, config: Mapping[str, Any]):
    wandb = importlib.import_module("wandb")
    local = "://" not in os.fspath(workdir)
    self._run = wandb.init(
        project=project,
        id=run_id(workdir),
        name=run_id(workdir),
        resume="allow",
        group=group or None,
        config=dict(config),
        dir=canonical_workdir(workdir) if local else None,
    )

  def log(self, step: int, scalars: Mapping[str, float]) -> None:
    self._run.log(dict(scalars), step=step)

  def close(self) -> None:
    self._run.finish()


class TrackioTracker:
  """A Trackio run: `trackio.init(name=run_id, resume="allow", ...)` (Trackio resumes a run by its name within the
  project); local (its own SQLite database) unless TRACKIO_SPACE_ID names a Space."""

  def __init__(self, workdir: Any, project: str, group: str, config: Mapping[str, Any]):
    trackio = importlib.import_module("trackio")
    self._run = trackio.init(
        project=project, name=run_id(workdir), group=group or None, config=dict(config), resume="allow"
    )

  def log(self, step: int, scalars: Mapping[str, float]) -> None:
    self._run.log(dict(scalars), step=step)

  def close(self) -> None:
    self._run.finish()


TRACKERS = {"wandb": WandbTracker, "trackio": TrackioTracker}


def get_tracker(name: str) -> type:
  if name not in TRACKERS:
    raise ValueError(f"tracker {name!r} is unknown; valid: {sorted(TRACKERS)}")
  return TRACKERS[name]


def open_trackers(
    metrics: Optional[MetricsConfig], workdir: Any, config: Mapping[str, Any], *, primary: Optional[bool] = None
) -> list:
  """One open tracker per tracker writer of `metrics.writers` (module docstring); [] on every process but 0 (or
  with `primary=False`). `metrics` None: the defaults (no tracker)."""
  metrics = metrics or default_metrics_config()
  if primary is None:
    import jax  # noqa: PLC0415 (the process index, only when the caller does not say)

    primary = jax.process_index() == 0
  if not primary:
    return []
  return [
      get_tracker(name)(workdir, metrics.project, metrics.group, config) for name in metrics.writers if name in TRACKERS
  ]
