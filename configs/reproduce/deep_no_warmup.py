"""Claim 10: ReZero / scheduled α / DeepNorm / Admin train without warmup at depth.

    python main.py --config=configs/reproduce/deep_no_warmup.py --workdir=runs/reproduce/deep_no_warmup
    python main.py --config=configs/reproduce/deep_no_warmup.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("deep_no_warmup")
