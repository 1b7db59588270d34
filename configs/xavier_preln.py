"""Pre-LN with Xavier init (Xiong et al. 2020): trains without warmup; final norm before the head.

python main.py --config=configs/xavier_preln.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.init.scheme = "xavier"
  config.optim.schedule = "constant"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 0
  return config
