"""DyT (Zhu, Chen, He, LeCun & Liu 2025, "Transformers without Normalization"; docs/science.md §5): every norm of a
Pre-LN model replaced by γ ⊙ tanh(α·x) + β, α a learnable scalar from α₀ = 0.5 (the paper's default, §7).

    python main.py --config=configs/dyt.py
    python main.py --config=configs/dyt.py --config.model.norm_alpha_init=0.2 --config.model.norm_alpha_init_attention=0.8
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.model.norm_type = "dyt"
  config.model.norm_alpha_init = 0.5  # Zhu et al. 2025 §7: 0.5 for non-LLM models; wide LLMs want less
  return config
