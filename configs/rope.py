"""Rotary position embeddings (Su et al. 2021, "RoFormer", Eq. 34; docs/science.md §4) in a Pre-RMSNorm causal LM:
queries and keys rotated by their positions, so attention logits depend only on relative position; no additive
position embedding.

    python main.py --config=configs/rope.py
    python main.py --config=configs/rope.py --config.model.rope_base=500000   # LLaMA 3's base
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.position = "rope"
  m.rope_base = 10000.0  # Su et al. 2021
  config.optim.warmup_steps = 100
  return config
