"""DeepNet (Wang et al. 2022; docs/science.md §6): Post-LN with x·α on the residual and β-scaled Xavier init.

python main.py --config=configs/deepnet.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.model.residual = "deepnorm"  # brings init.scheme='deepnet' (β-scaled Xavier).
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
