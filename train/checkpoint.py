"""Checkpoints of the training state and of every process's data iterator state (orbax-checkpoint).

Contract:
  * One checkpoint per step in `<directory>/<step>/` with two items of the same step, so a resumed run sees exactly
    the batches it had not consumed: `state` (any pytree of arrays, typed or raw PRNG keys included) saved with
    `ocp.args.StandardSave`, and `data_state`, one JSON-able dict per process (e.g. a grain iterator's
    `get_state()`) written by grain's orbax handler into `data_state/process_<i>-of-<n>.json` and read back by its
    process. Checkpoints from before the per-process files (one JsonSave by the primary host) still restore alone.
  * Saving rule (`should_save`): every `save_every` steps, at orbax's preemption sync point, or when forced; a step
    already on disk is skipped. Retention keeps the latest `max_to_keep`.
  * Crash safety: orbax writes into `<step>.orbax-checkpoint-tmp-*` and renames it when complete, so a partial
    checkpoint is never listed. By default `save` returns once the checkpoint is on disk; with `asynchronous=True`
    the write overlaps training and `wait()` is the barrier.
  * Resuming (`restore`): onto the template's shapes, dtypes and shardings, from the newest checkpoint that restores
    on every process; newer ones that do not are warned about and moved aside; when none restores a RuntimeError
    names every step tried with its error.
  * A failed save is one error, `CheckpointWriteError`, and a failed restore names its cause
    (`train.checkpoint_errors`).
  * Paths go through `etils.epath`: a relative local directory is made absolute, a URI such as `gs://bucket/run` is
    kept as it is (`epath.Path.absolute()` would turn it into `<cwd>/gs:/bucket/run`).
  * Preemption: `reached_preemption(step)` is orbax's sync point, read by `train.preemption.PreemptionNotice`.
"""

import json
import time
from typing import Any, Optional

import grain.checkpoint
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from jax.experimental import multihost_utils
from orbax.checkpoint import checkpoint_managers

from train import checkpoint_errors as errors
from train.checkpoint_errors import CheckpointWriteError, write_failure_reason

STATE_ITEM = "state"
DATA_ITEM = "data_state"
_LEGACY_DATA_FILE = "metadata"  # the file ocp.JsonCheckpointHandler writes: data_state before grain's
_UNRESTORABLE = "unrestorable"


def checkpoint_directory(directory: epath.PathLike) -> epath.Path:
  """`directory` as an absolute `epath.Path` (orbax wants one); a URI (`gs://...`) is returned unchanged."""
  path = epath.Path(directory)
  # A URI path is_absolute(); only local relative paths are joined to the working directory.
  return path if path.is_absolute() else path.absolute()


class _DataState:
  """One process's data-iterator state in the form grain's CheckpointHandler saves and restores:
  for anything but a grain DatasetIterator it writes `get_state().decode()` and restores with `set_state(bytes)`
  followed by `start_prefetch()`."""

  def __init__(self, state: Optional[dict] = None):
    self.state = state

  def get_state(self) -> bytes:
    return json.dumps(self.state, indent=4).encode()  # the text grain writes for a DatasetIterator's state

  def set_state(self, raw: bytes) -> None:
    self.state = json.loads(raw)

  def start_prefetch(self) -> None:
    pass


def _on_every_process(ok: bool) -> bool:
  """True when `ok` holds on every process (a collective: every process must call it)."""
  if jax.process_count() == 1:
    return ok
  return bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))


class Checkpointer:
  """Saves and restores `(state, data_state)` with an orbax CheckpointManager.

  Args:
    directory: checkpoint root (created if missing); a local path or a URI such as `gs://bucket/run/checkpoints`.
    max_to_keep: number of most recent checkpoints kept; None keeps all.
    save_every: `save` writes at steps that are multiples of this (or when forced).
    asynchronous: let `save` return before the write is finalized; call `wait()` before relying on it (orbax
      also waits for the previous save before starting the next one). Leftover temporary folders of a crashed
      write are deleted when a Checkpointer is opened.
  """

  def __init__(
      self,
      directory: epath.PathLike,
      *,
      max_to_keep: Optional[int] = 3,
      save_every: int = 1000,
      asynchronous: bool = False,
  ):
    if not isinstance(save_every, int) or save_every < 1:
      raise ValueError(f"save_every={save_every!r} is invalid; valid choices: an integer >= 1")
    if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
      raise ValueError(f"max_to_keep={max_to_keep!r} is invalid; valid choices: an integer >= 1 or None")
    self.directory = checkpoint_directory(directory)
    errors.QUIET.install()
    self.save_every = save_every
    self._pending: Optional[int] = None  # the step of the latest save (an asynchronous one may fail later)
    self._asynchronous = asynchronous
    self._name_format = ocp.step.standard_name_format()
    registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
    state_handler = ocp.StandardCheckpointHandler()
    registry.add(STATE_ITEM, ocp.args.StandardSave, state_handler)
    registry.add(STATE_ITEM, ocp.args.StandardRestore, state_handler)
    data_handler = grain.checkpoint.CheckpointHandler()
    registry.add(DATA_ITEM, grain.checkpoint.CheckpointSave, data_handler)
    registry.add(DATA_ITEM, grain.checkpoint.CheckpointRestore, data_handler)
    registry.add(DATA_ITEM, ocp.args.JsonRestore, ocp.JsonCheckpointHandler())  # checkpoints from before grain's
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            save_decision_policy=checkpoint_managers.AnySavePolicy(
                [
                    checkpoint_managers.FixedIntervalPolicy(save_every),
                    checkpoint_managers.PreemptionCheckpointingPolicy(),
                ]
            ),
            preservation_policy=checkpoint_managers.LatestN(max_to_keep),
            step_name_format=self._name_format,
            enable_async_checkpointing=asynchronous,
            cleanup_tmp_directories=True,  # drop partial checkpoints left by a crash
            create=True,
        ),
        handler_registry=registry,
    )

  def latest_step(self) -> Optional[int]:
    """The most recent finalized step on disk, or None."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """All finalized steps on disk, ascending."""
    return sorted(self._manager.all_steps())

  def step_path(self, step: int) -> epath.Path:
    """The directory of checkpoint `step` (whether or not it exists)."""
    return ocp.step.build_step_path(self.directory, self._name_format, int(step))

  def reached_preemption(self, step: int) -> bool:
    """Orbax's preemption sync point: true at the same step on every process once one received a preemption
    notice (JAX's preemption service, with jax.distributed); always false in a single process without it."""
    return self._manager.reached_preemption(int(step))

  def should_save(self, step: int, *, force: bool = False) -> bool:
    """Whether `save(step, force=force)` would write a new checkpoint.

    orbax's save-decision policy `AnySavePolicy([FixedIntervalPolicy(save_every), PreemptionCheckpointingPolicy()])`
    without its default `InitialSavePolicy` (which saves the first step it sees whatever the interval), or `force`
    (the last step, a preemption); a step on disk is skipped, and orbax never saves a step at or below its latest.
    Retention is the preservation policy `LatestN(max_to_keep)`; neither uses the `max_to_keep` / `item_handlers`
    options orbax documents as deprecated (handlers go through a `handler_registry`).
    """
    step = int(step)
    if step in self._manager.all_steps():
      return False
    return force or self._manager.should_save(step)

  def save(self, step: int, state: Any, *, data_state: Optional[dict] = None, force: bool = False) -> bool:
    """Saves `state` (and this process's `data_state`) as step `step` if the saving rule says so.

    Every process calls it with its own `data_state`.

    Args:
      step: the training step (number of updates applied) the state belongs to.
      state: pytree of arrays (jax arrays, typed or raw PRNG keys, numpy arrays).
      data_state: JSON-able dict (this process's data iterator state) or None.
      force: save even if `step` is not a multiple of `save_every`.

    Returns:
      True if a checkpoint was written (finalized on return unless asynchronous).
    """
    step = int(step)
    if data_state is not None:
      if not isinstance(data_state, dict):
        raise ValueError(
            f"data_state of type {type(data_state).__name__} is invalid; valid choices: a "
            "JSON-able dict (e.g. a grain DatasetIterator.get_state()) or None"
        )
      try:
        data_state = json.loads(json.dumps(data_state))  # a copy: an asynchronous save must not see later changes
      except (TypeError, ValueError) as e:
        raise ValueError(f"data_state is not JSON-able ({e}); valid choices: a JSON-able dict") from e
    if not self.should_save(step, force=force):
      return False
    items = {STATE_ITEM: ocp.args.StandardSave(state)}
    if data_state is not None:
      items[DATA_ITEM] = grain.checkpoint.CheckpointSave(_DataState(data_state))
    self._pending = step
    errors.QUIET.active += 1
    try:
      saved = self._manager.save(step, args=ocp.args.Composite(**items), force=True)
      if not self._asynchronous:
        self._manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001 (orbax and tensorstore raise many types; a failed write is one outcome)
      raise self._write_error(step, e) from e
    finally:
      errors.QUIET.active -= 1
    return bool(saved)

  def _write_error(self, step: int, error: BaseException) -> CheckpointWriteError:
    """The one-line error of a failed save of `step`, its partial folder(s) removed first (process 0: the folder is
    shared; a rerun would otherwise find it)."""
    if jax.process_index() == 0:
      for partial in self.directory.glob(f"{step}.orbax-checkpoint-tmp*"):
        try:
          partial.rmtree()
        except OSError as e:  # noqa: PERF203 (a few folders)
          logging.warning("Could not remove the partial checkpoint %s: %s", partial, e)
    errors.QUIET.failed = True
    if not logging.level_debug():
      logging.warning(
          "Checkpoint %d: the tracebacks of orbax's writer threads, which failed the same way, are not shown "
          "(--verbosity=1 shows them)",
          step,
      )
    good = [s for s in self._manager.all_steps() if s != step]
    return CheckpointWriteError(step, str(self.step_path(step)), write_failure_reason(error), max(good, default=None))

  def restore(self, state_template: Any, step: Optional[int] = None) -> Optional[tuple[Any, Any]]:
    """Restores `(state, data_state)` from `step`, or from the newest checkpoint that restores.

    Args:
      state_template: pytree with the structure of the saved state whose leaves are arrays
        or `jax.ShapeDtypeStruct`s; restored leaves get the template's dtype and sharding.
      step: the step to restore (its errors are raised as they are); None = the latest that restores. A newer
        one that does not (a truncated or missing file: a TensorStore or JSON error) is logged as a warning naming
        it and moved aside to `<step>.unrestorable-<unix time>` (kept for inspection, no longer a step to orbax)
        only once an older one restored, so the run can save that step again. With several processes a step counts
        as restored only when it restored on every process (an all-gather of the outcome). When none restores,
        nothing is moved and a RuntimeError names the directory and every step tried with its error (a template
        that matches no checkpoint, e.g. a changed model config, fails that way).

    Returns:
      `(state, data_state)` (data_state is this process's, None if none was saved), or None when the
      directory holds no checkpoint.

    Raises:
      ValueError: `step` is not on disk.
      RuntimeError: step=None and no checkpoint restores (the message names each step tried and its error).
    """
    self._manager.wait_until_finished()
    steps = self.all_steps()
    # Concrete arrays become ShapeDtypeStructs carrying their sharding, so orbax restores
    # directly onto the template's placement and dtype.
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, state_template)
    if step is not None:
      if int(step) not in steps:
        raise ValueError(f"step={step!r} has no checkpoint in {self.directory}; valid choices: {steps}")
      return self._restore_step(int(step), target)
    failed: list[tuple[int, str]] = []
    last_exception: Optional[Exception] = None
    for i, candidate in enumerate(reversed(steps)):
      restored, error = None, None
      try:
        restored = self._restore_step(candidate, target)
      except Exception as e:  # noqa: BLE001 - any error reading a checkpoint sends us to the one before it
        last_exception = e
        error = errors.first_cause(e) + errors.unparsable_json(self.step_path(candidate))
      if _on_every_process(error is None):
        self._set_aside([s for s, _ in failed])
        return restored
      error = error or "restored on this process but not on every process"
      older = f"trying step {steps[-i - 2]}" if i + 1 < len(steps) else "no older checkpoint"
      logging.warning("Checkpoint %s does not restore (%s); %s", self.step_path(candidate), error, older)
      failed.append((candidate, error))
    if not failed:
      return None
    tried = "; ".join(f"step {s}: {e}" for s, e in failed)
    raise RuntimeError(
        f"no checkpoint in {self.directory} restores; tried steps {[s for s, _ in failed]} (newest first): {tried}"
    ) from last_exception

  def _restore_step(self, step: int, target: Any) -> tuple[Any, Optional[dict]]:
    items = {STATE_ITEM: ocp.args.StandardRestore(target)}
    data_dir = self.step_path(step) / DATA_ITEM
    data_args = None
    if (data_dir / _LEGACY_DATA_FILE).exists():
      if jax.process_count() > 1:
        raise ValueError(
            f"{data_dir} holds one data state for all processes (a checkpoint from before per-process data "
            f"states); it cannot resume {jax.process_count()} processes"
        )
      data_args = ocp.args.JsonRestore()
    elif data_dir.exists():
      data_args = grain.checkpoint.CheckpointRestore(_DataState())  # grain raises naming the missing file
    if data_args is not None:
      items[DATA_ITEM] = data_args
    restored = self._manager.restore(step, args=ocp.args.Composite(**items))
    if data_args is None:
      return restored[STATE_ITEM], None
    data = restored[DATA_ITEM]
    return restored[STATE_ITEM], (data.state if isinstance(data, _DataState) else data)

  def _set_aside(self, steps: list[int]) -> None:
    """Renames unrestorable checkpoints to `<step>.unrestorable-<unix time>` (process 0; every process waits)."""
    if not steps:
      return
    if jax.process_index() == 0:
      stamp = int(time.time())
      for step in steps:
        path = self.step_path(step)
        aside = path.parent / f"{path.name}.{_UNRESTORABLE}-{stamp}"
        path.rename(aside)
        logging.warning("Moved the unrestorable checkpoint %s aside to %s", path, aside)
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices("train.checkpoint: unrestorable checkpoints moved aside")
    self._manager.reload()

  def wait(self) -> None:
    """Blocks until any asynchronous save is finalized (CheckpointWriteError if it failed)."""
    errors.QUIET.active += 1
    try:
      self._manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001 (as in save)
      if self._pending is None:  # no save of this checkpointer's: not a write of ours that failed
        raise
      raise self._write_error(self._pending, e) from e
    finally:
      errors.QUIET.active -= 1

  def close(self) -> None:
    """Waits for pending saves and releases orbax's resources."""
    self._manager.wait_until_finished()
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
