"""The original Transformer's placement (Vaswani et al. 2017): Post-LN with Xavier init and warmup — the Post-LN
model of Zhang & Mackey 2022's Hessian experiment (docs/science.md §9). Set `--config.optim.warmup_steps=0` to see
why it needs warmup (Xiong et al. 2020).

    python main.py --config=configs/xavier_postln.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "post"
  config.init.scheme = "xavier"
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
