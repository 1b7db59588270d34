"""OLMo 1's 'mitchell' init (Groeneveld et al. 2024; init/schemes.py, docs/science.md §7): every matrix N(0, 1/d) cut
at ±3σ, the residual outputs of layer l (0-based) at 1/√(2·d·(l+1)) (W_o) and 1/√(2·d_ff·(l+1)) (MLP out), in a
Pre-LN causal LM with a SwiGLU MLP, as OLMo 1.

    python main.py --config=configs/mitchell.py
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.norm_position = "pre"
  m.mlp = "swiglu"
  m.use_bias = False
  m.scale_embeddings = False  # the scheme draws the embeddings at 1/√d itself
  config.init.scheme = "mitchell"
  config.optim.warmup_steps = 100
  return config
