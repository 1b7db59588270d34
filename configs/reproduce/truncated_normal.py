"""Claim 1: truncated normal ±2σ realizes 0.8796σ; BERT's 0.02 is 0.0176; Xavier at d = 768 is 0.0361.

    python main.py --config=configs/reproduce/truncated_normal.py --workdir=runs/reproduce/truncated_normal
    python main.py --config=configs/reproduce/truncated_normal.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("truncated_normal")
