"""Claim 6 (Xiong et al. 2020, Fig. 2): Post-LN without warmup trains worse or diverges where Post-LN with warmup and
Pre-LN without warmup train.

    python main.py --config=configs/claims/warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/warmup
    python main.py --config=configs/claims/warmup.py:tiny   # seconds, on the synthetic task (the tests)

Three arms trained alike (configs/claims/_training.py: Adam at lr 1e-3, same seeds and data order): Post-LN with a
linear warmup of T_w steps (`WARMUP[scale]`: 10% of the steps at cpu, 4000 at paper), Post-LN without warmup and
Pre-LN without warmup (a constant lr). Grid, a union because the Pre-LN arm has no warmup twin:
'model.norm_position=post;optim.warmup_steps=<T_w>,0 | model.norm_position=pre;optim.warmup_steps=0'.
measure/verdict/figure: experiments/claims/warmup.py.
"""

from configs.claims._base import check_scale
from configs.claims._training import WARMUP, training_config


def get_config(scale: str = "cpu"):
  check_scale(scale)
  grid = f"model.norm_position=post;optim.warmup_steps={WARMUP[scale]},0 | model.norm_position=pre;optim.warmup_steps=0"
  return training_config("warmup", scale, grid)
