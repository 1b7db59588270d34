"""OLMo 2's init (OLMo Team 2025, "2 OLMo 2 Furious", §3; init/schemes.py, docs/science.md §7): every parameter,
embeddings included, N(0, 0.02²) cut at ±3σ (realized 0.019732), with OLMo 2's reordered RMSNorm, QK-norm (per head
here), RoPE and a SwiGLU MLP.

    python main.py --config=configs/olmo2_init.py
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_type, m.norm_position = "rmsnorm", "reordered"
  m.qk_norm = True
  m.position = "rope"
  m.mlp = "swiglu"
  m.use_bias = False
  m.scale_embeddings = False  # the scheme draws the embeddings at 0.02 itself
  config.init.scheme = "olmo2"
  config.init.std = 0.02
  config.optim.warmup_steps = 100
  return config
