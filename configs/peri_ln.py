"""Peri-LN (Kim et al. 2025, "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture", §3;
docs/science.md §6): a norm on the input and on the output of every sublayer, x ← x + Norm(F(Norm(x))), and a final
norm. `model.norm_position='peri'` is the project's `sandwich` placement (Ding et al. 2021) under its 2025 name.

    python main.py --config=configs/peri_ln.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "peri"
  config.optim.warmup_steps = 100  # a Pre-LN-like identity path
  return config
