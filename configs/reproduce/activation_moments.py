"""Claim 2: SELU's constants from the moment equations; normalized ReLU/GELU keep E[x²] ≈ 1 over 20 layers.

    python main.py --config=configs/reproduce/activation_moments.py --workdir=runs/reproduce/activation_moments
    python main.py --config=configs/reproduce/activation_moments.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("activation_moments")
