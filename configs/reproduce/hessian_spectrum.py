"""Claim 7 (Zhang & Mackey 2022, slides; docs/science.md §9): Post-LN's Hessian at init has larger top eigenvalues
and a wider spectrum.

    python main.py --config=configs/reproduce/hessian_spectrum.py --workdir=runs/reproduce/hessian_spectrum
    python main.py --config=configs/reproduce/hessian_spectrum.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("hessian_spectrum")
