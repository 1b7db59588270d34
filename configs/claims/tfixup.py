"""Claim 8 (Huang et al. 2020): T-Fixup, without LayerNorm and without warmup, trains where Post-LN without warmup
fails; decided per learning rate on the atlas's cells.

    python main.py --config=configs/claims/tfixup.py:cpu --config.data.dir=<Multi30k folder> \\
        --config.sweep.cells_dir=runs/atlas/train --workdir=runs/claims/tfixup   # shares the atlas's runs
    python main.py --config=configs/claims/tfixup.py:tiny   # seconds, on the synthetic task (the tests)

The design (configs/claims/_atlas_cells.py; measure and verdict: experiments/claims/tfixup.py):
  arms    the atlas's 'Post-LN + Xavier' (Post-LN, Xavier init) and 'T-Fixup' (no norm, T-Fixup's depth-scaled
          init, init/schemes.py), both without warmup;
  lrs     the atlas's peak lrs (configs/atlas.py LRS: 1e-4 … 3.16e-2 at cpu, factor √10), a constant lr (warmup 0);
  model   the atlas's at each scale (cpu: 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece vocabulary 2000, batch
          32, 200 steps, validation loss on 256 pairs at steps 0 and 200; paper: the papers' IWSLT14 recipe, 20k
          steps);
  seeds   3 at cpu and paper, 1 at tiny; every run evaluated at step 0 (`train.eval_at_init`) so that it has its
          outcome class (analysis/outcomes.py).
Runs at cpu: 2 arms × 6 lrs × 3 seeds = 36, ≈ 25 min on 2 cores, less with `--config.sweep.cells_dir`
(docs/design_log.md).
"""

from configs.atlas import NAMES
from configs.claims._atlas_cells import atlas_claim_config, method_keys
from configs.claims._base import check_scale

METHODS = ("postln_xavier", "tfixup")  # configs/atlas.py ARMS keys


def get_config(scale: str = "cpu"):
  check_scale(scale)  # before the atlas's tables are read at it
  return atlas_claim_config("tfixup", scale, [(NAMES[m], method_keys(m, scale)) for m in METHODS])
