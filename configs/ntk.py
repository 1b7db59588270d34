"""NTK parameterization (Jacot et al. 2018; Park et al. 2019; Su 2021a §5; docs/science.md §3): unit-variance kernels,
outputs multiplied by 1/√fan_in. Same function as Xavier/LeCun SP at init, different optimizer geometry.

    python main.py --config=configs/ntk.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.scale_embeddings = False  # the scheme draws unit-variance embeddings itself
  config.model.norm_position = "pre"
  config.model.parameterization = "ntk"  # brings init.scheme='ntk'.
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
