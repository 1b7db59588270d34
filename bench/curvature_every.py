"""Benchmark: the cost of one `train.curvature_every` record (λ_max of the training loss's Hessian,
analysis/tracking.py) against one train step, on a config file's model and analysis settings.

    python bench/curvature_every.py --config=configs/t5_init.py            # the quick start (mini preset)
    python bench/curvature_every.py --config=configs/t5_init.py --preset=tiny
    python bench/curvature_every.py --config=configs/t5_init.py --preset=tiny --preconditioned   # + λ_max(P_t⁻¹H)

Prints one JSON line: the parameter count, the analysis dtype and Lanczos steps, the median wall time of a train
step and of a record (after the first of each, which compiles), the first record's time, and their ratio.
"""

import argparse
import importlib
import json
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import experiments  # noqa: E402
from train import loop  # noqa: E402
from train import step as step_lib  # noqa: E402


def _timed(fn, repeats):
  times = []
  for _ in range(repeats):
    t = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t)
  return times


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--config", default="configs/t5_init.py")
  parser.add_argument("--preset", default="")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument(
      "--preconditioned",
      action="store_true",
      help="also λ_max of Adam's preconditioned Hessian (preconditioned_top_k=1)",
  )
  args = parser.parse_args()
  module = importlib.import_module(args.config.removesuffix(".py").replace("/", "."))
  config = module.get_config()
  if args.preset:
    config.model.preset = args.preset
  config.train.curvature_every = 1
  config.analysis.preconditioned_top_k = int(args.preconditioned)
  config.train.num_steps = 10
  with tempfile.TemporaryDirectory() as workdir:
    exp = loop.setup(config, workdir)
    (hook,) = experiments.step_hooks(exp)
    train_step = step_lib.jit_train_step(
        step_lib.make_train_step(exp.model, exp.tx), exp.mesh, jax.tree.map(lambda x: x.sharding, exp.state)
    )
    it = exp.data.train_iter()
    state = {"s": exp.state}

    def one_step():
      state["s"], metrics = train_step(state["s"], step_lib.global_batch(next(it), exp.mesh))
      return metrics["loss"]

    steps = _timed(one_step, args.repeats + 1)
    records = _timed(lambda: hook.fn(1, state["s"], None), args.repeats + 1)
  n = sum(x.size for x in jax.tree.leaves(exp.state.params))
  step_s, record_s = float(np.median(steps[1:])), float(np.median(records[1:]))
  print(
      json.dumps(
          dict(
              config=args.config,
              preset=config.model.preset,
              num_params=int(n),
              analysis_dtype=config.analysis.dtype,
              lanczos_steps=config.analysis.lanczos_steps,
              preconditioned=args.preconditioned,
              analysis_batch_size=config.analysis.batch_size,
              train_batch_size=config.data.batch_size,
              backend=jax.default_backend(),
              train_step_s=step_s,
              first_record_s=records[0],
              record_s=record_s,
              record_over_step=record_s / step_s,
          )
      )
  )


if __name__ == "__main__":
  main()
