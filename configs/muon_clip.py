"""MuonClip (Kimi Team 2025, "Kimi K2", §2.1): Muon with update-RMS matching (configs/muon.py) and QK-clip at
τ = 100: after each update, W_q and W_k of a head whose largest logit exceeded τ are scaled by √(τ/S_max); the
measured max logit is logged as `max_logit` (train/qk_clip.py, docs/science.md §4). Pre-LN, no QK-norm.

    python main.py --config=configs/muon_clip.py
    python main.py --config=configs/muon_clip.py --config.optim.qk_clip=30   # a tighter cap
"""

from configs import muon


def get_config():
  config = muon.get_config()
  config.optim.qk_clip = 100.0
  return config
