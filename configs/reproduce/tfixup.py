"""Claim 8 (T-Fixup): no LayerNorm, no warmup, a deeper model trains where Post-LN without warmup fails.

    python main.py --config=configs/reproduce/tfixup.py --workdir=runs/reproduce/tfixup
    python main.py --config=configs/reproduce/tfixup.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("tfixup")
