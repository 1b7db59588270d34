"""Claim 7 (Zhang & Mackey 2022, the slides' experiment): at init a 6+6-layer encoder-decoder with Xavier init on
Multi30k De→En pairs has larger top Hessian eigenvalues and a wider spectrum under Post-LN than under Pre-LN.

    python main.py --config=configs/claims/hessian_spectrum.py:cpu --config.data.dir=<Multi30k folder>
    python main.py --config=configs/claims/hessian_spectrum.py:tiny          # a minute, on the synthetic task

Grid: model.norm_position post | pre, analyzed at init (train.num_steps = 0) by analysis.run with the Hessian of the
token-mean loss over the analysis batches: Lanczos (full reorthogonalization) for the top-3 and bottom-3 eigenvalues
with residual bounds, and the SLQ spectral density (each probe's nodes and weights); in float64 where the backend has
it (analysis.dtype = 'auto': CPU, GPU). The cpu sizes and batches are those of the committed report
(reports/REPRODUCTION.md); its 4 seeds give the verdict's Student-t interval of the Post/Pre log ratios (why 4,
and the cost: docs/design_log.md). `tiny` runs 1 seed: no interval, so its verdict is inconclusive. `paper` is the
slides' 6+6 layers, d = 512 on 1000 pairs (8 batches of 125), whose float64 Lanczos basis (~48M parameters × 81
vectors × 8 bytes ≈ 31 GB) needs an accelerator with the memory for it.
measure/verdict/figure: experiments/claims/hessian_spectrum.py.
"""

from configs.claims._base import claim_config

SIZES = {
    "tiny": {  # both stacks, one layer each: the test's minute goes to compiling the Lanczos programs, ~ depth
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "model.d_model": 32,
        "model.num_heads": 2,
        "model.d_ff": 64,
        "analysis.batch_size": 8,
        "analysis.num_batches": 1,
        "analysis.lanczos_steps": 12,
    },
    "cpu": {
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 128,
        "model.num_heads": 4,
        "model.d_ff": 512,
        "analysis.batch_size": 32,
        "analysis.num_batches": 1,
        "analysis.lanczos_steps": 30,
    },
    "paper": {
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 512,
        "model.num_heads": 8,
        "model.d_ff": 2048,
        "analysis.batch_size": 125,
        "analysis.num_batches": 8,
        "analysis.lanczos_steps": 80,
        "analysis.num_probes": 8,
        "analysis.max_basis_bytes": 40 * 2**30,
    },
}


def get_config(scale: str = "cpu"):
  config = claim_config("hessian_spectrum", scale, SIZES)
  config.init.scheme = "xavier"
  config.optim.warmup_steps = 0
  config.train.num_steps = 0
  a = config.analysis  # extremes and density of the full Hessian only
  a.dtype, a.operator, a.reorthogonalize = "auto", "hessian", "full"
  a.top_k, a.bottom_k = 3, 3
  a.spectrum, a.log_density = True, True
  if scale != "paper":
    a.num_probes = 2
  a.blocks, a.grad_norms, a.signal, a.trace_probes = False, False, False, 0
  config.sweep.products = ((("model.norm_position", ("post", "pre")),),)
  config.sweep.seeds = {"tiny": 1, "cpu": 4, "paper": 3}[scale]  # cpu: 4 decide (the module docstring)
  config.sweep.analysis_at_init = True
  config.sweep.metric = "train/loss"
  return config
