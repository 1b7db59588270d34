"""The learning-rate × warmup × curvature atlas (issue 15): every method × warmup {0, T_w} × peak lr × seeds.

    python -m experiments.atlas --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas
    python -m experiments.atlas --config=configs/atlas.py:tiny --workdir=/tmp/atlas     # seconds, synthetic task
    python main.py --config=configs/atlas.py:cpu --config.data.dir=<folder> --workdir=runs/atlas/train  # training only

The driver (experiments/atlas/run.py) runs two sweeps of the sweep layer and rewrites reports/ATLAS.md after every
run; rerunning the same command resumes both. The step-0 curvature depends on neither the lr nor the warmup, so it is
computed once per method × seed, in a sweep of its own (`<workdir>/init/`: the method arms, sweep.analysis_at_init,
one training step whose pre-update loss is ℓ₀, the loss at init), not in every training cell; the training sweep
(`<workdir>/train/`, this config's grid) runs no analysis. main.py's sweep mode runs the training sweep alone (same
cells, so the driver resumes it).

Methods (`ARMS`, one product of the union grid each; the keys they do not set keep the shared setup below):
  postln_xavier  Post-LN, Xavier (Vaswani et al. 2017)      postln_bert  Post-LN, BERT's N(0, 0.02) (claim 9's arm)
  preln          Pre-LN + final LN (Xiong et al. 2020)      tfixup       no norm, T-Fixup init (Huang et al. 2020)
  rezero         no norm, x + αF, α = 0 learned             skipinit     no norm, x + αF, α = 0 learned, Xavier init
                 (Bachlechner et al. 2020)                               (De & Smith 2020)
  scheduled      no norm, α 0 → 1 over a third of the run   deepnorm     LN(αx + F), DeepNet init (Wang et al. 2022)
                 (Su 2021a §6)
  admin          LN(ω ⊙ x + F), ω profiled (Liu et al. 2020)  dsinit    Post-LN, U(±γ/√l) (Zhang, Titov & Sennrich 2019)
Each arm × `optim.warmup_steps` ∈ {0, T_w} × `optim.learning_rate` ∈ LRS[scale] (log-spaced), × sweep.seeds. Adam
(β1 0.9, β2 0.98, ε 1e-9), schedule `linear_warmup` (warmup 0: a constant lr), no dropout, no label smoothing, the same
data order for every run (configs/claims/_training.py's setup). Scales (config string):
  tiny   tests: 1+1 layers of the tiny preset, 6 steps of batch 8 on the synthetic task, 2 methods, 3 lrs, 1 seed;
  cpu    the committed report: 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece vocabulary 2000, 200 steps of
         batch 32 (T_w = 20), Multi30k De→En (validation loss on 256 pairs, no decoding), 10 methods × 2 warmups × 6
         lrs × 2 seeds = 240 runs + 20 at-init analyses;
  paper  an accelerator: the Transformer base (6+6, d 512, 8 heads, d_ff 2048) as claim 6's paper scale, 20k steps of
         batch 128, T_w = 4000 (Vaswani et al. 2017; Xiong et al. 2020), 7 lrs, 3 seeds.
Calibration of `cpu` (2026-11-24; 2 CPU cores shared with another training job, load average 5-6, so pessimistic):
alone, a 6+6 run of batch 32 on Multi30k trained 1.2 steps/s at d = 64 (vocab 8000 or 2000) and 4.6 steps/s at d = 32
(vocab 2000), hence d = 32. Through the driver (one method, 2 seeds, 30 steps): a training run took 23 s, ~19 s of it
per-run overhead (setup, compilation, the 256-pair evaluation, the checkpoint) at 7-9 steps/s; the at-init analysis
took 422 s for seed 0 (compilation dominates: operator 12 s, λ_max 42 s, λ_min 37 s, stability 124 s, 37 blocks
163 s; all 109 blocks projected to ~15 min, hence the block filter) and 50 s for seed 1 (same programs).
Projection as loaded: 240 × (19 + 200/7) s ≈ 3.2 h + 10 methods × 7.9 min ≈ 1.3 h + reports ≈ 4.6 h; on the free
machine (2-3× faster) ≈ 1.6-2.3 h, inside the 3 h budget. The sweep's ETA lines say which; if it does not fit,
train.num_steps and the block filter are the knobs, and ATLAS.md states the change.
Imports only ml_collections and configs/claims' helpers.
"""

import ml_collections

from configs.claims._base import check_scale, claim_config, set_keys
from configs.claims._training import _TRAIN

NO_NORM = "model.norm_type=none;model.norm_position=none"
BERT = "model.norm_position=post;model.scale_embeddings=false;model.position=learned;model.embedding_norm=true"
ARMS = {  # method -> the keys of its product (the union grid's parts); '{alpha_step}' filled per scale
    "postln_xavier": "model.norm_position=post;init.scheme=xavier",
    "postln_bert": f"{BERT};init.scheme=bert",
    "preln": "model.norm_position=pre;init.scheme=xavier",
    "tfixup": f"{NO_NORM};init.scheme=tfixup",
    "rezero": f"{NO_NORM};model.residual=rezero;init.scheme=rezero",
    "skipinit": f"{NO_NORM};model.residual=skipinit;init.scheme=xavier",
    "scheduled": f"{NO_NORM};model.residual=scheduled;model.alpha_step={{alpha_step}};init.scheme=xavier",
    "deepnorm": "model.norm_position=post;model.residual=deepnorm;init.scheme=deepnet",
    "admin": "model.norm_position=post;model.residual=admin;init.scheme=admin",
    "dsinit": "model.norm_position=post;init.scheme=dsinit",
}
METHODS = {"tiny": ("postln_xavier", "preln"), "cpu": tuple(ARMS), "paper": tuple(ARMS)}
LRS = {  # peak learning rates, log-spaced (factor √10 at cpu, 2.5 decades bracketing every method's failure)
    "tiny": (1e-3, 1e-2, 1e-1),
    "cpu": (1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2, 3.16e-2),
    "paper": (3.16e-5, 1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2, 3.16e-2),
}
STEPS = {"tiny": 6, "cpu": 200, "paper": 20_000}
WARMUP = {"tiny": 2, "cpu": 20, "paper": 4000}  # T_w: 10% of the steps at cpu (docs/science.md §8)
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}
SIZES = {
    "tiny": {"model.preset": "tiny", "model.num_encoder_layers": 1, "model.num_decoder_layers": 1},
    "cpu": {
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 32,
        "model.num_heads": 2,
        "model.d_ff": 128,
        "data.vocab_size": 2000,
    },
    "paper": {"model.preset": "base", "model.num_encoder_layers": 6, "model.num_decoder_layers": 6},
}
RUN = {
    "tiny": {
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.eval_every": 6,
    },
    "cpu": {"data.batch_size": 32, "data.max_eval_loss_examples": 256, "train.eval_every": 200},
    "paper": {"data.batch_size": 128, "data.max_eval_loss_examples": -1, "train.eval_every": 5000},
}
# The step-0 curvature (analysis/): λ_max, λ_min with residual bounds, Adam's preconditioned λ_max, the sharpness
# along the first update, per-block λ_max; nothing else (no density, trace, gradient or signal profile).
ANALYSIS = {
    "analysis.top_k": 1,
    "analysis.bottom_k": 1,
    "analysis.preconditioned_top_k": 1,
    "analysis.update_sharpness": True,
    "analysis.blocks": True,
    "analysis.spectrum": False,
    "analysis.trace_probes": 0,
    "analysis.grad_norms": False,
    "analysis.signal": False,
}
ANALYSIS_SIZES = {  # per-block λ_max: the first and last layer of each stack and the embedding (cpu), one block (tiny)
    "tiny": {
        "analysis.batch_size": 8,
        "analysis.lanczos_steps": 6,
        "analysis.block_lanczos_steps": 3,
        "analysis.block_filter": "encoder/layer_0/mlp_out",
    },
    "cpu": {
        "analysis.batch_size": 16,
        "analysis.lanczos_steps": 20,
        "analysis.block_lanczos_steps": 8,
        "analysis.block_filter": "(layer_0|layer_5)/|embedding",
    },
    "paper": {"analysis.batch_size": 64, "analysis.lanczos_steps": 80, "analysis.block_lanczos_steps": 30},
}


def grid(scale: str) -> str:
  """The union grid: one product per method, × warmup {0, T_w} × the scale's learning rates."""
  lrs = ",".join(repr(lr) for lr in LRS[scale])
  alpha_step = repr(3.0 / STEPS[scale])  # scheduled α reaches 1 after a third of the run (as claim 10)
  return " | ".join(
      f"{ARMS[m].format(alpha_step=alpha_step)};optim.warmup_steps=0,{WARMUP[scale]};optim.learning_rate={lrs}"
      for m in METHODS[scale]
  )


def get_config(scale: str = "tiny") -> ml_collections.ConfigDict:
  """The atlas at `scale` (module docstring); the default `tiny` needs no data folder."""
  check_scale(scale)
  config = claim_config("atlas", scale, SIZES)
  config.mode = "sweep"
  config.claim.name = ""  # not a claim: the claim group stays at its default
  set_keys(config, _TRAIN)
  set_keys(config, {**RUN[scale], **ANALYSIS, **ANALYSIS_SIZES[scale]})
  set_keys(
      config,
      {
          "train.num_steps": STEPS[scale],
          "train.log_every": max(1, STEPS[scale] // 20),
          "train.checkpoint_every": STEPS[scale],
          "train.num_decode_examples": 0,  # the atlas reads the validation loss; no BLEU decoding
          "analysis.dtype": "float32",
      },
  )
  config.model.alpha_init, config.model.alpha_final = 0.0, 1.0  # scheduled α: from 0 up to 1
  config.sweep.grid = grid(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
