"""Trains or analyzes a Transformer from a config file; everything it produces lands in --workdir.

    python main.py --config=configs/t5_init.py                      # train (reruns resume the workdir)
    python main.py --config=configs/xavier_postln.py --config.mode=analyze   # curvature / signal at init
    python main.py --config=configs/t5_init.py --config.optim.warmup_steps=0 --workdir=runs/t5_nowarmup
    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3   # grid × seeds (experiments/)
    python main.py --config=configs/claims/identity_path.py:tiny      # a paper's claim: sweep, verdict, figures
    python main.py --config=configs/claims/edge.py:tiny --workdir=/tmp/edge   # the atlas's cell-by-cell study

Composition only: parse the config, join a multi-process run (every process runs the same command; README "Several
devices and hosts"), (analysis at init), train. Exit status (after writing status.json): 3 diverged, a research outcome,
not a crash; 4 a sweep or claim in which a run crashed (the others all ran; results.jsonl has the errors; a diverged run
in a sweep is an outcome, exit 0); 143 (= 128 + SIGTERM, what a shell reports for a SIGTERM'd job) preempted: SIGTERM or
JAX's preemption notice checkpointed the current step, and rerunning the same command resumes it; 130 (= 128 + SIGINT)
interrupted: a first Ctrl-C checkpointed the current step the same way (a second Ctrl-C aborts at once); 2 a config
error, before any compute: one line naming the key, the value and the valid choices (the traceback with --verbosity=1);
5 a file could not be written (a full disk, a quota): status.json says `failed`, the last good checkpoint stays; 6 a
sweep shard ended with runs of its own share undone, held by live processes elsewhere (it names them).
"""

import difflib
import importlib.util
import logging as logging_std
import os
import sys

import jax
from absl import app, flags, logging
from etils import epath
from ml_collections import config_flags

import curvax
import experiments
import experiments.baseline
import experiments.grid
import experiments.run
import experiments.shard
import train.config
import train.distributed
import train.loop

DEFAULT_CONFIG = "configs/default.py"
EXIT_CONFIG = 2  # a config error, before any compute (one line on stderr)


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


if __name__ == "__main__":  # before the flag is defined: ml_collections applies the overrides to its default then
  check_override_keys(sys.argv[1:])
config_flags.DEFINE_config_file("config", DEFAULT_CONFIG, "Experiment config file.", lock_config=True)
flags.DEFINE_string("workdir", None, "Output directory (default: runs/<config name>); rerunning it resumes.")
FLAGS = flags.FLAGS
MODES = ("train", "analyze", "sweep", "claim", "baseline")
EXIT_DIVERGED = 3
EXIT_CRASHED = 4  # a sweep or claim in which some run crashed (after every other run finished)
EXIT_PREEMPTED = 143  # 128 + SIGTERM
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_WRITE_FAILED = 5  # a file could not be written (a full disk, a quota): status.json says `failed`
EXIT_INCOMPLETE = 6  # a sweep shard ended with runs of its own share undone (held by a live process elsewhere)


REPO = os.path.dirname(os.path.abspath(__file__))


class _ProjectInfoOnly(logging_std.Filter):
  """At the default verbosity, INFO lines come from this project only: libraries (orbax's checkpoint internals,
  jax, grain) log warnings and errors. `--verbosity=1` (or higher) shows every library's INFO and DEBUG lines."""

  def filter(self, record: logging_std.LogRecord) -> bool:
    if record.levelno >= logging_std.WARNING:
      return True
    # The project's own files (a virtual environment inside the checkout holds libraries: not ours).
    return record.pathname.startswith(REPO + os.sep) and "site-packages" not in record.pathname


def main(argv):
  del argv
  if FLAGS.verbosity <= 0:
    logging.get_absl_handler().python_handler.addFilter(_ProjectInfoOnly())  # ABSLHandler delegates to it
  if FLAGS.config.mode not in MODES:
    _config_boundary(_raise(ValueError(f"config.mode={FLAGS.config.mode!r} is invalid; valid: {list(MODES)}")))
  # The config boundary, before any device or data is touched: 'auto' keys derived, every subtree validated.
  config = _config_boundary(lambda: train.config.resolve(FLAGS.config, groups=experiments.GROUPS))
  _config_boundary(lambda: _check_data_dir(config.data))
  config_name = os.path.splitext(os.path.basename(FLAGS["config"].config_filename))[0]
  workdir = FLAGS.workdir or os.fspath(epath.Path("runs") / config_name)  # a URI (gs://...) is kept as it is
  _config_boundary(lambda: _check_workdir(workdir))
  if (
      config.mode in ("sweep", "claim")
      and config.groups["sweep"].parallel > 1
      and config.groups["sweep"].stage == "run"
  ):
    # k runs at once: k processes of this command, each a shard of this one's runs on its own devices (before this
    # process touches a device: JAX would take the GPUs' memory)
    # (a claim's processes train; this one runs its extension rounds and decides: experiments/run.py)
    sweep = config.sweep
    shard = _config_boundary(lambda: experiments.shard.resolve_shard(sweep.shard, sweep.num_shards)[:2])
    _config_boundary(lambda: experiments.grid.cells(config.source))
    if config.mode == "claim":
      run = lambda: experiments.run.run_claim_parallel(config, workdir, sys.argv[1:], sweep.parallel, shard)
    else:
      run = lambda: experiments.shard.run_parallel(sys.argv[1:], sweep.parallel, shard)
    sys.exit(_config_boundary(run))
  # Several hosts: join the run before anything touches a device (train/distributed.py; one process: nothing).
  train.distributed.initialize(config.distributed)
  logging.info("JAX devices: %s; process %d of %d", jax.devices(), jax.process_index(), jax.process_count())
  if config.mode in ("sweep", "claim"):  # every cell × seed in <workdir>/cells/, diverged and crashed runs
    # the grid (keys, values, syntax) and the array's shard, before any compute: one line each (EXIT_CONFIG)
    _config_boundary(lambda: experiments.grid.cells(config.source))
    _config_boundary(lambda: experiments.shard.resolve_shard(config.sweep.shard, config.sweep.num_shards))
    experiments.sweep.use_compilation_cache(config, workdir)  # recorded; the runs share compiled programs
    try:  # the resolved config: its typed groups are not typed again below
      if config.mode == "claim":
        crashed = experiments.run.run_claim(config, workdir)["runs"].get("crashed", 0)
      else:
        crashed = sum(r["outcome"] == "crashed" for r in experiments.run_sweep(config, workdir))
    except train.loop.Preempted as e:
      logging.warning("Sweep %s; rerun the same command to resume", e)
      sys.exit(_exit_code(e))
    except experiments.sweep.SweepIncomplete as e:
      logging.error("Sweep incomplete: %s", e)
      sys.exit(EXIT_INCOMPLETE)
    if crashed:
      logging.error("%d run(s) crashed (tracebacks above; results.jsonl has their errors)", crashed)
      sys.exit(EXIT_CRASHED)
    return
  if config.mode in ("train", "baseline"):  # a rerun resumes: it must train what the workdir's run trained
    _config_boundary(
        lambda: train.config.check_unchanged(
            workdir, config, f"--workdir={workdir}", compare_mode=False, may_change=("train.num_steps",)
        )
    )
  if config.mode == "analyze" and not experiments.sweep.use_compilation_cache(config, workdir):
    curvax.enable_compilation_cache(os.path.join(workdir, "jax_cache"))  # a rerun reads its programs back
  restore_step = None
  if config.mode == "analyze" and config.analysis.checkpoint_step >= 0:
    restore_step = config.analysis.checkpoint_step
  try:
    with train.loop.stops_during_setup(workdir):  # a signal while data, init or analysis compile: one line
      exp = train.loop.setup(config, workdir, restore_step=restore_step)
      if config.mode == "analyze" or (config.analysis.at_init and exp.start_step == 0):
        logging.info("Analysis written to %s", experiments.analyze(exp, workdir))
    if config.mode in ("train", "baseline"):
      train.loop.train_and_evaluate(exp, experiments.step_hooks(exp))  # e.g. train.curvature_every
    if config.mode == "baseline":  # the trained model on the test split: the record (experiments/baseline.py)
      logging.info(
          "Baseline record written to %s", experiments.baseline.write_record(FLAGS.config, workdir, sys.argv[1:])
      )
  except train.loop.Diverged as e:
    logging.error("Run diverged: %s (see %s/status.json)", e, workdir)
    sys.exit(EXIT_DIVERGED)
  except train.loop.Preempted as e:
    logging.warning("Run %s (see %s/status.json)", e, workdir)
    sys.exit(_exit_code(e))
  except train.loop.WriteFailed as e:
    logging.error("Run %s (see %s/status.json); rerun the same command once there is space", e, workdir)
    sys.exit(EXIT_WRITE_FAILED)


def _config_boundary(check):
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


def _check_data_dir(data) -> None:
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


def _check_workdir(workdir: str) -> None:
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


def _raise(error: Exception):
  def check():
    raise error

  return check


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


def _exit_code(stop: train.loop.Preempted) -> int:
  return EXIT_INTERRUPTED if stop.status == "interrupted" else EXIT_PREEMPTED


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
