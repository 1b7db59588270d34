"""One train step on a mesh of all (8 simulated) devices vs a mesh of 1 device, same global batch.

Run by tests/test_loop.py with XLA_FLAGS=--xla_force_host_platform_device_count=8; prints a JSON line.
"""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from tests import tiny  # noqa: E402
from train import loop  # noqa: E402
from train import step as step_lib


def one_step(mesh, exp, batch):
  # The step donates its state: give it a copy so exp.state survives for the second mesh.
  state = jax.device_put(jax.tree.map(lambda x: x.copy(), exp.state), step_lib.replicated(mesh))
  train_step = step_lib.jit_train_step(step_lib.make_train_step(exp.model, exp.tx), mesh)
  new_state, metrics = train_step(state, step_lib.global_batch(batch, mesh))
  return float(metrics["loss"]), jax.tree.map(np.asarray, new_state.params)


def main(workdir):
  # SGD without momentum at lr 1: the parameter change is exactly the gradient.
  config = tiny.run_config(
      **{
          "optim.name": "sgd",
          "optim.momentum": 0.0,
          "optim.schedule": "constant",
          "optim.learning_rate": 1.0,
          "optim.warmup_steps": 0,
      }
  )
  exp = loop.setup(config, workdir)
  batch = exp.batches(1)[0]
  before = jax.tree.map(np.asarray, exp.state.params)
  loss8, params8 = one_step(step_lib.make_mesh(), exp, batch)
  loss1, params1 = one_step(step_lib.make_mesh(jax.devices()[:1]), exp, batch)
  g8 = np.concatenate([(b - a).ravel() for a, b in zip(jax.tree.leaves(params8), jax.tree.leaves(before))])
  g1 = np.concatenate([(b - a).ravel() for a, b in zip(jax.tree.leaves(params1), jax.tree.leaves(before))])
  print(
      json.dumps(
          {
              "num_devices": len(jax.devices()),
              "loss_diff": abs(loss8 - loss1),
              "grad_rel_diff": float(np.abs(g8 - g1).max() / np.abs(g1).max()),
          }
      )
  )


if __name__ == "__main__":
  main(sys.argv[1])
