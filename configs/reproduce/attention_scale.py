"""Claim 3: without 1/√d_k attention entropy collapses at init; with it, or T5's init, it does not.

    python main.py --config=configs/reproduce/attention_scale.py --workdir=runs/reproduce/attention_scale
    python main.py --config=configs/reproduce/attention_scale.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("attention_scale")
