"""The atlas's command line: `python -m experiments.atlas --config=configs/atlas.py:<scale> --workdir=<folder>`.

Runs or resumes the atlas's parts (experiments.atlas.run: `--parts`, comma-separated, default every part in the
order init, train, length, trace, width, depth, transfer) and rewrites `<--out>/ATLAS.md` after every cell; `--report_only`
runs nothing and rewrites the report from what the workdir holds. A bad `--parts` is a usage error (exit 1) before
any compute. Exit status 143 on preemption (rerun to resume), 4 if a run crashed (the others all ran; the report
names it).
"""

import os
import sys

import jax
from absl import app, flags, logging
from ml_collections import config_flags

import train.loop
from experiments.atlas import axes, report, run

config_flags.DEFINE_config_file("config", "configs/atlas.py:tiny", "The atlas config and scale.", lock_config=True)
flags.DEFINE_string("workdir", "runs/atlas", "The atlas's runs (init/ and train/ sweeps); rerunning resumes it.")
flags.DEFINE_string("out", "reports", "Where ATLAS.md and atlas/ (figures, atlas.json) are written.")
flags.DEFINE_bool("report_only", False, "Run nothing: rewrite the report from the workdir.")
flags.DEFINE_string("parts", ",".join(axes.PARTS), f"The parts to run, in this order (comma-separated; {axes.PARTS}).")
flags.DEFINE_string(
    "compilation_cache",
    "auto",
    "JAX's persistent compilation cache ('auto': <workdir>/jax_cache; '' off): the at-init analyses of a method's "
    "seeds and the eval steps of its cells compile the same programs, which dominate a small model's time on a CPU.",
)
FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    parts = axes.parse_parts(FLAGS.parts)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  config = FLAGS.config
  cache = os.path.join(FLAGS.workdir, "jax_cache") if FLAGS.compilation_cache == "auto" else FLAGS.compilation_cache
  if cache and not FLAGS.report_only:
    jax.config.update("jax_compilation_cache_dir", cache)
  command = " ".join(["python -m experiments.atlas", *sys.argv[1:]])
  if FLAGS.report_only:
    report.write(config, FLAGS.workdir, FLAGS.out, command=command)
    return
  try:
    measured = run.run_atlas(config, FLAGS.workdir, FLAGS.out, parts=parts, command=command)
  except train.loop.Preempted as e:
    logging.warning("Atlas %s; rerun the same command to resume", e)
    sys.exit(143)
  logging.info("Atlas written to %s/ATLAS.md", FLAGS.out)
  outcomes = [o for r in measured["methods"].values() for w in r["runs"].values() for os_ in w["outcomes"] for o in os_]
  crashed = outcomes.count("crashed") + sum(a["outcomes"]["crashed"] for a in measured["axes"].values())
  if crashed:
    logging.error("%d run(s) crashed (ATLAS.md and each run's sweep_record.json name the error)", crashed)
    sys.exit(4)


if __name__ == "__main__":
  app.run(main)
