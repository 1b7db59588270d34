"""Preemption and Ctrl-C, read at step boundaries (`PreemptionNotice`, a context manager around the training loop).

Single process: SIGTERM sets a flag read at step boundaries (the run checkpoints that step and stops), and so does a
first Ctrl-C; a second Ctrl-C aborts at once. With `jax.distributed`, JAX's preemption service owns SIGTERM and
orbax's `reached_preemption(step)` (the checkpointer's) stops every process at the same step. `restorable(handler,
default)` gives back a handler that `signal.getsignal` returned as `signal.signal` can set it again.
"""

import signal
import threading
from typing import Any

import jax
from absl import logging

from train.checkpoint import Checkpointer


def _jax_preemption_service() -> bool:
  """Whether JAX's preemption service runs: it starts with jax.distributed.initialize
  (`jax_enable_preemption_service`, on by default) and installs its own SIGTERM handler."""
  return jax.distributed.is_initialized() and bool(jax.config.jax_enable_preemption_service)


def restorable(handler: Any, default: Any) -> Any:
  """`handler` as signal.signal can set it again (None, a handler not set from Python: `default`)."""
  return default if handler is None else handler


class PreemptionNotice:
  """A preemption notice, or a Ctrl-C, read at step boundaries (a context manager around the training loop).

  `reached(step)`, called after every step by every process, says to checkpoint `step` and stop. Single process:
  SIGTERM sets a flag (the process finishes its step instead of dying), and so does a first SIGINT (Ctrl-C:
  `interrupted` is then True, and the loop says `interrupted`, not `preempted`); a second SIGINT aborts at once
  (KeyboardInterrupt, the previous handler back), for a step that hangs. With jax.distributed: JAX's preemption
  service owns SIGTERM (replacing its handler would hide the notice from the other processes) and orbax's
  `reached_preemption(step)` makes every process stop at the same step; SIGINT keeps its default there (a Ctrl-C
  reaches only the process of its terminal, which would stop alone and leave the others in a collective). Several
  processes without that service: both signals are left alone (processes stopping at different steps would deadlock
  in the next collective).
  """

  def __init__(self, checkpointer: Checkpointer):
    self._checkpointer = checkpointer
    self._received = False
    self.interrupted = False
    self._installed = False
    self._previous: Any = None
    self._previous_int: Any = None

  def __enter__(self) -> "PreemptionNotice":
    self._received = self.interrupted = False
    if _jax_preemption_service():
      logging.info("Preemption: JAX's preemption service (SIGTERM on any process) through orbax")
    elif jax.process_count() > 1:
      logging.warning(
          "Preemption: %d processes without JAX's preemption service (jax_enable_preemption_service=False): "
          "SIGTERM will end the run without a checkpoint",
          jax.process_count(),
      )
    elif threading.current_thread() is threading.main_thread():  # Python only lets the main thread set handlers
      self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
      self._previous_int = signal.signal(signal.SIGINT, self._on_sigint)
      self._installed = True
    return self

  def _on_sigterm(self, signum, frame) -> None:
    del signum, frame
    self._received = True

  def _on_sigint(self, signum, frame) -> None:
    del signum, frame
    if self.interrupted:  # the second Ctrl-C: abort now
      signal.signal(signal.SIGINT, restorable(self._previous_int, signal.default_int_handler))
      raise KeyboardInterrupt
    self._received = self.interrupted = True
    logging.warning("Ctrl-C: the current step will be checkpointed and the run stopped (Ctrl-C again: abort now)")

  def reached(self, step: int) -> bool:
    """True when the run should checkpoint `step` and stop."""
    return self._received or self._checkpointer.reached_preemption(step)

  def __exit__(self, *exc) -> None:
    if self._installed:
      # signal.signal returns None for a handler not set from Python; the default is then the best we can restore.
      signal.signal(signal.SIGTERM, restorable(self._previous, signal.SIG_DFL))
      signal.signal(signal.SIGINT, restorable(self._previous_int, signal.default_int_handler))
      self._installed = False
