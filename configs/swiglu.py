"""Gated MLPs (Shazeer 2020, "GLU Variants Improve Transformer", Eq. 6; docs/science.md §2): (Swish(x·W) ⊙ x·V)·W₂
in a Pre-RMSNorm causal LM, the hidden width 8/3·d rounded up to a multiple of 8 (d_ff unset: models/blocks.py).

    python main.py --config=configs/swiglu.py
    python main.py --config=configs/swiglu.py --config.model.mlp=geglu   # GELU(x·W) ⊙ x·V
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.mlp = "swiglu"
  m.use_bias = False  # LLaMA's (Touvron et al. 2023) gated MLPs have none
  config.optim.warmup_steps = 100
  return config
