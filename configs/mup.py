"""µP (Yang et al. 2022, "Tensor Programs V"; docs/science.md §3): 1/d_k attention, readout ×1/width_ratio, hidden
learning rates ×1/width_ratio relative to `model.mup_base_width`; Pre-LN, untied readout.

    python main.py --config=configs/mup.py
    python main.py --config=configs/mup.py --config.model.d_model=256 --config.model.d_ff=1024   # same lr transfers
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.scale_embeddings = False  # the scheme draws unit-variance embeddings itself
  m = config.model
  m.norm_position = "pre"
  m.parameterization = "mup"  # brings 1/d_k attention (model.attention_logit_scale) and init.scheme='mup'.
  m.tie_embeddings = False
  m.mup_base_width = 128
  config.optim.schedule = "linear_warmup"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
