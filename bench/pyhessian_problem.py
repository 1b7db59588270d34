"""The problem bench/vs_pyhessian*.py time and check: the project's encoder-decoder at a bench size, its parameters
(init key 0) and one batch of `BATCH` × `LENGTH` random tokens (seed 0) in an .npz, and each side's loss on it (JAX:
`jax_side`; the PyTorch port, bench/torch_transformer.py: `torch_side`)."""

import numpy as np

BATCH, LENGTH = 16, 32
# The bench's sizes: a model preset's dimensions (models.config.PRESETS) or its own, with a vocabulary. `small` and
# `medium` at 8000 tokens are a realistic subword vocabulary (7.58M and 19.6M parameters); `tiny` keeps today's 1000.
MEDIUM = dict(num_encoder_layers=4, num_decoder_layers=4, d_model=384, num_heads=6, d_ff=1536)
SIZES = {"tiny": ("tiny", 1000), "small": ("small", 8000), "medium": (MEDIUM, 8000)}


def sizes(preset):
  """The model's dimensions and vocabulary at bench size `preset` (a `SIZES` key, or a model preset at 1000)."""
  from models.config import PRESETS  # noqa: PLC0415

  dims, default_vocab = SIZES.get(preset, (preset, 1000))
  dims = PRESETS[dims] if isinstance(dims, str) else dims
  return dict(vocab_size=default_vocab, **dims)


def model_config(preset, dtype="float32"):
  """The model at bench size `preset`, computing and storing its parameters in `dtype` (the check's float64)."""
  from models import ModelConfig  # noqa: PLC0415

  size = sizes(preset)
  vocab = size.pop("vocab_size")
  return ModelConfig.from_config(dict(size, dtype=dtype, param_dtype=dtype), vocab_size=vocab)


def write_problem(preset, path):
  """The JAX params (init key 0) and the batch (seed 0) of `preset`, as an .npz of "/"-joined paths."""
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415

  from models import get_model  # noqa: PLC0415

  model = get_model(model_config(preset))
  rng = np.random.default_rng(0)
  vocab = sizes(preset)["vocab_size"]
  batch = {k: jnp.asarray(rng.integers(1, vocab, (BATCH, LENGTH)), jnp.int32) for k in ("inputs", "targets")}
  params = jax.jit(model.init)(jax.random.key(0), batch)["params"]
  flat = {
      "/".join(str(k.key) for k in path): np.asarray(x) for path, x in jax.tree_util.tree_flatten_with_path(params)[0]
  }
  np.savez(
      path, **{f"params/{k}": v for k, v in flat.items()}, **{f"batch/{k}": np.asarray(v) for k, v in batch.items()}
  )


def read_problem(path):
  data = np.load(path)
  flat = {k[len("params/") :]: data[k] for k in data.files if k.startswith("params/")}
  return flat, data["batch/inputs"], data["batch/targets"]


def jax_side(preset, path):
  import jax.numpy as jnp  # noqa: PLC0415
  from flax import traverse_util  # noqa: PLC0415

  from models import get_model  # noqa: PLC0415
  from train.loss import make_loss_fn  # noqa: PLC0415

  flat, inputs, targets = read_problem(path)
  params = traverse_util.unflatten_dict({tuple(k.split("/")): jnp.asarray(v) for k, v in flat.items()})
  batch = {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}
  model = get_model(model_config(preset))
  return make_loss_fn(model), params, batch, flat


def torch_side(preset, flat, inputs, targets, dtype=None):
  import torch  # noqa: PLC0415
  import torch_transformer  # noqa: PLC0415

  torch.set_num_threads(2)
  model = torch_transformer.build(flat, **sizes(preset), dtype=dtype or torch.float32)
  return model, (torch.from_numpy(np.asarray(inputs, np.int64)), torch.from_numpy(np.asarray(targets, np.int64)))
