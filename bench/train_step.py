"""Benchmark: tokens/s and achieved FLOP/s of the train step on the `small` preset, against this machine's
measured float32 matmul FLOP/s in the same run (the ratio is the figure to watch; absolute numbers depend on the
machine).

    python bench/train_step.py [--steps 20] [--batch 32] [--length 32]

FLOPs per step come from XLA's cost analysis of the compiled step (forward + backward + optimizer).
"""

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import init as init_lib  # noqa: E402
import models  # noqa: E402
from configs import default  # noqa: E402
from train import optim  # noqa: E402
from train import step as step_lib
from train.state import TrainState  # noqa: E402


def matmul_flops_per_s(n: int = 2048, repeats: int = 5) -> float:
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    t = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - t)
  return 2 * n**3 / best


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--length", type=int, default=32)
  args = parser.parse_args()

  config = default.get_config()
  config.model.preset = "small"
  vocab = 8000
  model = models.get_model(models.ModelConfig.from_config(config.model, vocab_size=vocab))
  rng = np.random.default_rng(0)
  batch = {k: jnp.asarray(rng.integers(3, vocab, (args.batch, args.length)), jnp.int32) for k in ("inputs", "targets")}
  variables = init_lib.init_params(config.init, model, jax.random.key(0), batch)
  params = variables.pop("params")
  tx, _ = optim.make_optimizer(config.optim, total_steps=1000)
  mesh = step_lib.make_mesh()
  state = jax.device_put(
      TrainState(jnp.asarray(0, jnp.int32), params, tx.init(params), variables, jax.random.key(1)),
      step_lib.replicated(mesh),
  )
  train_step = step_lib.jit_train_step(step_lib.make_train_step(model, tx), mesh)
  gbatch = step_lib.global_batch(batch, mesh)
  compiled = train_step.lower(state, gbatch).compile()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  flops = float(cost.get("flops", float("nan")))

  state, m = compiled(state, gbatch)
  jax.block_until_ready(m["loss"])
  t = time.perf_counter()
  for _ in range(args.steps):
    state, m = compiled(state, gbatch)
  jax.block_until_ready(m["loss"])
  step_time = (time.perf_counter() - t) / args.steps
  peak = matmul_flops_per_s()
  tokens = args.batch * args.length * 2
  result = {
      "preset": "small",
      "batch": args.batch,
      "length": args.length,
      "step_time_s": step_time,
      "tokens_per_s": tokens / step_time,
      "flops_per_step": flops,
      "achieved_flops_per_s": flops / step_time,
      "matmul_flops_per_s": peak,
      "ratio_achieved_to_matmul": flops / step_time / peak,
      "devices": str(jax.devices()),
  }
  for k, v in result.items():
    print(f"{k:28s} {v:.4g}" if isinstance(v, float) else f"{k:28s} {v}")
  print(json.dumps(result))


if __name__ == "__main__":
  main()
