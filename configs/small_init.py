"""Small init (Nguyen & Salazar 2019, "Transformers without Tears", §2; init/schemes.py, docs/science.md §7): every
matrix, embeddings included, N(0, 2/(5d)), in a Pre-LN causal LM.

    python main.py --config=configs/small_init.py
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_position = "pre"
  m.scale_embeddings = False  # the scheme draws the embeddings at √(2/(5d)) itself
  config.init.scheme = "small_init"
  config.optim.warmup_steps = 100
  return config
