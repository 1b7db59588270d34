"""Study 13 (Dey et al. 2025, CompleteP): CompleteP's optimal learning rate moves less with depth than standard
Pre-LN's.

    python main.py --config=configs/claims/depth.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/depth
    python main.py --config=configs/claims/depth.py:tiny   # 12 runs of 8 steps on the synthetic task (~80 s)

One sweep (measure and verdict: experiments/claims/depth.py), one named product per arm × depth:
  arms     `ARMS`, all Pre-LN with SP's width rules (model.parameterization 'standard'), Xavier init, tied embeddings
           (configs/default.py): "SP", the plain residual x + F; "CompleteP", branches × (L/L_base)^{−1} and the
           in-layer lrs × 1 (Dey et al. 2025, Table 1; configs/completep.py); "Depth-µP", branches × (L/L_base)^{−1/2}
           and in-layer lrs × (L/L_base)^{−1/2} (Bordelon et al. 2024: `model.depth_alpha=0.5`). L_base =
           `model.depth_base` = the smallest depth, where the three arms are one model (branch and lr multipliers 1);
  depths   `DEPTHS`: L layers in the encoder and L in the decoder (each stack's rule reads its own L, both L);
  lrs      `LRS`, a factor-2 grid (one step = 1 in log₂ lr, the unit of the optimum's shift), the same at every
           depth;
  model    d = 32, 2 heads, d_ff 128 at cpu (the atlas's cpu model, configs/atlas.py), SentencePiece 2000, batch 32;
  schedule linear warmup over `WARMUP` steps (a tenth of the run, docs/science.md §8), then constant, as study 12;
  records  `train.eval_at_init` for the outcome classes (analysis/outcomes.py); at `REF_LR` only, study 12's curvature
           records every `CURVATURE_EVERY` steps (η(t)·λ_max(M·P_t⁻¹H), warm-started, `analysis.tracking_tol`), for
           the sharpness along training vs depth that Noci et al. 2024 state for µP's depth extension (measured and
           reported, not decided: experiments/claims/depth.py). Added with the 4-seed run (2026-11-27), before its
           runs: the 2-seed run recorded no curvature, and issue 28 asks for the sharpness across depth as across
           width;
  seeds    `SEEDS`: 4 at cpu (the bootstrap interval over seeds of the shift difference). Changed after seeing data,
           with its reason (2026-11-27): the first cpu run (2 seeds, 140 runs, commit f38f344) gave D = 0.207
           [−0.0678, 0.461], straddling 0; were the seeds' spread to hold, the interval narrows as 1/√n and clears 0
           from n > 2·((0.207 + 0.0678)/0.207)² = 3.5 seeds (experiments/stats.py `groups_to_decide`), so the
           study is run again, all of it, with 4; the rule, its threshold, the arms, depths, lrs and steps are
           unchanged.
Scales: tiny (tests: 1+1 vs 2+2 layers of the tiny preset, L_base 1, lrs {1e-3, 2e-2}, 8 steps, 1 seed, synthetic
task: 12 runs); cpu (the committed report: SP and CompleteP at `DEPTHS['cpu']`, Depth-µP at 2 and 16 only
(`ENDS_ONLY`), × 7 lrs × 4 seeds = 280 runs of 200 steps on Multi30k); paper (an accelerator: d 256, 4 heads,
d_ff 1024, 2+2 → 32+32 layers, 2000 steps of 4096-token packed batches, 8 lrs, 3 seeds).
Why the lr grid. The atlas's cpu cells (d 32, 200 steps, batch 32): Pre-LN at 6+6 with warmup 20 ended at 4.07 nats
at 3.16e-3, 3.82 at 1e-2, 3.88 at 3.16e-2 (the retired atlas's record, commit ec9e64c), and without warmup at 4.05,
3.86 and 4.28, at 12+12 at 4.15, 4.04 and 4.42 (claim 10's record, reports/reproduction/deep_no_warmup/claim.json,
3 seeds' means); the retired atlas's transfer part's SP at 2+2 (100 steps) 4.19 at 1e-2 and 4.30 at 3.16e-2: the
shallow optimum sits near 1e-2..2e-2. CompleteP's should stay there, and SP's
is expected to fall with depth (Dey et al. 2025, abstract: some parameterizations "fail to transfer"): 16 layers may
put it 2-3 steps lower, so the grid runs from 1.25e-3 to 8e-2, 2 steps above the shallow optimum and 3 below.
Why cpu is this size. Calibration (2026-11-26; 2 cores shared with two other training jobs, load average 4-5; SP at
lr 1e-2, one run of 60 steps per depth, no compilation cache): at 16+16 layers start-up and the step-0 evaluation
19 s, compiling the train step with its first 10 steps 28 s, then 0.22 s/step (4.6 steps/s), the last evaluation and
checkpoint 3 s; at 2+2 layers 16 s, 5 s, 0.047 s/step (21 steps/s) and 1 s. With the sweep's persistent cache (4 runs
of 30 steps at 16+16, 2 lrs × 2 seeds) every run after the first of an (arm, depth) started in 4-7 s instead of 11 and
compiled in ~13-18 s instead of ~27, a new lr included. So a 200-step run costs ≈ 31 s at L = 2 and ≈ 92 s at L = 16
cold, ≈ 26 s and ≈ 70 s warm, about linearly in L between (≈ 40 and 57 s cold at L = 4 and 8). All three arms at all
four depths (168 runs) would take ≈ 2.0 h warm to 2.6 h cold, no margin for a ±30% extrapolation within 3 h; so
Depth-µP, which the verdict does not read and whose shift uses the end depths alone, runs only L = 2 and 16: 70 runs
per seed. These were extrapolations from 60-step runs under load; measured, the 2-seed run (140 runs) took 49 min of
wall time with `--parallel=2` (96 min summed over runs), so 4 seeds take ≈ 1.6 h. Measured, the 4-seed run, with the
reference-lr cells' curvature records added, summed 7.1 h over its 280 runs (25,421 s; claim.json `seconds`), the
deep records' cells dominating: it ran over three sessions, resumed from its committed records.
"""

from configs.claims._base import check_scale, claim_config, set_keys

ARMS = {  # label -> the keys that make it (models/residual.py, models/parameterization.py)
    "SP": "model.residual=plain",
    "CompleteP": "model.residual=completep;model.depth_alpha=1",
    "Depth-µP": "model.residual=completep;model.depth_alpha=0.5",
}
DEPTHS = {"tiny": (1, 2), "cpu": (2, 4, 8, 16), "paper": (2, 4, 8, 16, 32)}  # layers per stack: 8× at cpu
# Arms run at the shallowest and deepest depths only (the shift reads those two; the verdict does not read Depth-µP).
ENDS_ONLY = {"tiny": (), "cpu": ("Depth-µP",), "paper": ()}
LRS = {
    "tiny": (1e-3, 2e-2),
    "cpu": (1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2, 8e-2),
    "paper": (1.5625e-4, 3.125e-4, 6.25e-4, 1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2),
}
STEPS = {"tiny": 8, "cpu": 200, "paper": 2000}
WARMUP = {"tiny": 2, "cpu": 20, "paper": 200}  # a tenth of the run (docs/science.md §8)
SEEDS = {"tiny": 1, "cpu": 4, "paper": 3}
REF_LR = {"tiny": 1e-3, "cpu": 1e-2, "paper": 1.25e-3}  # the sharpness runs' lr, one of LRS: near the shallow optimum
CURVATURE_EVERY = {"tiny": 4, "cpu": 40, "paper": 100}  # records at REF_LR only (cpu: steps 40, 80, …, 200)
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


def _values(xs) -> str:
  return ",".join(format(x, "g") for x in xs)


def grid(scale: str) -> str:
  """Two products per arm × depth, both labelled "<arm> @ depth <L>": `LRS[scale]` without `REF_LR`, and `REF_LR`
  with the curvature records (`CURVATURE_EVERY`) the sharpness reads (module docstring)."""
  parts = []
  for arm, keys in ARMS.items():
    for depth in arm_depths(arm, scale):
      head = f"{arm} @ depth {depth}: {keys};model.num_encoder_layers={depth};model.num_decoder_layers={depth};"
      parts.append(head + f"optim.learning_rate={_values(lr for lr in LRS[scale] if lr != REF_LR[scale])}")
      parts.append(head + f"optim.learning_rate={_values((REF_LR[scale],))};"
                   f"train.curvature_every={CURVATURE_EVERY[scale]}")  # fmt: skip
  return " | ".join(parts)


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
  config.sweep.grid = grid(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
