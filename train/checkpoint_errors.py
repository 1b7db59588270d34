"""What a failed checkpoint write or restore says: one line each, instead of the echoes of orbax's writer threads.

Contract:
  * A failed save is one error, `CheckpointWriteError` (the step, the path, the OS's reason from
    `write_failure_reason`, the last good checkpoint), instead of ~100 lines of echoes from orbax's writer threads,
    asyncio and tensorstore callbacks and coroutines never awaited (`_QuietWriteFailures`, installed once as `QUIET`;
    `--verbosity=1` shows them all).
  * A failed restore is named by its innermost cause (`first_cause`) and the JSON files of the step that do not parse
    (`unparsable_json`).
"""

import json
import logging as logging_std
import re
import sys
import warnings
from typing import Optional

from absl import logging
from etils import epath

WRITE_FAILURES = (  # what a failed write says, in the OS's words (tensorstore's errors quote them)
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
    "Permission denied",
    "Input/output error",
    "quota",
)


class _QuietWriteFailures(logging_std.Filter):
  """Drops the echoes of a failed checkpoint write: records of orbax's and asyncio's loggers that carry a failed
  write's words (`WRITE_FAILURES`; each writer thread logs the same OS error with a traceback), tensorstore's
  'Event loop is closed' errors raised into orbax's closed loop where no one can catch them (sys.unraisablehook),
  and RuntimeWarnings of coroutines never awaited (warnings.showwarning; timing-dependent), while a save is in
  progress (`active`) or after one failed (`failed`); counts them in `dropped`, and one warning line says so.
  Installed by the first Checkpointer. Shows everything at absl's DEBUG verbosity (`--verbosity=1`)."""

  def __init__(self):
    super().__init__()
    self.active, self.failed, self.dropped = 0, False, 0
    self._previous_unraisable = self._previous_showwarning = None

  def install(self) -> None:
    if self._previous_unraisable is not None:
      return
    logging.get_absl_logger().addFilter(self)  # orbax logs through absl
    logging_std.getLogger("asyncio").addFilter(self)
    self._previous_unraisable = sys.unraisablehook
    sys.unraisablehook = self._unraisable
    self._previous_showwarning = warnings.showwarning
    warnings.showwarning = self._showwarning

  def _quiet(self) -> bool:
    return (self.active > 0 or self.failed) and not logging.level_debug()

  def filter(self, record: logging_std.LogRecord) -> bool:
    if not self._quiet() or record.levelno < logging_std.ERROR:
      return True
    if "orbax" not in record.pathname and record.name != "asyncio":
      return True
    text = record.getMessage() + (repr(record.exc_info[1]) if record.exc_info else "")
    if any(phrase in text for phrase in WRITE_FAILURES):
      self.failed, self.dropped = True, self.dropped + 1
      return False
    return True

  def _unraisable(self, unraisable) -> None:
    if (
        self._quiet()
        and isinstance(unraisable.exc_value, RuntimeError)
        and str(unraisable.exc_value) == "Event loop is closed"
    ):
      self.dropped += 1
      return
    self._previous_unraisable(unraisable)

  def _showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:
    if self._quiet() and issubclass(category, RuntimeWarning) and _NEVER_AWAITED.fullmatch(str(message)):
      self.dropped += 1
      return
    self._previous_showwarning(message, category, filename, lineno, file, line)


_NEVER_AWAITED = re.compile(r"coroutine '[^']*' was never awaited")


QUIET = _QuietWriteFailures()


class CheckpointWriteError(OSError):
  """A checkpoint that could not be written (a full disk, a bucket's quota): the step, the path, the OS's reason and
  the last good checkpoint, in one line. Its partial folder is removed before it is raised."""

  def __init__(self, step: int, path: str, reason: str, last_good: Optional[int]):
    good = f"the last good checkpoint is {last_good}" if last_good is not None else "no checkpoint was written before"
    super().__init__(f"checkpoint {step} could not be written to {path}: {reason}; {good}")
    self.step, self.path, self.reason, self.last_good = step, path, reason, last_good


def write_failure_reason(error: BaseException) -> str:
  """The OS's words for a failed write, from `error` or its causes (tensorstore wraps them in a ValueError whose
  message is a paragraph: the matching phrase with its errno where it says one), else the first line of the error."""
  chain, e = [], error
  while e is not None and len(chain) < 10:
    chain.append(e)
    e = e.__cause__ or e.__context__
  for e in chain:
    if isinstance(e, OSError) and e.strerror:
      return f"{e.strerror} [errno {e.errno}]"
  for e in chain:
    text = str(e)
    for phrase in WRITE_FAILURES:
      if phrase in text:
        code = re.search(r"os_error_code='(\d+)'", text)
        return phrase + (f" [errno {code.group(1)}]" if code else "")
  return f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"


def first_cause(error: BaseException) -> str:
  """The innermost cause of a failed restore, its first line: TensorStore's names the array and the file it read
  ('Error reading "w/0" in OCDBT database at local file ...'), where the outer one prints a binding's repr."""
  seen = []
  while error is not None and error not in seen:
    seen.append(error)
    error = error.__cause__ or error.__context__
  for e in reversed(seen):
    text = str(e).strip()
    if text:
      return f"{type(e).__name__}: {text.splitlines()[0]}"[:500]
  return type(seen[0]).__name__


def unparsable_json(step_dir: epath.Path) -> str:
  """'; <file> does not parse' for each JSON file of a checkpoint (by content: orbax's `_METADATA` has no suffix)
  that does not: a JSON error names no file."""
  bad = []
  # two levels (an item's folder): epath refuses `**` on a bucket
  for path in sorted([*step_dir.glob("*"), *step_dir.glob("*/*")]) if step_dir.exists() else []:
    try:
      if not path.is_file():
        continue
      text = path.read_bytes()
      if text.lstrip()[:1] in (b"{", b"["):
        json.loads(text)
    except (ValueError, OSError):
      bad.append(f"; {path} does not parse")
  return "".join(bad)
