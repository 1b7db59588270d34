"""T-Fixup (Huang et al. 2020; docs/science.md §7): no normalization, no warmup; depth-scaled Xavier init.

python main.py --config=configs/tfixup.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_type, config.model.norm_position = "none", "none"
  config.init.scheme = "tfixup"
  config.optim.schedule = "constant"
  config.optim.learning_rate = 5e-4
  config.optim.warmup_steps = 0
  return config
