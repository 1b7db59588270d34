"""DS-Init (Zhang, Titov & Sennrich 2019; docs/science.md §7): Post-LN, layer l draws from
U(−γ/√l, γ/√l) with γ Xavier's bound.

    python main.py --config=configs/dsinit.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.init.scheme = "dsinit"
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
