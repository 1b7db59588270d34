"""Muon (Jordan et al. 2024) on the hidden matrices with Liu et al. 2025's update-RMS matching, s = 0.2·√max(m, n),
so the matrices share AdamW's learning rate and decay λ = 0.1; embeddings, norms and biases use AdamW (train/muon.py,
docs/science.md §8). Pre-LN, the default linear warmup.

    python main.py --config=configs/muon.py
    python main.py --config=configs/muon.py --config.optim.muon_consistent_rms=0   # Jordan's √max(1, n/m) scale
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.optim.name = "muon"
  config.optim.muon_consistent_rms = 0.2
  config.optim.weight_decay = 0.1
  return config
