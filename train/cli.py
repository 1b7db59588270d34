"""The command line's checks before any compute (main.py's): each bad input is one line on stderr naming the flag
or key, the value and the valid choices, and exit status `EXIT_CONFIG`, the traceback only with --verbosity=1.

  * `check_override_keys(argv)`: an override of a key the config does not have, before absl parses the flags;
  * `parse_flags(argv)`: absl's flag parsing (a flag of the wrong type, a config file missing or that does not load);
  * `config_boundary(check)`: a ValueError of `check()` (a key's value, the mode `check_mode`, the data folder
    `check_data_dir`, the workdir `check_workdir`);
  * `ProjectInfoOnly`: at the default verbosity, INFO lines come from this project only.
The command's exit statuses are here too (`EXIT_*`; `exit_code(stop)` for a run stopped by a signal).
"""

import difflib
import importlib.util
import logging as logging_std
import os
import sys

from absl import flags

import train.config
from train import stops

FLAGS = flags.FLAGS
DEFAULT_CONFIG = "configs/default.py"
EXIT_CONFIG = 2  # a config error, before any compute (one line on stderr)
EXIT_DIVERGED = 3  # a non-finite loss or gradient: a research outcome, not a crash
EXIT_CRASHED = 4  # a sweep or claim in which some run crashed (after every other run finished)
EXIT_PREEMPTED = 143  # 128 + SIGTERM
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_WRITE_FAILED = 5  # a file could not be written (a full disk, a quota): status.json says `failed`
EXIT_INCOMPLETE = 6  # a sweep shard ended with runs of its own share undone (held by a live process elsewhere)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: this file is train/cli.py


def check_override_keys(argv: list[str]) -> None:
  """An override of a key the config does not have (`--config.model.nonexistent=1`) exits with one line in the
  config boundary's format naming the closest valid keys, before absl parses the flags (ml_collections' own error is
  a double traceback ending in `AttributeError: "'nonexistent'"`)."""
  overrides = [a[len("--config.") :].partition("=") for a in argv if a.startswith("--config.")]
  if not overrides:
    return
  spec = DEFAULT_CONFIG
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      spec = a.split("=", 1)[1]
    elif a == "--config" and i + 1 < len(argv):
      spec = argv[i + 1]
  path, _, arg = spec.partition(":")
  module_spec = importlib.util.spec_from_file_location("_config_for_keys", path)
  if module_spec is None or not os.path.exists(path):
    return  # absl's own error names a missing config file
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  config = module.get_config(arg) if arg else module.get_config()
  valid = list(train.config.leaves(config.to_dict()))
  for key, eq, value in overrides:
    if key not in valid:
      close = (
          difflib.get_close_matches(key, valid, n=3, cutoff=0.5)
          or [k for k in valid if k.startswith(key.split(".")[0] + ".")][:3]
      )
      print(
          f"main.py: config.{key}{eq}{value} is invalid (no such key in {path}); valid: "
          + (", ".join(f"config.{k}" for k in close) or "a key of configs/default.py"),
          file=sys.stderr,
      )
      sys.exit(EXIT_CONFIG)


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, its errors one line on stderr and EXIT_CONFIG (a flag of the wrong type, a config file
  that is missing or does not load), the traceback only with --verbosity=1."""
  spec = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), DEFAULT_CONFIG)
  path = spec.partition(":")[0]
  if not os.path.isfile(path):
    print(f"main.py: --config={spec} is invalid (no such file); valid: a config file, e.g. configs/t5_init.py", file=sys.stderr)  # fmt: skip
    sys.exit(EXIT_CONFIG)
  try:
    rest = FLAGS(argv)
    FLAGS.config  # noqa: B018  (config_flags loads the file lazily: a file that does not load fails here)
    return rest
  except (flags.Error, OSError, SyntaxError, AttributeError, ImportError) as e:
    if any(a in ("--verbosity=1", "-v=1") or a.startswith("--verbosity=") and a[12:].isdigit() and int(a[12:]) >= 1
           for a in argv):  # fmt: skip
      raise
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    message = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"  # a config's own traceback: its last line
    print(f"main.py: {message}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def config_boundary(check):
  """`check()`'s result; a ValueError it raises (a bad key's value, two keys that cannot go together, a workdir
  trained with another config) is one line on stderr and exit status EXIT_CONFIG, the traceback only at
  `--verbosity=1` or higher."""
  try:
    return check()
  except ValueError as e:
    if FLAGS.verbosity >= 1:
      raise
    print(f"main.py: {e}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def exit_code(stop: stops.Preempted) -> int:
  return EXIT_INTERRUPTED if stop.status == "interrupted" else EXIT_PREEMPTED


def check_mode(mode: str, modes: tuple[str, ...]) -> None:
  """A `config.mode` that is none of `modes` (main.py's) is a config error."""
  if mode not in modes:
    raise ValueError(f"config.mode={mode!r} is invalid; valid: {list(modes)}")


def check_data_dir(data) -> None:
  """A local data folder that does not exist, or whose splits are missing, empty or misaligned, is a config error
  here, before any device is touched (the config's own checks accept any path: a study's config is also built and
  checked on a machine without the data)."""
  if data.name == "multi30k" and data.dir and "://" not in data.dir and not os.path.isdir(data.dir):
    raise ValueError(
        f"config.data.dir={data.dir!r} is invalid (no such folder); valid: the folder with Multi30k's "
        "{train,val,test_2016_flickr}.{de,en}.gz"
    )
  if data.name == "multi30k" and data.dir and "://" not in data.dir:
    import train.data.multi30k  # noqa: PLC0415 (the data layer, only to read the splits' line counts)

    train.data.multi30k.check(data.dir, data.source_lang, data.target_lang)  # missing, empty or misaligned splits


def check_workdir(workdir: str) -> None:
  """A local --workdir that is a file, or a folder (or its nearest existing parent) this process cannot write, is a
  config error before any compute."""
  if "://" in workdir:
    return
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ValueError(f"--workdir={workdir!r} is invalid (a file, not a folder); valid: a folder to write the run in")
  parent = os.path.abspath(workdir)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.access(parent, os.W_OK):
    raise ValueError(
        f"--workdir={workdir!r} is invalid ({parent} is not writable); valid: a folder this user can write"
    )


class ProjectInfoOnly(logging_std.Filter):
  """At the default verbosity, INFO lines come from this project only: libraries (orbax's checkpoint internals,
  jax, grain) log warnings and errors. `--verbosity=1` (or higher) shows every library's INFO and DEBUG lines."""

  def filter(self, record: logging_std.LogRecord) -> bool:
    if record.levelno >= logging_std.WARNING:
      return True
    # The project's own files (a virtual environment inside the checkout holds libraries: not ours).
    return record.pathname.startswith(REPO + os.sep) and "site-packages" not in record.pathname
