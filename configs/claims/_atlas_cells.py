"""Shared part of the claims decided on the atlas's training cells (8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup);
not a launchable config itself.

Each of these claims compares methods without warmup, learning rate by learning rate, so its sweep is a set of the
atlas's cells: configs/atlas.py's `get_config(scale)` (the atlas's model, data, optimizer, run length and
evaluation at every scale) without its `atlas` group, with mode 'claim' and the `claim` group, and `sweep.products`
the claim's named products, each the method's keys, `optim.warmup_steps` 0 and `optim.learning_rate` LRS[scale], in
the key order of configs/atlas.py's grid. A cell's folder is named by its overrides in grid order (experiments/grid.py),
so a claim's cell of an atlas method IS the atlas's cell, and with `sweep.cells_dir` the claim reads the atlas's
runs and only trains what they lack (the third seed, an ablation arm, another depth), while its results.jsonl,
claim.json and figures stay in its own workdir:

    python main.py --config=configs/claims/tfixup.py:cpu --config.data.dir=<Multi30k folder> \\
        --config.sweep.cells_dir=runs/atlas/train --workdir=runs/claims/tfixup

A cell the atlas does not have (an ablation arm, a depth other than the atlas's) is written there too, under its own
name. `SEEDS`: 3 at cpu and paper (a cell a rule decides on needs 3 seeds: experiments/claims/shared/cells.py MIN_SEEDS), 1
at tiny (the tests). Imports only ml_collections and configs/.
"""

import ml_collections

from configs import atlas
from configs.claims._base import check_scale

SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}


def method_keys(method: str, scale: str) -> tuple:
  """The (key, value) pairs of the atlas's `method` (configs/atlas.py ARMS) at `scale`, in its grid's order."""
  return atlas.arm_keys(method, scale)


def layers(n: int, scale: str) -> tuple:
  """The pairs model.num_encoder_layers = model.num_decoder_layers = n, or none at the atlas's own depth (whose cells
  then keep the atlas's names)."""
  if n == atlas.SIZES[scale]["model.num_encoder_layers"] == atlas.SIZES[scale]["model.num_decoder_layers"]:
    return ()
  return (("model.num_encoder_layers", n), ("model.num_decoder_layers", n))


def no_warmup(label: str, keys: tuple, lrs: tuple) -> tuple:
  """The product `label`: `keys`, no warmup, the learning rates `lrs` (the atlas's key order)."""
  return (("arm", label), *keys, ("optim.warmup_steps", 0), ("optim.learning_rate", lrs))


def atlas_claim_config(name: str, scale: str, products: list[tuple[str, tuple]]) -> ml_collections.ConfigDict:
  """The claim `name` at `scale` (module docstring): one product per (label, keys) of `products`, each without
  warmup at the atlas's learning rates."""
  check_scale(scale)
  config = atlas.get_config(scale)
  config.mode = "claim"
  config.claim.name = name
  config.claim.scale = scale
  config.sweep.products = tuple(no_warmup(label, keys, atlas.LRS[scale]) for label, keys in products)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
