"""Derf (Chen, Lu, Zhu, Sun & Liu 2025, "Stronger Normalization-Free Transformers", arXiv 2512.10938, Eq. 10;
docs/science.md §5): every norm of a Pre-LN model replaced by γ ⊙ erf(α·x + s) + β, learnable scalars α (α₀ = 0.5)
and s (s₀ = 0), the defaults of the authors' code.

    python main.py --config=configs/derf.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.model.norm_type = "derf"
  config.model.norm_alpha_init = 0.5
  config.model.derf_shift_init = 0.0
  return config
