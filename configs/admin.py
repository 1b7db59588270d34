"""Admin (Liu et al. 2020; docs/science.md §6): Post-LN with ω ⊙ x on the residual, ω set by a profiling pass at init.

python main.py --config=configs/admin.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.model.residual = "admin"  # brings init.scheme='admin' (ω from a profiling pass).
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
