"""Study 13 (Dey et al. 2025, CompleteP): depth-wise lr transfer, CompleteP against standard Pre-LN.

    python main.py --config=configs/claims/depth.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/depth
    python main.py --config=configs/claims/depth.py:tiny   # 12 runs of 8 steps on the synthetic task (~80 s)

One sweep (measure and verdict: experiments/claims/depth.py), one named product per arm × depth:
  arms     `ARMS`, all Pre-LN with SP's width rules (model.parameterization 'standard'), Xavier init, tied embeddings:
           "SP", the plain residual x + F; "CompleteP", branches × (L/L_base)^{−1} and the in-layer lrs × 1 (Dey et
           al. 2025, Table 1; configs/completep.py); "Depth-µP", branches × (L/L_base)^{−1/2} and in-layer lrs ×
           (L/L_base)^{−1/2} (Bordelon et al. 2024: `model.depth_alpha=0.5`). L_base = `model.depth_base` = the
           smallest depth, where the arms are one model. `SCALE_ARMS`: the arms a scale runs;
  depths   `DEPTHS`: L layers in the encoder and L in the decoder;
  lrs      `LRS`, a factor-2 grid (one step = 1 in log₂ lr, the unit of the optimum's shift), the same at every depth,
           bracketing the shallow optimum (≈ 1e-2 at cpu) by 3 steps below and 3 above;
  model    d = 32, 2 heads, d_ff 128 at cpu (the atlas's cpu model), SentencePiece 2000, batch 32, 200 steps;
           linear warmup over a tenth of the run (docs/science.md §8), then constant;
  records  `train.eval_at_init` for the outcome classes (analysis/outcomes.py); where `CURVATURE_EVERY` > 0, the
           sharpness records η(t)·λ_max(M·P_t⁻¹H) at `REF_LR` (reported, not decided);
  seeds    cpu: 3 fresh seeds from `FIRST_SEED` (the rule was stated after seeds 0–3 were seen), confirming it at
           depths 2 and 32, which also serve as SP's positive control for the optimum's shift.
Scales: tiny (tests: 1+1 vs 2+2 layers of the tiny preset, L_base 1, lrs {1e-3, 2e-2}, 8 steps, 1 seed, synthetic
task: 12 runs); cpu (SP and CompleteP at 2+2 and 32+32 layers × 7 lrs × 3 seeds = 84 runs of 200 steps on Multi30k);
paper (an accelerator: d 256, 4 heads, d_ff 1024, 2+2 → 32+32 layers, 2000 steps of 4096-token packed batches,
8 lrs, 3 seeds). The design's history: the claim's record, REPRODUCTION.md and docs/design_log.md.
"""

from configs.claims._base import check_scale, claim_config, set_keys

ARMS = {  # label -> the keys that make it (models/residual.py, models/parameterization.py)
    "SP": (("model.residual", "plain"),),
    "CompleteP": (("model.residual", "completep"), ("model.depth_alpha", 1.0)),
    "Depth-µP": (("model.residual", "completep"), ("model.depth_alpha", 0.5)),
}
DEPTHS = {"tiny": (1, 2), "cpu": (2, 32), "paper": (2, 4, 8, 16, 32)}  # layers per stack: 16× at cpu
# Arms run at the shallowest and deepest depths only (the shift reads those two; the verdict does not read Depth-µP).
ENDS_ONLY = {"tiny": (), "cpu": (), "paper": ()}
# The arms each scale runs: cpu, the fresh-seed confirmation, runs the two the rule reads.
SCALE_ARMS = {"tiny": tuple(ARMS), "cpu": ("SP", "CompleteP"), "paper": tuple(ARMS)}
LRS = {
    "tiny": (1e-3, 2e-2),
    "cpu": (1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2, 8e-2),
    "paper": (1.5625e-4, 3.125e-4, 6.25e-4, 1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2),
}
STEPS = {"tiny": 8, "cpu": 200, "paper": 2000}
WARMUP = {"tiny": 2, "cpu": 20, "paper": 200}  # a tenth of the run (docs/science.md §8)
SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
FIRST_SEED = {"tiny": 0, "cpu": 4, "paper": 0}  # cpu: fresh seeds (seeds 0–3 were seen before the rule was stated)
REF_LR = {"tiny": 1e-3, "cpu": 1e-2, "paper": 1.25e-3}  # the sharpness runs' lr, one of LRS: near the shallow optimum
# records at REF_LR only; 0: none (cpu: the confirmation's 32-layer records would cost more than its runs)
CURVATURE_EVERY = {"tiny": 4, "cpu": 0, "paper": 100}
SIZES = {
    "tiny": {
        "model.preset": "tiny",
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 8,
        "analysis.lanczos_steps": 4,
        "analysis.tracking_tol": 0.0,  # one Lanczos program per run (study 12's tiny)
    },
    "cpu": {
        "model.d_model": 32,  # the atlas's cpu model (configs/atlas.py SIZES['cpu'])
        "model.num_heads": 2,
        "model.d_ff": 128,
        "data.vocab_size": 2000,
        "data.batch_size": 32,
        "data.max_eval_loss_examples": 256,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 16,  # study 12's curvature records (configs/claims/width.py SIZES['cpu'])
        "analysis.lanczos_steps": 20,
        "analysis.tracking_tol": 1e-2,
    },
    "paper": {
        "model.d_model": 256,
        "model.num_heads": 4,
        "model.d_ff": 1024,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
        "data.pack": True,  # fairseq's --max-tokens 4096 as the claims' paper scale (configs/claims/_training.py)
        "data.batch_size": 32,
        "data.max_eval_loss_examples": -1,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 64,
        "analysis.lanczos_steps": 40,
        "analysis.tracking_tol": 1e-2,
        # A float64 basis of 41 vectors: 9.6 GiB at 16+16 layers (31.5M parameters), 18.6 GiB at 32+32; the 4 GiB
        # default stopped every REF_LR run from 8+8 layers on at its start (tests/test_paper_configs.py).
        "analysis.max_basis_bytes": 40 * 2**30,
    },
}
_TRAIN = {
    "model.norm_position": "pre",
    "model.parameterization": "standard",
    "init.scheme": "xavier",  # spelled out (what 'auto' gives every arm): the figures' titles name it
    "optim.name": "adam",  # β1 0.9, β2 0.98, ε 1e-9 (configs/default.py: Vaswani et al. 2017 §5.3)
    "optim.schedule": "linear_warmup",
    "model.dropout_rate": 0.0,
    "model.attention_dropout_rate": 0.0,
    "train.label_smoothing": 0.0,
    "train.keep_checkpoints": 1,
    "train.eval_at_init": True,  # the loss at init and the unigram reference: each run's outcome class
    "train.curvature_every": 0,  # REF_LR's cells set it (`grid`)
    "analysis.preconditioned_top_k": 1,  # the records add η(t)·λ_max(M·P_t⁻¹H), as study 12's
    "analysis.num_batches": 1,
    "analysis.top_k": 1,
    "analysis.bottom_k": 0,
}


def products(scale: str) -> tuple:
  """Two products per arm × depth, both labelled "<arm> @ depth <L>": `LRS[scale]` without `REF_LR`, and `REF_LR`
  with the curvature records (`CURVATURE_EVERY`) the sharpness reads (module docstring)."""
  parts = []
  for arm in SCALE_ARMS[scale]:
    for depth in arm_depths(arm, scale):
      layers = (("model.num_encoder_layers", depth), ("model.num_decoder_layers", depth))
      head = (("arm", f"{arm} @ depth {depth}"), *ARMS[arm], *layers)
      if not CURVATURE_EVERY[scale]:
        parts.append((*head, ("optim.learning_rate", LRS[scale])))
        continue
      parts.append((*head, ("optim.learning_rate", tuple(lr for lr in LRS[scale] if lr != REF_LR[scale]))))
      parts.append((*head, ("optim.learning_rate", REF_LR[scale]), ("train.curvature_every", CURVATURE_EVERY[scale])))
  return tuple(parts)


def arm_depths(arm: str, scale: str) -> tuple[int, ...]:
  """The depths `arm` runs at `scale`: `DEPTHS[scale]`, or its two ends for the arms of `ENDS_ONLY[scale]`."""
  depths = DEPTHS[scale]
  return (depths[0], depths[-1]) if arm in ENDS_ONLY[scale] else depths


def get_config(scale: str = "cpu"):
  check_scale(scale)
  config = claim_config("depth", scale, SIZES)
  steps = STEPS[scale]
  set_keys(config, _TRAIN)
  set_keys(
      config,
      {
          "model.depth_base": min(DEPTHS[scale]),
          "optim.warmup_steps": WARMUP[scale],
          "train.num_steps": steps,
          "train.log_every": max(1, steps // 20),
          "train.eval_every": steps // 2,
          "train.checkpoint_every": steps,
      },
  )
  config.sweep.products = products(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.first_seed = FIRST_SEED[scale]
  config.sweep.metric = "eval/loss"
  return config
