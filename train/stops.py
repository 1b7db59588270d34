"""How a run stops short of its last step, and why: the exceptions `train.loop` raises (main.py turns each into an exit
status, a sweep records or stops on it) and `stops_during_setup`, which gives SIGTERM and Ctrl-C before the loop's own
handlers (data, tokenizer, init, compiling, the at-init analysis) a true status.json and one line.

`Preempted` (SIGTERM or orbax's preemption notice) and its subclasses `Interrupted` (a first Ctrl-C), `Aborted` (a
second Ctrl-C) and `SetupStopped` (a signal during setup) all mean "rerun the workdir to resume"; `Diverged` (a
non-finite loss or gradient) is a research outcome; `WriteFailed` a file that could not be written.
"""

import contextlib
import signal
import threading
from typing import Optional

import jax
import orbax.checkpoint as ocp
from etils import epath

from train import metrics as metrics_lib
from train import preemption


class Diverged(RuntimeError):
  """Raised when a step produced a non-finite loss or gradient; status.json has the details."""


class Preempted(RuntimeError):
  """Raised after a preemption notice once the current step is checkpointed; status.json says `preempted`."""

  status = "preempted"

  def __init__(self, step: int):
    super().__init__(f"{self.status} at step {step}; checkpoint {step} saved, rerun the workdir to resume")
    self.step = step


class WriteFailed(RuntimeError):
  """Raised when the run could not write its files (a checkpoint, metrics.jsonl, events: a full disk, a bucket's
  quota); status.json says `failed` with the reason where it can still be written. The last good checkpoint is
  intact (a partial checkpoint folder is removed): rerun the workdir with space to resume from it."""

  def __init__(self, step: int, error: OSError):
    super().__init__(f"failed at step {step}: {error}")
    self.step, self.error = step, error


class Interrupted(Preempted):
  """Raised after a first Ctrl-C (SIGINT, single process) once the current step is checkpointed; status.json says
  `interrupted`. A Preempted: whatever stops on a preemption (a sweep) stops on it too."""

  status = "interrupted"


class Aborted(Interrupted):
  """Raised when a second Ctrl-C aborted a step (a step that hangs): status.json says `interrupted` with no checkpoint
  of that step; a rerun resumes from the last checkpoint."""

  def __init__(self, step: int, last_checkpoint: Optional[int]):
    RuntimeError.__init__(
        self,
        f"interrupted at step {step} by a second Ctrl-C, not checkpointed; a rerun "
        + (
            f"resumes from checkpoint {last_checkpoint}"
            if last_checkpoint is not None
            else "starts over (no checkpoint)"
        ),
    )
    self.step = step


class SetupStopped(Preempted):
  """Raised when SIGTERM or Ctrl-C arrived during setup or the at-init analysis (data, tokenizer, init, compiling),
  before the loop's own handlers: status.json says `preempted` / `interrupted` at the step a rerun resumes from."""

  def __init__(self, status: str, step: int):
    RuntimeError.__init__(self, f"{status} during setup, before step {step} trained; rerun the workdir to resume")
    self.status, self.step = status, step


class _Sigterm(BaseException):
  """SIGTERM during setup, raised from its handler (a BaseException: no `except Exception` in setup swallows it)."""


def _raise_sigterm(signum, frame) -> None:
  del signum, frame
  raise _Sigterm


@contextlib.contextmanager
def stops_during_setup(workdir: str):
  """Turns SIGTERM and Ctrl-C inside the block into `SetupStopped` with a true status.json (`preempted` /
  `interrupted`, at the last checkpoint's step or 0, pid and host), one line instead of a traceback. A run whose
  status says it ended (finished, diverged) keeps it: an analysis of a trained workdir stopped midway changes
  nothing. Single process on the main thread only, as `preemption.PreemptionNotice`; elsewhere signals keep theirs."""
  own = jax.process_count() == 1 and threading.current_thread() is threading.main_thread()
  previous = signal.signal(signal.SIGTERM, _raise_sigterm) if own else None
  try:
    yield
  except (KeyboardInterrupt, _Sigterm) as e:
    status = "interrupted" if isinstance(e, KeyboardInterrupt) else "preempted"
    steps = ocp.utils.checkpoint_steps(epath.Path(workdir) / "checkpoints") if epath.Path(workdir).exists() else []
    step = max(steps, default=0)
    old = metrics_lib.read_status(workdir) or {}
    if old.get("status") not in ("finished", "diverged"):
      with contextlib.suppress(OSError):
        epath.Path(workdir).mkdir(parents=True, exist_ok=True)  # a signal before setup made it
        metrics_lib.write_status(workdir, status, step, reason=f"{status} during setup", last_checkpoint=step or None)
    raise SetupStopped(status, step) from None
  finally:
    if own:
      signal.signal(signal.SIGTERM, preemption.restorable(previous, signal.SIG_DFL))
