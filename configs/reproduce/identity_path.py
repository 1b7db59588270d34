"""Claim 4: Post-LN's identity path decays like 2^{-l/2} at init, Pre-LN's does not.

    python main.py --config=configs/reproduce/identity_path.py --workdir=runs/reproduce/identity_path
    python main.py --config=configs/reproduce/identity_path.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("identity_path")
