"""Claim 5 (Xiong et al. 2020, Fig. 3): per-layer gradient norms at init, Post-LN vs Pre-LN, and vs depth.

    python main.py --config=configs/reproduce/grad_norms.py --workdir=runs/reproduce/grad_norms
    python main.py --config=configs/reproduce/grad_norms.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("grad_norms")
