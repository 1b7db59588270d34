"""What the at-init claims are measured on: Multi30k (or random-token) batches, models and their initial variables.

Contract: `batches(config, scale, workdir, n, batch_size)` returns `n` numpy batches {"inputs", "targets"} and the
vocabulary size: at the 'cpu' scale from Multi30k De→En through `train.data.build` (the real pipeline; the
SentencePiece model is cached in `<workdir>/tokenizer/` because the shared data folder is read-only), at the
'tiny' scale random tokens (tests must not train a tokenizer). `model_and_variables(model_overrides, init_overrides,
vocab_size, seed, batch)` builds the model from `configs.default`'s model/init subtrees plus the overrides, through
the same boundaries as training (`ModelConfig.from_config`, `init.init_params`).
"""

import os
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

import init as init_lib
import models
from train import data as data_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_VOCAB = 512


def resolve_data_dir(path: str) -> str:
  """`data.dir` relative to the repository root (configs write `../shared/data/multi30k`)."""
  return path if os.path.isabs(path) else os.path.normpath(os.path.join(REPO_ROOT, path))


def data_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A copy of `config.data` with `dir` resolved against the repository root."""
  d = ml_collections.ConfigDict(config.data.to_dict())
  d.dir = resolve_data_dir(d.dir)
  return d


def batches(
    config: ml_collections.ConfigDict, scale: str, workdir: str, n: int, batch_size: int, length: int = 32
) -> tuple[list[dict], int, str]:
  """`n` batches of `batch_size` sentence pairs, the vocabulary size and a description of the data.

  Args:
    config: the full experiment config (its `data` subtree names Multi30k).
    scale: 'cpu' reads Multi30k's first training batches (fixed shuffle seed); 'tiny' draws random tokens.
    workdir: where the tokenizer is cached.
    n: number of batches.
    batch_size: rows per batch.
    length: padded source/target length at the 'tiny' scale (Multi30k uses data.max_*_length).
  """
  if scale == "tiny":
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
      lens = rng.integers(length // 2, length + 1, size=(2, batch_size))
      b = {}
      for i, k in enumerate(("inputs", "targets")):
        tok = rng.integers(3, TINY_VOCAB, size=(batch_size, length)).astype(np.int32)
        tok[np.arange(length)[None, :] >= lens[i][:, None]] = 0
        b[k] = tok
      out.append(b)
    return out, TINY_VOCAB, f"random tokens (vocab {TINY_VOCAB}), {n}×{batch_size} rows of length ≤ {length}"
  dc = data_config(config)
  dc.batch_size = batch_size
  data = data_lib.build(dc, workdir=workdir)
  it = data.train_iter()
  out = [{k: np.asarray(v) for k, v in next(it).items() if k in ("inputs", "targets")} for _ in range(n)]
  return (
      out,
      data.tokenizer.vocab_size,
      (
          f"Multi30k {dc.source_lang}→{dc.target_lang} train, {n}×{batch_size} "
          f"pairs ≤ {dc.max_source_length} tokens, SentencePiece vocab "
          f"{data.tokenizer.vocab_size}"
      ),
  )


def model_and_variables(
    config: ml_collections.ConfigDict,
    model_overrides: dict,
    init_overrides: dict,
    vocab_size: int,
    seed: int,
    batch: dict,
) -> tuple[Any, dict]:
  """(model, variables): `config.model` / `config.init` updated with the overrides, built like training builds them.

  Args:
    config: the full experiment config (only its `model` and `init` subtrees are read; it is not modified).
    model_overrides: model keys to change, e.g. {"norm_position": "pre"}.
    init_overrides: init keys to change, e.g. {"scheme": "t5"}.
    vocab_size: the tokenizer's vocabulary size.
    seed: init seed (`jax.random.key(seed)`).
    batch: a batch (shapes, and Admin's profiling pass).
  """
  model_cfg = ml_collections.ConfigDict(config.model.to_dict())
  model_cfg.update(model_overrides)
  init_cfg = ml_collections.ConfigDict(config.init.to_dict())
  init_cfg.update(init_overrides)
  mc = models.ModelConfig.from_config(model_cfg, vocab_size=vocab_size)
  model = models.get_model(mc)
  variables = init_lib.init_params(init_cfg, model, jax.random.key(seed), jax.tree.map(jnp.asarray, batch))
  return model, variables
