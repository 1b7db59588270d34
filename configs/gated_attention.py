"""Gated attention (Qiu et al. 2025, "Gated Attention for Large Language Models", §2.2; docs/science.md §4): every
head's attention output multiplied elementwise by σ(X·W_θ) before W_o, in a Pre-RMSNorm causal LM. The gate starts
centred on σ(0) = 1/2 (W_θ drawn by the scheme's rule for the role 'attn_gate').

    python main.py --config=configs/gated_attention.py
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.attention_gate = True
  config.optim.warmup_steps = 100
  return config
