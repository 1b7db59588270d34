"""The benchmarked models at named sizes, each as one `Problem`: params, a random batch, and the three functions the
curvature operators take (the loss, the outputs for the Gauss–Newton, per-example losses for the empirical Fisher).

Models (`MODELS`, a registry: `get_problem(model, size)` raises listing the valid names):
  * `mlp`: a ReLU MLP classifier on Gaussian inputs, 10 classes (a Flax Linen module defined here);
  * `cnn`: two 3×3 convolutions with ReLU and 2×2 average pooling, then a dense readout, on random 32×32×3 images,
    10 classes (Flax Linen, defined here);
  * `encoder_decoder`, `decoder`: the project's Transformer (`models.get_model`) at the `tiny` and `mini` presets,
    on random tokens (no padding), token cross-entropy (`train.loss`);
  * `decoder` also at `gpt2_small` (GPT-2 small's shape: 12 pre-LN layers, d 768, 12 heads, GELU, learned positions,
    tied embeddings, vocabulary 50257, sequence 1024, batch 8: 124.4M parameters; Radford et al. 2019, Table 2) and
    `gpt2_toy` (the same architecture shrunk to run on a CPU in seconds): the GPU run's sizes (bench/gpu.py).

Every model's sizes are data (`SIZES`); `dtype` is the compute dtype of the Transformers (float32 or bfloat16,
parameters float32), so the operators' products run in it while the vectors stay float32.
"""

import dataclasses
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from models import ModelConfig, get_model
from train.loss import make_logits_fn, make_loss_fn

CLASSES = 10
SIZES = {
    "mlp": {
        "tiny": dict(features=64, width=128, depth=2, batch=128),
        "mini": dict(features=256, width=512, depth=2, batch=256),
    },
    "cnn": {"tiny": dict(channels=(8, 16), batch=32), "mini": dict(channels=(16, 32), batch=64)},
    "encoder_decoder": {
        "tiny": dict(preset="tiny", vocab=1000, batch=8, length=32),
        "mini": dict(preset="mini", vocab=1000, batch=8, length=32),
    },
    "decoder": {
        "tiny": dict(preset="tiny", vocab=1000, batch=8, length=32),
        "mini": dict(preset="mini", vocab=1000, batch=8, length=32),
        "gpt2_small": dict(d_model=768, layers=12, heads=12, d_ff=3072, vocab=50257, batch=8, length=1024),
        "gpt2_toy": dict(d_model=8, layers=1, heads=2, d_ff=16, vocab=32, batch=2, length=8),
    },
}
TIMING_SIZES = ("tiny", "mini")  # the sizes of the per-model timing files (bench/models_timing.py)


@dataclasses.dataclass(frozen=True)
class Problem:
  """One model at one size: `loss_fn(params, batch) -> scalar`, `outputs_fn(params, batch) -> [..., C]` logits
  (the Gauss–Newton's map, softmax cross-entropy), `per_example_fn(params, batch) -> [N]` losses whose mean is the
  loss (the empirical Fisher's), `output_weights(batch)` the positions' weights for the Gauss–Newton (None: all)."""

  model: str
  size: str
  params: Any
  batch: Any
  loss_fn: Callable
  outputs_fn: Callable
  per_example_fn: Callable
  output_weights: Any
  description: dict


class MLP(nn.Module):
  width: int
  depth: int

  @nn.compact
  def __call__(self, x_BxF):
    for _ in range(self.depth):
      x_BxF = nn.relu(nn.Dense(self.width)(x_BxF))
    return nn.Dense(CLASSES)(x_BxF)


class CNN(nn.Module):
  channels: tuple

  @nn.compact
  def __call__(self, x_BxHxWxC):
    for c in self.channels:
      x_BxHxWxC = nn.avg_pool(nn.relu(nn.Conv(c, (3, 3))(x_BxHxWxC)), (2, 2), strides=(2, 2))
    return nn.Dense(CLASSES)(x_BxHxWxC.reshape(x_BxHxWxC.shape[0], -1))


def _classifier(name, size, module, x, seed):
  """A Linen classifier on (x, labels): mean softmax cross-entropy; labels uniform over the classes."""
  labels = jnp.asarray(np.random.default_rng(seed + 1).integers(0, CLASSES, x.shape[0]), jnp.int32)
  batch = (x, labels)
  params = jax.jit(module.init)(jax.random.key(seed), x)["params"]
  outputs_fn = lambda p, b: module.apply({"params": p}, b[0])
  per_example_fn = lambda p, b: optax.softmax_cross_entropy_with_integer_labels(outputs_fn(p, b), b[1])
  loss_fn = lambda p, b: jnp.mean(per_example_fn(p, b))
  desc = dict(SIZES[name][size], input_shape=list(x.shape[1:]), classes=CLASSES)
  return Problem(name, size, params, batch, loss_fn, outputs_fn, per_example_fn, None, desc)


def _mlp(size, dtype, seed):
  s = SIZES["mlp"][size]
  x = jnp.asarray(np.random.default_rng(seed).standard_normal((s["batch"], s["features"])), jnp.float32)
  return _classifier("mlp", size, MLP(s["width"], s["depth"]), x, seed)


def _cnn(size, dtype, seed):
  s = SIZES["cnn"][size]
  x = jnp.asarray(np.random.default_rng(seed).standard_normal((s["batch"], 32, 32, 3)), jnp.float32)
  return _classifier("cnn", size, CNN(tuple(s["channels"])), x, seed)


def _config(arch, s, dtype):
  if "preset" in s:
    values = dict(preset=s["preset"], arch=arch, max_len=max(256, s["length"]))
    if arch == "decoder":
      values["num_encoder_layers"] = 0
  else:  # GPT-2's block (Radford et al. 2019, §2.3): pre-LN, GELU, learned positions, tied input/output embedding
    values = dict(
        arch=arch,
        num_encoder_layers=0,
        num_decoder_layers=s["layers"],
        d_model=s["d_model"],
        num_heads=s["heads"],
        d_ff=s["d_ff"],
        max_len=s["length"],
        norm_position="pre",
        activation="gelu",
        position="learned",
    )
  return ModelConfig.from_config(dict(values, dtype=jnp.dtype(dtype).name), vocab_size=s["vocab"])


def _per_sequence_losses(logits_fn):
  """Mean token cross-entropy of each sequence over its non-padding targets: [B] losses whose mean is the loss
  when every sequence has as many targets (random tokens, no padding)."""

  def per_example_fn(params, batch):
    logits = logits_fn(params, batch).astype(jnp.float32)
    weights = (batch["targets"] > 0).astype(jnp.float32)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    return jnp.sum(losses * weights, axis=1) / jnp.maximum(jnp.sum(weights, axis=1), 1.0)

  return per_example_fn


def _transformer(arch):
  def build(size, dtype, seed):
    s = SIZES[arch][size]
    cfg = _config(arch, s, dtype)
    model = get_model(cfg)
    rng = np.random.default_rng(seed)
    keys = ("inputs", "targets") if arch == "encoder_decoder" else ("targets",)
    batch = {k: jnp.asarray(rng.integers(1, s["vocab"], (s["batch"], s["length"])), jnp.int32) for k in keys}
    params = jax.jit(model.init)(jax.random.key(seed), batch)["params"]
    logits_fn = make_logits_fn(model)
    desc = dict(
        s,
        arch=arch,
        config={
            k: cfg.to_dict()[k]
            for k in (
                "num_encoder_layers",
                "num_decoder_layers",
                "d_model",
                "num_heads",
                "d_ff",
                "norm_position",
                "activation",
                "position",
            )
        },
    )
    return Problem(
        arch,
        size,
        params,
        batch,
        make_loss_fn(model),
        logits_fn,
        _per_sequence_losses(logits_fn),
        lambda b: b["targets"] > 0,
        desc,
    )

  return build


MODELS = {
    "mlp": _mlp,
    "cnn": _cnn,
    "encoder_decoder": _transformer("encoder_decoder"),
    "decoder": _transformer("decoder"),
}


def get_problem(model: str, size: str, dtype: Any = jnp.float32, seed: int = 0) -> Problem:
  """The `Problem` of `model` at `size`, parameters from `jax.random.key(seed)`, data from numpy seed `seed`."""
  if model not in MODELS:
    raise ValueError(f"model={model!r} is not a benchmarked model; valid: {sorted(MODELS)}")
  if size not in SIZES[model]:
    raise ValueError(f"size={size!r} is not a size of {model}; valid: {sorted(SIZES[model])}")
  if model in ("mlp", "cnn") and jnp.dtype(dtype) != jnp.float32:
    raise ValueError(f"dtype={jnp.dtype(dtype).name} for {model}: the Linen classifiers here run in float32 only")
  return MODELS[model](size, dtype, seed)
