"""The suite's tiny model, batch and training run, built in one place. A test that depends on other sizes passes them
as overrides (`model_config(d_model=4, max_len=8)`), so every variant reads as its difference from these.

- `model_config`: an encoder-decoder of one layer each, d_model 8, 2 heads, d_ff 8, vocabulary `VOCAB`, unscaled
  embeddings (so a test's numbers do not carry the √d factor), positions up to 16.
- `batch`: random tokens of 3..vocab-1 (0, 1, 2 are padding, EOS, UNK) with some padding in both fields.
- `init`: the model and its variables, initialized under `jax.jit` as the training job does.
- `run_config`: the default ConfigDict at the tiny preset that learns the embedded task in 200 steps on a CPU.
- `sweep_config`: the warmup sweep at the tiny preset, one layer a stack, 4 steps a run, a 2 × 2 grid × 2 seeds.
- `set_keys`: dotted overrides (`"optim.learning_rate"`) on a ConfigDict, as the command line's `--config.x.y`.
"""

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from configs import default
from configs.sweeps import warmup
from models import ModelConfig, get_model

VOCAB = 13
SIZES = dict(
    vocab_size=VOCAB,
    scale_embeddings=False,
    num_encoder_layers=1,
    num_decoder_layers=1,
    d_model=8,
    num_heads=2,
    d_ff=8,
    max_len=16,
)


def model_config(**overrides) -> ModelConfig:
  """The tiny model's frozen config, any field overridden."""
  return ModelConfig(**{**SIZES, **overrides})


def batch(
    b: int = 2,
    s: int = 5,
    t: int = 4,
    seed: int = 0,
    *,
    vocab: int = VOCAB,
    target_pad: int = 1,
    rng: Optional[np.random.Generator] = None,
) -> dict:
  """`{"inputs": [b, s], "targets": [b, t]}` int32 tokens of 3..vocab-1 drawn by `rng` (default: a fresh generator
  seeded `seed`), the last 2 inputs of row 0 and the last `target_pad` targets of row 1 padding (0)."""
  rng = np.random.default_rng(seed) if rng is None else rng
  inputs = rng.integers(3, vocab, (b, s)).astype(np.int32)
  targets = rng.integers(3, vocab, (b, t)).astype(np.int32)
  inputs[0, -2:] = 0
  targets[1, -target_pad:] = 0
  return {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}


def init(config: ModelConfig, example: dict, seed: int = 0) -> tuple[Any, dict]:
  """(model, variables): `config`'s model and `jax.jit(model.init)` at `jax.random.key(seed)` on `example`."""
  model = get_model(config)
  return model, jax.jit(model.init)(jax.random.key(seed), example)


def set_keys(config, overrides: dict):
  """Sets each dotted key of `overrides` (`"train.num_steps"`) on the ConfigDict `config`; returns `config`."""
  for key, value in overrides.items():
    *parents, leaf = key.split(".")
    node = config
    for p in parents:
      node = node[p]
    node[leaf] = value
  return config


def run_config(**overrides):
  """The default config at the tiny preset (2 + 2 layers, d_model 64, Pre-LN, Xavier, Adam with 20 warmup steps at
  5e-3, batches of 32), 200 steps on the embedded task; `overrides` are dotted keys."""
  config = default.get_config()
  m = config.model
  m.preset = "tiny"
  m.num_encoder_layers, m.num_decoder_layers, m.d_model, m.num_heads, m.d_ff = 2, 2, 64, 4, 128
  m.norm_position = "pre"
  config.init.scheme = "xavier"
  config.optim.name, config.optim.schedule = "adam", "linear_warmup"
  config.optim.learning_rate, config.optim.warmup_steps = 5e-3, 20
  config.data.batch_size = config.data.eval_batch_size = 32
  config.data.embedded.num_train, config.data.embedded.num_eval = 4000, 64
  config.data.max_eval_loss_examples = 64
  t = config.train
  t.num_steps, t.log_every, t.eval_every, t.checkpoint_every = 200, 50, 200, 100
  t.num_decode_examples = 64
  return set_keys(config, overrides)


# `sweep_config`'s keys: one encoder and one decoder layer of the tiny preset, 4 steps of batch 8 (each run is
# compile-bound).
SWEEP = {
    "model.preset": "tiny",
    "model.num_encoder_layers": 1,
    "model.num_decoder_layers": 1,
    "data.embedded.num_train": 200,
    "data.embedded.num_eval": 16,
    "data.batch_size": 8,
    "data.eval_batch_size": 8,
    "optim.warmup_steps": 0,
    "train.num_steps": 4,
    "train.log_every": 1,
    "train.eval_every": 4,
    "train.checkpoint_every": 4,
    "train.num_decode_examples": 0,
    # The lr = 1e30 cells diverge: Adam's first update moves every weight by ~lr, and the loss is not finite at step 2.
    "sweep.grid": "optim.learning_rate=0.001,1e30;model.norm_position=post,pre",
    "sweep.seeds": 2,
}


# An analysis section small enough for a sweep test: the top eigenvalue of H from 4 Lanczos steps, nothing else.
ANALYSIS = {
    "analysis.batch_size": 4,
    "analysis.lanczos_steps": 4,
    "analysis.top_k": 1,
    "analysis.bottom_k": 0,
    "analysis.spectrum": False,
    "analysis.trace_probes": 0,
    "analysis.blocks": False,
    "analysis.grad_norms": False,
    "analysis.dtype": "float32",
}


def sweep_config(**overrides):
  """configs/sweeps/warmup.py with `SWEEP`'s keys and then `overrides` (dotted keys)."""
  return set_keys(warmup.get_config(), {**SWEEP, **overrides})
