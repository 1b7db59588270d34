"""Shared part of the reproduction configs (configs/reproduce/<claim>.py); not a launchable config itself.

`reproduce_config(claim)` = configs/default.py + Multi30k De→En (data.dir resolved against the repository root:
`../shared/data/multi30k`) + `mode = "reproduce"` + the `reproduce` subtree read by `analysis.reproduce.run_claim`.
"""

import os

import ml_collections

from configs import default

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def reproduce_config(claim: str) -> ml_collections.ConfigDict:
  config = default.get_config()
  config.mode = "reproduce"
  config.data.name = "multi30k"
  config.data.dir = os.path.normpath(os.path.join(REPO_ROOT, "../shared/data/multi30k"))  # read-only is fine
  r = config.reproduce = ml_collections.ConfigDict()
  r.claim = claim  # A key of analysis.reproduce.CLAIMS.
  r.scale = "cpu"  # 'cpu' (the real run: 2 cores, <= ~10 min) | 'tiny' (tests, seconds).
  r.seeds = ()  # Init (and training) seeds; () = the scale's default for this claim.
  r.num_steps = 0  # Training claims: optimizer steps per run (0 = the scale's default).
  return config
