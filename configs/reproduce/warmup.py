"""Claim 6 (Xiong et al. 2020, Fig. 2): Post-LN needs warmup, Pre-LN does not (Multi30k, several seeds).

    python main.py --config=configs/reproduce/warmup.py --workdir=runs/reproduce/warmup
    python main.py --config=configs/reproduce/warmup.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("warmup")
