"""What `train.loop.setup` builds and every runner shares: `Experiment` (the resolved config, data, model, mesh,
train state, optimizer, checkpointer and the step a rerun resumes from) and the global batches every process sees.

`first_global_batch(data)` and `Experiment.batches` gather each process's rows in process order, so a data-dependent
init procedure and an analysis see the same batches whatever the process count.
"""

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

import init as init_lib
from train import checkpoint as checkpoint_lib
from train import config as config_lib
from train.state import TrainState


@dataclasses.dataclass
class Experiment:
  config: config_lib.Config
  workdir: str
  data: Any
  model: Any
  mesh: Any
  state: TrainState
  tx: Any
  schedule: Any
  checkpointer: checkpoint_lib.Checkpointer
  data_state: Optional[dict]
  start_step: int

  def init_variables(self, key: jax.Array) -> dict:
    """Fresh variables from `key` by the experiment's init scheme and procedure (data-dependent ones see the first
    training batch, as at the start of training)."""
    first = first_global_batch(self.data)
    return init_lib.init_params(self.config.init, self.model, key, first)

  def batches(self, n: int, batch_size: Optional[int] = None, *, split: str = "train") -> list[dict]:
    """The first `n` GLOBAL batches of `batch_size` rows (default: the global training batch) of a fresh pass, as
    numpy dicts, the same on every process (each process's rows gathered in process order: the global batches of
    the run, whatever the process count)."""
    it = self.data.train_iter() if split == "train" else iter(self.data.eval_batches())
    if batch_size is None:
      return [_gathered(next(it)) for _ in range(n)]
    rows: list[dict] = []
    while len(rows) < n * batch_size:
      b = _gathered(next(it))
      rows += [{k: v[i] for k, v in b.items()} for i in range(len(next(iter(b.values()))))]
    return [
        {k: np.stack([r[k] for r in rows[j * batch_size : (j + 1) * batch_size]]) for k in rows[0]} for j in range(n)
    ]


def _gathered(local_batch: dict) -> dict:
  """The global batch of which `local_batch` holds this process's rows, as numpy, the same on every process (the
  processes' rows in process order)."""
  if jax.process_count() > 1:
    local_batch = multihost_utils.process_allgather(local_batch, tiled=True)
  return jax.tree.map(np.asarray, local_batch)


def first_global_batch(data) -> dict:
  """The first global training batch of a fresh pass, the same on every process: what an init scheme's
  data-dependent procedure (Admin's profiling pass) sees, so every process computes the same parameters whatever the
  process count."""
  return jax.tree.map(jnp.asarray, _gathered(next(data.train_iter())))
