"""ReZero (Bachlechner et al. 2020; docs/science.md §6): x + α·F(x) with a learnable α = 0 at init, no normalization,
no warmup.

    python main.py --config=configs/rezero.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_type, config.model.norm_position = "none", "none"
  config.model.residual = "rezero"  # brings init.scheme='rezero'.
  config.optim.schedule = "constant"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 0
  return config
