"""Checkpoints of the training state and the data iterator state (orbax-checkpoint).

Contract:
  * One checkpoint per step in `<directory>/<step>/`, with two items: `state` (any pytree of
    arrays: a flax.struct dataclass with step, params, optax opt_state, extra variables and
    an rng key) saved with `ocp.args.StandardSave`, and `data_state` (a JSON-able dict, e.g.
    a grain dataset iterator's `get_state()`) saved with `ocp.args.JsonSave`. Both belong
    to the same step, so a resumed run sees exactly the batches it had not consumed.
  * PRNG keys: orbax 0.12.8 saves typed keys (`jax.random.key`) by their key data and
    restores them as typed keys when the template leaf is a typed key (or its
    ShapeDtypeStruct); raw uint32 keys (`jax.random.PRNGKey`) are plain arrays. Both are
    tested.
  * Saving rule: `save(step, ...)` writes when `step % save_every == 0` or `force=True`
    (use it for the last step); a step already on disk is skipped. The rule is decided here
    rather than by orbax's `save_interval_steps` because orbax also saves the first step it
    sees whatever the interval. `max_to_keep` keeps the most recent checkpoints.
  * Crash safety: orbax writes into `<step>.orbax-checkpoint-tmp-*` and renames it when
    complete, so a partial checkpoint is never listed; leftovers are deleted when a
    Checkpointer is opened. By default (`asynchronous=False`) `save` returns only after the
    checkpoint is finalized on disk, so a crash right after `save` keeps it. With
    `asynchronous=True` the write overlaps training; call `wait()` before relying on it
    (orbax also waits for the previous save before starting the next one).
  * Resuming: a new `Checkpointer` on the same directory sees `latest_step()` of the
    previous run; `restore(template)` restores it onto the template's shapes, dtypes and
    shardings.
"""

import json
import os
from typing import Any, Optional

import jax
import orbax.checkpoint as ocp

STATE_ITEM = "state"
DATA_ITEM = "data_state"


class Checkpointer:
  """Saves and restores `(state, data_state)` with an orbax CheckpointManager.

  Args:
    directory: checkpoint root (created if missing; made absolute, as orbax requires).
    max_to_keep: number of most recent checkpoints kept; None keeps all.
    save_every: `save` writes at steps that are multiples of this (or when forced).
    asynchronous: let `save` return before the write is finalized (see module docstring).
  """

  def __init__(
      self,
      directory: str,
      *,
      max_to_keep: Optional[int] = 3,
      save_every: int = 1000,
      asynchronous: bool = False,
  ):
    if not isinstance(save_every, int) or save_every < 1:
      raise ValueError(f"save_every={save_every!r} is invalid; valid choices: an integer >= 1")
    if max_to_keep is not None and (not isinstance(max_to_keep, int) or max_to_keep < 1):
      raise ValueError(f"max_to_keep={max_to_keep!r} is invalid; valid choices: an integer >= 1 or None")
    self.directory = os.path.abspath(directory)
    self.save_every = save_every
    self._asynchronous = asynchronous
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            save_interval_steps=1,  # the interval rule is applied in `save`
            enable_async_checkpointing=asynchronous,
            cleanup_tmp_directories=True,  # drop partial checkpoints left by a crash
            create=True,
        ),
        # Declaring the handlers lets item_metadata() tell whether data_state was saved.
        item_handlers={
            STATE_ITEM: ocp.StandardCheckpointHandler(),
            DATA_ITEM: ocp.JsonCheckpointHandler(),
        },
    )

  def latest_step(self) -> Optional[int]:
    """The most recent finalized step on disk, or None."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    """All finalized steps on disk, ascending."""
    return sorted(self._manager.all_steps())

  def should_save(self, step: int, *, force: bool = False) -> bool:
    """Whether `save(step, force=force)` would write a new checkpoint."""
    return (force or int(step) % self.save_every == 0) and int(step) not in self.all_steps()

  def save(self, step: int, state: Any, *, data_state: Optional[dict] = None, force: bool = False) -> bool:
    """Saves `state` (and `data_state`) as step `step` if the saving rule says so.

    Args:
      step: the training step (number of updates applied) the state belongs to.
      state: pytree of arrays (jax arrays, typed or raw PRNG keys, numpy arrays).
      data_state: JSON-able dict (the data iterator's state) or None.
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
        json.dumps(data_state)
      except (TypeError, ValueError) as e:
        raise ValueError(f"data_state is not JSON-able ({e}); valid choices: a JSON-able dict") from e
    if not self.should_save(step, force=force):
      return False
    items = {STATE_ITEM: ocp.args.StandardSave(state)}
    if data_state is not None:
      items[DATA_ITEM] = ocp.args.JsonSave(data_state)
    saved = self._manager.save(step, args=ocp.args.Composite(**items), force=True)
    if not self._asynchronous:
      self._manager.wait_until_finished()
    return bool(saved)

  def restore(self, state_template: Any, step: Optional[int] = None) -> Optional[tuple[Any, Any]]:
    """Restores `(state, data_state)` from `step` (default: the latest).

    Args:
      state_template: pytree with the structure of the saved state whose leaves are arrays
        or `jax.ShapeDtypeStruct`s; restored leaves get the template's dtype and sharding.
      step: the step to restore; None = latest.

    Returns:
      `(state, data_state)` (data_state is None if none was saved), or None when the
      directory holds no checkpoint.
    """
    self._manager.wait_until_finished()
    steps = self.all_steps()
    if step is None:
      if not steps:
        return None
      step = steps[-1]
    elif int(step) not in steps:
      raise ValueError(f"step={step!r} has no checkpoint in {self.directory}; valid choices: {steps}")
    step = int(step)
    # Concrete arrays become ShapeDtypeStructs carrying their sharding, so orbax restores
    # directly onto the template's placement and dtype.
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, state_template)
    items = {STATE_ITEM: ocp.args.StandardRestore(target)}
    has_data = DATA_ITEM in self._manager.item_metadata(step)
    if has_data:
      items[DATA_ITEM] = ocp.args.JsonRestore()
    restored = self._manager.restore(step, args=ocp.args.Composite(**items))
    return restored[STATE_ITEM], (restored[DATA_ITEM] if has_data else None)

  def wait(self) -> None:
    """Blocks until any asynchronous save is finalized."""
    self._manager.wait_until_finished()

  def close(self) -> None:
    """Waits for pending saves and releases orbax's resources."""
    self._manager.wait_until_finished()
    self._manager.close()

  def __enter__(self) -> "Checkpointer":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
