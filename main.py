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

import os
import sys

import jax
from absl import app, flags, logging
from etils import epath
from ml_collections import config_flags

import curvax
import experiments
import experiments.baseline
import experiments.command
import train.cli
import train.config
import train.distributed
import train.loop
import train.stops
from train.cli import config_boundary

if __name__ == "__main__":  # before the flag is defined: ml_collections applies the overrides to its default then
  train.cli.check_override_keys(sys.argv[1:])
config_flags.DEFINE_config_file("config", train.cli.DEFAULT_CONFIG, "Experiment config file.", lock_config=True)
flags.DEFINE_string("workdir", None, "Output directory (default: runs/<config name>); rerunning it resumes.")
FLAGS = flags.FLAGS
MODES = ("train", "analyze", "sweep", "claim", "baseline")  # exit statuses: train/cli.py


def main(argv):
  del argv
  if FLAGS.verbosity <= 0:
    logging.get_absl_handler().python_handler.addFilter(train.cli.ProjectInfoOnly())  # ABSLHandler delegates to it
  config_boundary(lambda: train.cli.check_mode(FLAGS.config.mode, MODES))
  # The config boundary, before any device or data is touched: 'auto' keys derived, every subtree validated.
  config = config_boundary(lambda: train.config.resolve(FLAGS.config, groups=experiments.GROUPS))
  config_boundary(lambda: train.cli.check_data_dir(config.data))
  config_name = os.path.splitext(os.path.basename(FLAGS["config"].config_filename))[0]
  workdir = FLAGS.workdir or os.fspath(epath.Path("runs") / config_name)  # a URI (gs://...) is kept as it is
  config_boundary(lambda: train.cli.check_workdir(workdir))
  if experiments.command.parallel(config):  # k processes of this command, before this one touches a device
    sys.exit(experiments.command.run_parallel(config, workdir, sys.argv[1:]))
  # Several hosts: join the run before anything touches a device (train/distributed.py; one process: nothing).
  train.distributed.initialize(config.distributed)
  logging.info("JAX devices: %s; process %d of %d", jax.devices(), jax.process_index(), jax.process_count())
  if config.mode in ("sweep", "claim"):  # every cell × seed in <workdir>/cells/, diverged and crashed runs
    sys.exit(experiments.command.run_sweep_or_claim(config, workdir))
  if config.mode in ("train", "baseline"):  # a rerun resumes: it must train what the workdir's run trained
    config_boundary(
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
    with train.stops.stops_during_setup(workdir):  # a signal while data, init or analysis compile: one line
      exp = train.loop.setup(config, workdir, restore_step=restore_step)
      if config.mode == "analyze" or (config.analysis.at_init and exp.start_step == 0):
        logging.info("Analysis written to %s", experiments.analyze(exp, workdir))
    if config.mode in ("train", "baseline"):
      train.loop.train_and_evaluate(exp, experiments.step_hooks(exp))  # e.g. train.curvature_every
    if config.mode == "baseline":  # the trained model on the test split: the record (experiments/baseline.py)
      logging.info(
          "Baseline record written to %s", experiments.baseline.write_record(FLAGS.config, workdir, sys.argv[1:])
      )
  except train.stops.Diverged as e:
    logging.error("Run diverged: %s (see %s/status.json)", e, workdir)
    sys.exit(train.cli.EXIT_DIVERGED)
  except train.stops.Preempted as e:
    logging.warning("Run %s (see %s/status.json)", e, workdir)
    sys.exit(train.cli.exit_code(e))
  except train.stops.WriteFailed as e:
    logging.error("Run %s (see %s/status.json); rerun the same command once there is space", e, workdir)
    sys.exit(train.cli.EXIT_WRITE_FAILED)


if __name__ == "__main__":
  app.run(main, flags_parser=train.cli.parse_flags)
