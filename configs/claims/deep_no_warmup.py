"""Claim 10: DeepNorm and Admin train where Post-LN at the same depth fails, ReZero where the plain un-normalized
residual fails, without warmup (Wang et al. 2022; Liu et al. 2020; Bachlechner et al. 2020); decided per learning
rate at two depths.

    python main.py --config=configs/claims/deep_no_warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/deep_no_warmup
    python main.py --config=configs/claims/deep_no_warmup.py:tiny   # seconds, on the synthetic task (the tests)

The design (configs/claims/_atlas_cells.py; measure and verdict: experiments/claims/deep_no_warmup.py):
  arms    the atlas's ReZero (no norm, x + α·F, α = 0 learned), DeepNorm (LN(α·x + F), DeepNet init) and Admin
          (LN(ω ⊙ x + F), ω profiled), each beside its paper's baseline at the same depth: Post-LN + Xavier (DeepNorm,
          Admin) and the plain residual x + F without a norm, Xavier (ReZero); all without warmup, at two depths N+N
          (`DEPTHS`: 6+6, the atlas's and the papers' base depth, and 12+12; 1+1 and 2+2 at tiny), one product per
          arm and depth, labelled '<arm> at <N>+<N>';
  lrs     `LRS`: the atlas's peak lrs from 1e-3 up at cpu (below it every arm trains or undertrains in 200 steps:
          the seeds-0–2 record), a constant lr (warmup 0);
  model   the atlas's (cpu: d = 32, 2 heads, d_ff 128, vocabulary 2000, batch 32, 200 steps), depth as above;
  seeds   3 fresh ones, 3–5, at cpu and paper (the rule was stated after seeds 0–2 were seen: issue 40), 1 at tiny.
Runs at cpu: 5 arms × 2 depths × 4 lrs × 3 seeds = 120, ≈ 1.8 h on 2 cores (docs/design_log.md).
"""

from configs import atlas
from configs.claims._atlas_cells import atlas_claim_config, layers, method_keys, no_warmup
from configs.claims._base import check_scale

METHODS = ("rezero", "deepnorm", "admin", "postln_xavier")  # configs/atlas.py ARMS keys
PLAIN = ("plain residual", (*atlas.NO_NORM, ("model.residual", "plain"), *atlas.XAVIER))  # ReZero's baseline
DEPTHS = {"tiny": (1, 2), "cpu": (6, 12), "paper": (6, 12)}  # N of N+N layers
LRS = {"tiny": atlas.LRS["tiny"], "cpu": (1e-3, 3.16e-3, 1e-2, 3.16e-2), "paper": atlas.LRS["paper"]}
FIRST_SEED = {"tiny": 0, "cpu": 3, "paper": 3}


def get_config(scale: str = "cpu"):
  check_scale(scale)
  products = [
      (f"{label} at {n}+{n}", keys + layers(n, scale))
      for n in DEPTHS[scale]
      for label, keys in [*((atlas.NAMES[m], method_keys(m, scale)) for m in METHODS), PLAIN]
  ]
  config = atlas_claim_config("deep_no_warmup", scale, products)
  config.sweep.products = tuple(no_warmup(label, keys, LRS[scale]) for label, keys in products)
  config.sweep.first_seed = FIRST_SEED[scale]
  return config
