"""A pilot, not a study: does init scale or width spread the step-0 curvature study 14's rule reads (issue 40)?

    python main.py --config=configs/claims/edge_scale_pilot.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/pilots/edge_scale

Study 14's verdict (configs/claims/edge_boundary.py) is inconclusive because its methods' λ₀ = λ_max(P⁻¹H) at step 0
spans under half a decade. A design that varies one rule's scale would widen it: Post-LN with BERT's embeddings
(configs/atlas.py `BERT`) and Pre-LN, each with BERT's truncated normal at `STDS` (32× apart, around BERT's 0.02);
or the width under standard parameterization, where the sharpness grows with width (study 12): the registry's Pre-LN
(Xavier) at `WIDTHS`, d_ff = 4d and 2 heads as at d = 32.
This sweep runs only the step-0 analyses of those arms (study 11's, configs/claims/edge.py `ANALYSIS`: λ_max(H),
Adam's λ_max(P⁻¹H) and whether ε decides it, the first-update sharpness, the GGN, the batch sharpness), on one seed
and no training, so it reads no outcome: it tells whether a boundary study over these arms could decide before its
runs are spent. Its reading is in docs/design_log.md (study 14).
"""

from configs import atlas
from configs.claims import edge
from configs.claims._base import check_scale

STDS = (0.0025, 0.01, 0.04, 0.08)
WIDTHS = (32, 64, 128, 256)
ARCHS = {"Post-LN": atlas.BERT, "Pre-LN": atlas.PRE}  # atlas.BERT: Post-LN, BERT's embeddings (no √d, learned, LN)
SEEDS = {"tiny": 1, "cpu": 1, "paper": 1}


AT_INIT = (("train.num_steps", 0), ("analysis.at_init", True))


def products(stds: tuple = STDS, widths: tuple = WIDTHS) -> tuple:
  """One step-0 analysis product per (architecture, std), labelled '<arch> + BERT <std>', then one per width of
  Pre-LN, labelled 'Pre-LN d=<width>'."""
  scales = tuple(
      (("arm", f"{name} + BERT {std}"), *keys, ("init.scheme", "bert"), ("init.std", std), *AT_INIT)
      for name, keys in ARCHS.items()
      for std in stds
  )
  sizes = tuple(
      (("arm", f"Pre-LN d={d}"), *atlas.ARMS["preln"], ("model.d_model", d), ("model.d_ff", 4 * d), *AT_INIT)
      for d in widths
  )
  return scales + sizes


def get_config(scale: str = "cpu"):
  check_scale(scale)
  config = edge.get_config(scale)
  config.mode = "sweep"  # a measurement, no verdict
  config.sweep.products = products()
  config.sweep.seeds = SEEDS[scale]
  return config
