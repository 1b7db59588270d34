"""OLMo 2's reordered norm (OLMo Team 2025, "2 OLMo 2 Furious", §3; docs/science.md §6): x ← x + RMSNorm(F(x)), the
norm on each sublayer's output inside the residual and none on its input (Peri-LN, configs/peri_ln.py, keeps both),
and a final norm, in a causal LM.

    python main.py --config=configs/reordered_norm.py
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "reordered"
  config.optim.warmup_steps = 100
  return config
