"""Study 14: does the curvature at step 0 predict each method's boundary, on fresh seeds (issue 40)?

    python main.py --config=configs/claims/edge_boundary.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/edge_boundary

The design, fixed here before its runs (the rules: experiments/claims/shared/boundary_rules.py, the boundary rules):
  methods   every method of study 11 (configs/atlas.py's registry), with study 11's model, data, optimizer, 200
            steps and per-step training-loss log (configs/claims/edge.py);
  lrs       per method, the bracket [η_lo, η_hi] that study 11's record gives on the collapse-aware outcome
            (`BRACKETS`: tests/test_claim_edge_boundary.py checks them against that record), refined with its √2
            midpoint; both ends and the midpoint without warmup; the grid extends by √2 past an end that does not hold on
            the fresh seeds (`MAX_ROUNDS`). LayerScale never failed in study 11 (1 of 3 seeds at 0.128): its
            bracket is [0.128, 0.256], 0.256 not yet run;
  warmup    T_w = 2/(1 − β₂) = 100 steps at each method's η_hi, the smallest failing lr (Ma & Yarats 2021 §4);
  seeds     3 fresh ones (`FIRST_SEED`; study 11 ran 0–2): at cpu 6–8, all on one machine at one commit (seeds 3–5
            ran on two machines, one unrecorded: issue 40, item 7; docs/design_log.md); the data order is study 11's;
  λ₀        each method's step-0 predictors are study 11's (its at-init analyses, seeds 0–2, median), read from
            its record: the predictor is measured apart from the outcomes it predicts.
At paper, where study 11 has no record, each method runs study 11's paper grid (configs/claims/edge.py LRS) on the
fresh seeds, extended by √2 steps until bracketed; its warmup runs wait for those brackets.
Runs at cpu: 19 methods × 3 lrs × 3 seeds + 19 × 3 warmup runs = 228 of 200 steps, ≈ 2.8 h on 2 cores, committed as
they land (experiments/reproduce.py resumes them).
"""

import math

from configs import atlas
from configs.claims import edge
from configs.claims._atlas_cells import method_keys, no_warmup
from configs.claims._base import check_scale

# Study 11's brackets [η_lo, η_hi] (cpu: its record's collapse-aware re-reading; tiny: the tests' synthetic task).
BRACKETS = {
    "tiny": {"Post-LN + Xavier": (0.01, 0.02), "Pre-LN": (0.01, 0.02)},
    "cpu": {
        "Admin": (0.008, 0.016),
        "CompleteP": (0.128, 0.256),
        "DS-Init": (0.004, 0.008),
        "DeepNorm": (0.016, 0.032),
        "Derf": (0.008, 0.016),
        "DyT": (0.008, 0.016),
        "HybridNorm": (0.004, 0.008),
        "LayerNorm scaling": (0.128, 0.256),
        "LayerScale": (0.128, 0.256),  # open above in study 11: 0.256 is the next lr of its grid
        "Mix-LN": (0.016, 0.032),
        "Peri-LN": (0.128, 0.256),
        "Post-LN + BERT 0.02": (0.008, 0.016),
        "Post-LN + Xavier": (0.002, 0.004),
        "Pre-LN": (0.128, 0.256),
        "Pre-LN + QK-norm": (0.128, 0.256),
        "Pre-LN + z-loss": (0.128, 0.256),
        "ReZero": (0.016, 0.032),
        "T-Fixup": (0.004, 0.008),
        "scheduled α": (0.004, 0.008),
    },
}
WARMUP = {"tiny": 2, "cpu": 100}
FIRST_SEED = {"tiny": 3, "cpu": 6, "paper": 3}  # cpu: 3–5 were seen (the two-machine record)
SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
MAX_ROUNDS = 3  # √2 steps past an end of the bracket that the fresh seeds move


def midpoint(lo: float, hi: float) -> float:
  """√(lo·hi) to 3 significant digits (a cell's name carries the lr)."""
  return float(f"{math.sqrt(lo * hi):.3g}")


def products(scale: str) -> tuple:
  """Every method's product without warmup (its bracket's ends and midpoint) first, then its warmup product at
  η_hi: an extension round repeats a label's first product (experiments/grid.py `extend_grid`)."""
  names = {atlas.NAMES[m]: m for m in atlas.METHODS[scale]}
  if scale not in BRACKETS:  # no study 11 record at this scale: its grid, extended until bracketed (docstring)
    return tuple(no_warmup(label, method_keys(m, scale), edge.LRS[scale]) for label, m in names.items())
  first, warm = [], []
  for label, (lo, hi) in BRACKETS[scale].items():
    keys = method_keys(names[label], scale)
    first.append(no_warmup(label, keys, (lo, midpoint(lo, hi), hi)))
    warm.append((("arm", label), *keys, ("optim.warmup_steps", WARMUP[scale]), ("optim.learning_rate", hi)))
  return tuple(first + warm)


def get_config(scale: str = "cpu"):
  check_scale(scale)
  config = edge.get_config(scale)
  config.claim.name = "edge_boundary"
  config.sweep.products = products(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.first_seed = FIRST_SEED[scale]
  return config
