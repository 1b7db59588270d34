"""Claim 1: a normal truncated at ±2σ realizes std 0.8796σ, so BERT's initializer_range 0.02 is really 0.0176, while
Xavier for d = 768 is 0.0361 (Su 2021b; Devlin et al. 2019).

    python main.py --config=configs/claims/truncated_normal.py:cpu

Measured on the model's own parameters at init (train.num_steps = 0; analysis.param_stats: params.json), under the
`bert` scheme (every matrix truncated_normal_tf(0.02)) and the `xavier` scheme (kernels xavier_uniform). The model is
an encoder whose attention and MLP kernels are d×d and d×4d; at `cpu` and `paper` d = 768, BERT-base's width, so
the 768×768 kernels are the tensors the claim names. No data is read (the synthetic task only builds the tokenizer
the model's vocabulary needs), so the scale sets sizes only. measure/verdict/figure:
experiments/claims/truncated_normal.py.
"""

from configs.claims._base import claim_config

SIZES = {
    "tiny": {"model.num_encoder_layers": 2, "model.d_model": 64, "model.d_ff": 256, "model.num_heads": 4},
    "cpu": {"model.num_encoder_layers": 2, "model.d_model": 768, "model.d_ff": 3072, "model.num_heads": 12},
    "paper": {"model.num_encoder_layers": 12, "model.d_model": 768, "model.d_ff": 3072, "model.num_heads": 12},
}


def get_config(scale: str = "cpu"):
  config = claim_config("truncated_normal", scale, SIZES)
  config.data.name = "embedded"  # parameters at init only: no data is needed at any scale
  config.data.embedded.num_train, config.data.embedded.num_eval = 512, 64
  config.model.arch = "encoder"
  config.init.std = 0.02  # BERT's initializer_range
  config.optim.warmup_steps = 0
  config.train.num_steps = 0
  a = config.analysis
  a.spectrum, a.blocks, a.grad_norms, a.signal, a.param_stats = False, False, False, False, True
  a.top_k, a.bottom_k, a.trace_probes = 0, 0, 0
  a.batch_size = 8
  config.sweep.products = ((("init.scheme", ("bert", "xavier")),),)
  config.sweep.seeds = {"tiny": 1, "cpu": 3, "paper": 3}[scale]
  config.sweep.analysis_at_init = True
  config.sweep.metric = "train/loss"
  return config
