"""GI-Adam (Kalra & Barkeshli 2024, "Why Warmup the Learning Rate?", §6; docs/science.md §8): Post-LN with Xavier and
no learning-rate warmup, Adam's second moment started from the first gradient (ν₀ = g₀²), the warmup the paper builds
into the optimizer: the first updates are √(1 − β₂) of Adam's.

    python main.py --config=configs/gi_adam.py
    python main.py --config=configs/gi_adam.py --config.optim.second_moment_init=zero   # plain Adam, no warmup
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.init.scheme = "xavier"
  config.optim.schedule = "constant"
  config.optim.warmup_steps = 0
  config.optim.second_moment_init = "gradient"
  return config
