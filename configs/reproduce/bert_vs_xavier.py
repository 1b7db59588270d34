"""Claim 9: BERT's 0.02 vs Xavier in Post-LN: stronger identity path at init, trains better without warmup.

    python main.py --config=configs/reproduce/bert_vs_xavier.py --workdir=runs/reproduce/bert_vs_xavier
    python main.py --config=configs/reproduce/bert_vs_xavier.py --config.reproduce.scale=tiny   # seconds, as in the tests

Writes result.json (numbers, thresholds, verdict, reason) and the figure(s) into the workdir.
"""

from configs.reproduce._base import reproduce_config


def get_config():
  return reproduce_config("bert_vs_xavier")
