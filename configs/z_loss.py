"""z-loss alone (Chowdhery et al. 2022, "PaLM", §5; Wortsman et al. 2023 §3.2, eq. 2; docs/science.md §4): the
training loss adds 1e-4·mean log²Z of the output logits, Z the softmax's normalizer, which keeps log Z near 0 and
the output logits from drifting; Pre-LN, no QK-norm (configs/qk_norm.py has both).

    python main.py --config=configs/z_loss.py
    python main.py --config=configs/z_loss.py --config.train.z_loss=1e-3
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.train.z_loss = 1e-4  # PaLM §5 and Wortsman et al. 2023 §3.2
  return config
