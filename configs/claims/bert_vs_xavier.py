"""Claim 9 (Su 2021b; docs/science.md §6): in a Post-LN model BERT's 0.02 init keeps the identity path stronger at init
than Xavier and trains better without long warmup.

    python main.py --config=configs/claims/bert_vs_xavier.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/bert_vs_xavier
    python main.py --config=configs/claims/bert_vs_xavier.py:tiny   # seconds, on the synthetic task (the tests)

Two Post-LN arms trained alike without warmup (configs/claims/_training.py: Adam at a constant lr 1e-3, same seeds
and data order), each with its own input pipeline:
  BERT    Devlin et al. 2019 §3: learned positions, LayerNorm(token + position), no √d scaling; every table and
          kernel N(0, 0.02²) truncated at 2σ (init.scheme 'bert');
  Xavier  Vaswani et al. 2017 §3.4–3.5: √d-scaled tokens + sinusoids, no embedding norm; Xavier kernels.
Grid, a union because each arm sets four keys: 'model.scale_embeddings=false;model.position=learned;
model.embedding_norm=true;init.scheme=bert | model.scale_embeddings=true;model.position=sinusoidal;
model.embedding_norm=false;init.scheme=xavier'. Every run is also analyzed at init (`sweep.analysis_at_init`, the
signal profile only: cos(x_k, x_0) after every sublayer, and what x_0 is made of) before it trains.
measure/verdict/figure: experiments/claims/bert_vs_xavier.py.
"""

from configs.claims._training import training_config

BERT = "model.scale_embeddings=false;model.position=learned;model.embedding_norm=true;init.scheme=bert"
XAVIER = "model.scale_embeddings=true;model.position=sinusoidal;model.embedding_norm=false;init.scheme=xavier"


def get_config(scale: str = "cpu"):
  config = training_config("bert_vs_xavier", scale, f"{BERT} | {XAVIER}")
  config.model.norm_position = "post"
  a = config.analysis  # the signal profile only: no curvature, no gradient profile
  a.spectrum, a.blocks, a.grad_norms, a.signal = False, False, False, True
  a.top_k, a.bottom_k, a.trace_probes = 0, 0, 0  # no curvature: the operator is not even built
  a.num_batches, a.batch_size = 1, {"tiny": 8, "cpu": 16, "paper": 64}[scale]
  config.sweep.analysis_at_init = True
  return config
