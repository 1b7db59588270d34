"""Untuned warmup (Ma & Yarats 2021, "On the Adequacy of Untuned Warmup for Adaptive Optimization", §4;
docs/science.md §8): Post-LN with Xavier and Adam, a linear warmup of 2/(1 − β₂) updates derived from optim.b2
(100 for the default β₂ = 0.98) instead of a tuned length.

    python main.py --config=configs/untuned_warmup.py
    python main.py --config=configs/untuned_warmup.py --config.optim.b2=0.999   # 2000 warmup steps
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.init.scheme = "xavier"
  config.optim.schedule = "linear_warmup"
  config.optim.untuned_warmup = True
  config.optim.warmup_steps = 0  # derived: 2/(1 − b2)
  return config
