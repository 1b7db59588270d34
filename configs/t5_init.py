"""T5's recipe (Raffel et al. 2020; docs/science.md §4): Pre-RMSNorm, no biases, no 1/√d_k in attention — the query
init carries it instead (`t5` scheme) — tied logits scaled by d^{-1/2}, Adam with the inverse-square-root schedule.

    python main.py --config=configs/t5_init.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.scale_embeddings = False  # the scheme draws unit-variance embeddings itself
  m = config.model
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.use_bias = False
  m.attention_logit_scale = "none"
  m.tied_readout_scale = "rsqrt_d"
  m.activation = "relu"
  config.init.scheme = "t5"
  config.optim.name = "adam"
  config.optim.schedule = "rsqrt"
  config.optim.learning_rate = 3e-3
  config.optim.warmup_steps = 150
  return config
