"""Logit soft-capping (Gemma Team 2024, "Gemma 2", §2; docs/science.md §4): c·tanh(z/c) on the attention logits
(c = 50) and on the output logits (c = 30), Gemma 2's caps, in a Pre-RMSNorm causal LM.

    python main.py --config=configs/softcap.py
    python main.py --config=configs/softcap.py --config.model.attn_logit_softcap=0   # the final cap alone
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.attn_logit_softcap = 50.0  # Gemma 2
  m.final_logit_softcap = 30.0  # Gemma 2
  config.optim.warmup_steps = 100
  return config
