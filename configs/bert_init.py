"""BERT's recipe (Devlin et al. 2019; Su 2021b): Post-LN, truncated normal with initializer_range 0.02 everywhere
(real std 0.0176, docs/science.md §1), GELU, Adam with linear warmup then linear decay.

    python main.py --config=configs/bert_init.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.scale_embeddings = False  # BERT does not scale its 0.02 embeddings
  config.model.norm_position = "post"
  config.model.activation = "gelu"
  config.model.position = "learned"
  config.init.scheme = "bert"
  config.optim.schedule = "warmup_linear_decay"
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 150
  return config
