"""Trains or analyzes a Transformer from a config file; everything it produces lands in --workdir.

    python main.py --config=configs/t5_init.py                      # train (reruns resume the workdir)
    python main.py --config=configs/xavier_postln.py --config.mode=analyze   # curvature / signal at init
    python main.py --config=configs/t5_init.py --config.optim.warmup_steps=0 --workdir=runs/t5_nowarmup
    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3   # grid × seeds (experiments/)
    python main.py --config=configs/claims/identity_path.py:tiny      # a paper's claim: sweep, verdict, figures
    python main.py --config=configs/atlas.py:tiny --workdir=/tmp/atlas  # the lr × warmup × curvature atlas

Composition only: parse the config, join a multi-process run (every process runs the same command; README "Several
devices and hosts"), (analysis at init), train. Exit status (after writing status.json): 3 diverged, a research outcome,
not a crash; 4 a sweep, claim or atlas in which a run crashed (the others all ran; results.jsonl has the errors; a diverged run
in a sweep is an outcome, exit 0); 143 (= 128 + SIGTERM, what a shell reports for a SIGTERM'd job) preempted: SIGTERM or
JAX's preemption notice checkpointed the current step, and rerunning the same command resumes it.
"""

import logging as logging_std
import os
import sys

import jax
from absl import app, flags, logging
from etils import epath
from ml_collections import config_flags

import curvax
import experiments
import experiments.atlas.run
import train.config
import train.distributed
import train.loop

config_flags.DEFINE_config_file("config", "configs/default.py", "Experiment config file.", lock_config=True)
flags.DEFINE_string("workdir", None, "Output directory (default: runs/<config name>); rerunning it resumes.")
FLAGS = flags.FLAGS
MODES = ("train", "analyze", "sweep", "claim", "atlas")
EXIT_DIVERGED = 3
EXIT_CRASHED = 4  # a sweep or claim in which some run crashed (after every other run finished)
EXIT_PREEMPTED = 143  # 128 + SIGTERM


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
    raise app.UsageError(f"config.mode={FLAGS.config.mode!r} is invalid; valid: {list(MODES)}")
  # The config boundary, before any device or data is touched: 'auto' keys derived, every subtree validated.
  config = train.config.resolve(FLAGS.config, groups=experiments.GROUPS)
  # Several hosts: join the run before anything touches a device (train/distributed.py; one process: nothing).
  train.distributed.initialize(config.distributed)
  config_name = os.path.splitext(os.path.basename(FLAGS["config"].config_filename))[0]
  workdir = FLAGS.workdir or os.fspath(epath.Path("runs") / config_name)  # a URI (gs://...) is kept as it is
  logging.info("JAX devices: %s; process %d of %d", jax.devices(), jax.process_index(), jax.process_count())
  if config.mode in ("sweep", "claim", "atlas"):  # every cell × seed in <workdir>/cells/, diverged and crashed runs
    experiments.sweep.use_compilation_cache(FLAGS.config, workdir)  # recorded; the runs share compiled programs
    try:
      if config.mode == "claim":
        crashed = experiments.claims.run_claim(FLAGS.config, workdir)["runs"].get("crashed", 0)
      elif config.mode == "atlas":
        command = " ".join(["python main.py", *sys.argv[1:]])
        crashed = experiments.atlas.run.run_config(FLAGS.config, workdir, command=command)
      else:
        crashed = sum(r["outcome"] == "crashed" for r in experiments.run_sweep(FLAGS.config, workdir))
    except train.loop.Preempted as e:
      logging.warning("Sweep %s; rerun the same command to resume", e)
      sys.exit(EXIT_PREEMPTED)
    if crashed:
      logging.error("%d run(s) crashed (tracebacks above; results.jsonl has their errors)", crashed)
      sys.exit(EXIT_CRASHED)
    return
  if config.mode == "analyze" and not experiments.sweep.use_compilation_cache(FLAGS.config, workdir):
    curvax.enable_compilation_cache(os.path.join(workdir, "jax_cache"))  # a rerun reads its programs back
  restore_step = None
  if config.mode == "analyze" and config.analysis.checkpoint_step >= 0:
    restore_step = config.analysis.checkpoint_step
  exp = train.loop.setup(config, workdir, restore_step=restore_step)

  if config.mode == "analyze" or (config.analysis.at_init and exp.start_step == 0):
    logging.info("Analysis written to %s", experiments.analyze(exp, workdir))
  if config.mode == "train":
    try:
      train.loop.train_and_evaluate(exp, experiments.step_hooks(exp))  # e.g. train.curvature_every
    except train.loop.Diverged as e:
      logging.error("Run diverged: %s (see %s/status.json)", e, workdir)
      sys.exit(EXIT_DIVERGED)
    except train.loop.Preempted as e:
      logging.warning("Run %s (see %s/status.json)", e, workdir)
      sys.exit(EXIT_PREEMPTED)


if __name__ == "__main__":
  app.run(main)
