"""Claim 10: ReZero, scheduled α, DeepNorm and Admin train without warmup at depth (Bachlechner et al. 2020; Su 2021a
§6; Wang et al. 2022; Liu et al. 2020).

    python main.py --config=configs/claims/deep_no_warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/deep_no_warmup
    python main.py --config=configs/claims/deep_no_warmup.py:tiny   # seconds, on the synthetic task (the tests)

Five arms trained alike without warmup (configs/claims/_training.py: Adam at a constant lr 1e-3, same seeds and data
order), a union of products because each method sets several keys:
  ReZero           no norm, x + α·F with a learned α = 0 at init (init.scheme 'rezero');
  scheduled α      no norm, x + α·F with α not learned: 0 at init, +3/num_steps after every update, so it reaches 1
                   after a third of the run (Su 2021a §6); Xavier init;
  DeepNorm         Post-LN of α·x + F with DeepNet's init (Wang et al. 2022, Table 1);
  Admin            Post-LN of ω ⊙ x + F, ω from Admin's profiling pass (Liu et al. 2020, Eq. 6);
  Pre-LN           the reference (Xavier), one product of the union.
At `paper` the stacks are 18+18 layers (Admin's deep setting, Liu et al. 2020; "at depth"), else the shared sizes.
measure/verdict/figure: experiments/claims/deep_no_warmup.py.
"""

from configs.claims._base import check_scale
from configs.claims._training import SIZES, training_config

NO_NORM = "model.norm_type=none;model.norm_position=none"
PAPER_LAYERS = 18


def grid(num_steps: int) -> str:
  """The five arms (module docstring); the scheduled α's step makes α reach 1 after num_steps / 3 updates."""
  return " | ".join(
      (
          f"{NO_NORM};model.residual=rezero;init.scheme=rezero",
          f"{NO_NORM};model.residual=scheduled;model.alpha_step={3.0 / num_steps!r};init.scheme=xavier",
          "model.norm_position=post;model.residual=deepnorm;init.scheme=deepnet",
          "model.norm_position=post;model.residual=admin;init.scheme=admin",
          "model.norm_position=pre",
      )
  )


def get_config(scale: str = "cpu"):
  check_scale(scale)
  config = training_config("deep_no_warmup", scale, grid(SIZES[scale]["train.num_steps"]))
  config.model.alpha_init, config.model.alpha_final = 0.0, 1.0  # scheduled α: from 0 up to 1
  if scale == "paper":
    config.model.num_encoder_layers = config.model.num_decoder_layers = PAPER_LAYERS
  return config
