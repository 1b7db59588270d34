"""HybridNorm (Zhuo et al. 2025, "HybridNorm: Towards Stable and Efficient Transformer Training via Hybrid
Normalization", §3; docs/science.md §6): QKV-norm in attention (queries, keys and values each normalized per head,
no norm on the stream) and Post-LN in the MLP.

    python main.py --config=configs/hybrid_norm.py
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "hybrid"
  return config
