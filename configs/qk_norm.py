"""QK-norm and z-loss (Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training
instabilities", §3.1-3.2; docs/science.md §4): the model's norm on queries and keys before the logits (Dehghani et
al. 2023 §2.1) and 1e-4·log²Z on the output logits (Chowdhery et al. 2022, PaLM §5), the two interventions of the
small-scale-proxy study, on a Pre-LN model.

    python main.py --config=configs/qk_norm.py
    python main.py --config=configs/qk_norm.py --config.train.z_loss=0   # QK-norm alone
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.model.qk_norm = True  # bounds |logit| by √d_k·g_q·g_k (models/attention.py)
  config.train.z_loss = 1e-4  # PaLM's and Wortsman et al.'s coefficient
  return config
