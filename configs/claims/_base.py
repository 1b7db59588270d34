"""Shared part of the claim configs (configs/claims/<name>.py); not a launchable config itself.

A claim config is a sweep config (configs/default.py's `sweep` group: grid, seeds, what to analyze) with mode 'claim'
and the `claim` group, sized by its scale, chosen by the config string:

    python main.py --config=configs/claims/<name>.py:tiny                                  # tests: seconds, synthetic
    python main.py --config=configs/claims/<name>.py:cpu --config.data.dir=<Multi30k folder>  # the committed report
    python main.py --config=configs/claims/<name>.py:paper --config.data.dir=<folder>      # the papers' sizes (GPU/TPU)

`tiny` trains on the offline synthetic task (data.name='embedded'); `cpu` and `paper` on Multi30k De→En, whose folder
is given by `--config.data.dir` (no default: nothing outside the repository is assumed). Every key can still be set
on the command line after the scale's values. Imports only ml_collections (a config loads no library code).
"""

from typing import Any, Mapping

import ml_collections

from configs import default

SCALES = ("tiny", "cpu", "paper")


def set_keys(config: ml_collections.ConfigDict, values: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """Sets dotted keys (`'optim.learning_rate': 1e-3`) of `config`; a key that is not in it is a KeyError."""
  for key, value in values.items():
    *parents, leaf = key.split(".")
    node = config
    for p in parents:
      node = node[p]
    if leaf not in node:
      raise KeyError(f"{key} is not a config key (configs/default.py)")
    node[leaf] = value
  return config


def check_scale(scale: str) -> str:
  """`scale` if it is one of SCALES; else the error naming the config string and the choices."""
  if scale not in SCALES:
    raise ValueError(f"config string (the claim's scale) {scale!r} is invalid; valid: {list(SCALES)}")
  return scale


def claim_config(name: str, scale: str, sizes: Mapping[str, Mapping[str, Any]]) -> ml_collections.ConfigDict:
  """configs/default.py + mode 'claim' + `claim` group + the data of `scale` + `sizes[scale]` (dotted keys)."""
  check_scale(scale)
  config = default.get_config()
  config.mode = "claim"
  config.claim.name = name
  config.claim.scale = scale
  if scale == "tiny":
    set_keys(
        config,
        {
            "data.name": "embedded",
            "data.embedded.num_train": 512,
            "data.embedded.num_eval": 64,
            "data.num_eval_examples": 16,
        },
    )
  else:
    config.data.name = "multi30k"
    config.data.dir = ""  # the user's folder: --config.data.dir
    config.sweep.compilation_cache = "auto"  # the seeds of a cell compile the same programs (experiments/sweep.py)
  return set_keys(config, sizes[scale])
