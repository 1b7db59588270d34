"""Claim 8 (Huang et al. 2020): T-Fixup — no LayerNorm, no warmup — trains where Post-LN without warmup fails.

    python main.py --config=configs/claims/tfixup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/tfixup
    python main.py --config=configs/claims/tfixup.py:tiny   # seconds, on the synthetic task (the tests)

Two arms trained alike without warmup (configs/claims/_training.py: Adam at a constant lr 1e-3, same seeds and data
order): T-Fixup (init.scheme 'tfixup': its depth-scaled Xavier init, every norm removed) and Post-LN (Xavier init).
Grid, a union because the arms differ in several keys:
'model.norm_type=none;model.norm_position=none;init.scheme=tfixup | model.norm_position=post'.
measure/verdict/figure: experiments/claims/tfixup.py.
"""

from configs.claims._training import training_config

GRID = "model.norm_type=none;model.norm_position=none;init.scheme=tfixup | model.norm_position=post"


def get_config(scale: str = "cpu"):
  return training_config("tfixup", scale, GRID)
