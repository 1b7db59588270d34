"""Claim 10: ReZero, scheduled α, DeepNorm and Admin train without warmup at depth (Bachlechner et al. 2020; Su 2021a
§6; Wang et al. 2022; Liu et al. 2020); decided per learning rate at two depths, against Pre-LN.

    python main.py --config=configs/claims/deep_no_warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --config.sweep.cells_dir=runs/atlas/train --workdir=runs/claims/deep_no_warmup   # shares the atlas's runs
    python main.py --config=configs/claims/deep_no_warmup.py:tiny   # seconds, on the synthetic task (the tests)

The design (configs/claims/_atlas_cells.py; measure and verdict: experiments/claims/deep_no_warmup.py):
  arms    the atlas's ReZero (no norm, x + α·F, α = 0 learned), scheduled α (no norm, α 0 → 1 over a third of the
          run, Su 2021a §6), DeepNorm (LN(α·x + F), DeepNet init), Admin (LN(ω ⊙ x + F), ω profiled) and Pre-LN
          (the reference), all without warmup, each at two depths N+N (`DEPTHS`: 6+6, the atlas's and the papers'
          base depth, and 12+12; 1+1 and 2+2 at tiny), one product per method and depth, labelled
          '<method> at <N>+<N>'. The cells at the atlas's depth are the atlas's (same names); the deeper ones set
          model.num_{encoder,decoder}_layers after the method's keys;
  lrs     the atlas's peak lrs (configs/atlas.py LRS; 1e-4 … 3.16e-2 at cpu), a constant lr (warmup 0);
  model   the atlas's (cpu: d = 32, 2 heads, d_ff 128, vocabulary 2000, batch 32, 200 steps; paper: the papers'
          IWSLT14 recipe at d = 512, 20k steps), depth as above;
  seeds   3 at cpu and paper, 1 at tiny; every run has its outcome class (`train.eval_at_init`).
Runs at cpu: 5 methods × 2 depths × 6 lrs × 3 seeds = 180. Estimated cpu time from the atlas's calibration
(configs/atlas.py: the d = 32 6+6 model trains ~11 steps/s alone on 2 cores with ~20 s of overhead per run, ~38 s per
run; at 12+12 twice the compute per step and, a guess, ~30 s of overhead, ~65 s): 90 × 38 s + 90 × 65 s ≈ 2.6 h
from nothing (less: diverged runs stop early); with `--config.sweep.cells_dir=<atlas workdir>/train` the atlas's 2
seeds at 6+6 are read (60 runs), leaving 30 × 38 s + 90 × 65 s ≈ 2 h. The 12+12 half is the knob (`DEPTHS`).
"""

from configs.atlas import NAMES
from configs.claims._atlas_cells import atlas_claim_config, layers, method_keys
from configs.claims._base import check_scale

METHODS = ("rezero", "scheduled", "deepnorm", "admin", "preln")  # configs/atlas.py ARMS keys; Pre-LN the reference
DEPTHS = {"tiny": (1, 2), "cpu": (6, 12), "paper": (6, 12)}  # N of N+N layers


def get_config(scale: str = "cpu"):
  check_scale(scale)
  products = [
      (f"{NAMES[m]} at {n}+{n}", method_keys(m, scale) + layers(n, scale)) for n in DEPTHS[scale] for m in METHODS
  ]
  return atlas_claim_config("deep_no_warmup", scale, products)
