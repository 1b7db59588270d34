"""Grouped-query attention (Ainslie et al. 2023, "GQA", §2.2; docs/science.md §4) in a Pre-RMSNorm causal LM: one
key/value head shared by all query heads (G = 1, multi-query attention, Shazeer 2019, the end of the GQA range
that every preset's head count allows); G = num_heads is multi-head attention.

    python main.py --config=configs/gqa.py
    python main.py --config=configs/gqa.py --config.model.num_kv_heads=2   # 2 groups of the 'mini' preset's 4 heads
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "pre"
  m.num_kv_heads = 1
  config.optim.warmup_steps = 100
  return config
