"""Study 12 (Noci et al. 2024; Kalra & Barkeshli 2026): the lr-scaled preconditioned sharpness along training is
width-independent under µP and grows with width under SP, and µP's optimal learning rate moves less with width.

    python main.py --config=configs/claims/width.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/width
    python main.py --config=configs/claims/width.py:tiny   # 12 runs of 8 steps on the synthetic task (minutes)

One sweep (measure and verdict: experiments/claims/width.py), one named product per arm × width:
  arms     `ARMS`: SP, NTK and µP as their own configs set them (configs/ntk.py, configs/mup.py), and "SP + µP emb. lr",
           SP whose token/position embeddings alone get µP's lr, ×d/d_base relative to the hidden layers
           (`model.embedding_lr_scale='width'`; Kalra & Barkeshli 2026, arXiv 2605.21486, abstract). Every arm untied
           (µP's readout and the embedding arm need it; SP and NTK too, so the arms differ only in what they name),
           Pre-LN, init.scheme 'auto', µP's base width d_base = the smallest width (every arm's per-layer lrs agree
           there);
  model    heads fixed (`HEADS`: µP's head dim grows with width, Tensor Programs V), d_ff = 4d (Vaswani et al.
           2017), 2+2 layers at cpu (the atlas's width model);
  widths   `SHARPNESS_WIDTHS` at the reference lr `REF_LR` for every arm, plus `WIDEST` for the two arms rule (a)
           compares (µP, SP: 32 → 512 = 16× at cpu);
           `TRANSFER_WIDTHS` × the lr grid `LRS` for `TRANSFER_ARMS` (rule (b): 32 → 256 = 8× at cpu);
  lrs      a factor-2 grid (one step = 1 in log₂ lr, the unit of the optimum's shift), extended by one step past
           an (arm, width)'s optimum at its edge for up to 3 rounds (experiments/claims/width.py `extensions`;
           added after the cpu run's first 18 runs: SP's optimum at d = 32 sat at 8e-3, the grid's top);
  schedule linear warmup over `WARMUP` steps (a tenth of the run, docs/science.md §8), then constant: after the
           warmup η(t) = η, so a window of the lr-scaled sharpness compares runs at one η;
  records  `train.curvature_every` with `analysis.preconditioned_top_k=1`: λ_max(H)(t), η(t)·λ_max(H) and Adam's
           η(t)·λ_max(M·P_t⁻¹H), M the run's per-layer lr multipliers (analysis/tracking.py), warm-started at cpu
           and paper (`analysis.tracking_tol`), on one fixed analysis batch; `train.eval_at_init` for the outcome
           classes (analysis/outcomes.py);
  seeds    `SEEDS`: 2 at cpu (the bootstrap interval over seeds of rule (b); the slope interval of rule (a) counts
           every (width, seed) point).
Scales: tiny (tests: 1+1 layers, widths 16 and 32, lrs {1e-3, 2e-2} for SP and µP, 8 steps, 1 seed, cold Lanczos
of 4 steps); cpu (44 cells × 2 seeds = 88 runs of 200 steps, batch 32, Multi30k, SentencePiece 2000); paper (6+6
layers, 8 heads, widths 128 → 2048, 4096-token packed batches, 2000 steps, 3 seeds: 4 accelerators, `DEVICES`).
Why cpu is this size. Calibration (2026-11-26, 2 cores shared with another training job; one cell, µP at d = 512,
2+2 layers, batch 32, lr 2e-3, killed after 3 minutes): start-up and the step-0 evaluation 16 s, steps 1–10 19 s
(compile included), steps 10–20 13.7 s (1.4 s/step); the first curvature record (compiling the Hessian and the
preconditioned Lanczos programs, 2 × 20 cold products) had not finished after 2 min. At tiny each run spent ~60 s
compiling its first record and ~55 s its first warm one. Extrapolated (step cost ∝ parameters, ~18M at d 512, ~6M
at 256, < 1M at 32; each (arm, width) compiles its programs once, shared by its lrs and seeds through the
persistent cache): ~9 min per d = 512 run, ~2.5 per 256, ~0.8 per 128, ~0.3 per 32, plus ~2 min compile per (arm,
width): ≈ 100 min for the transfer grid (3 arms × 2 seeds × 6 lrs × widths 32, 256), ≈ 45 min for the sharpness
widths, ≈ 28 min compiling: ≈ 2.9 h. So d = 64 is not run, the transfer grid stops at 8× (d 512 over 6 lrs would add
~3.6 h), d = 512 runs µP and SP only at REF_LR, and NTK's transfer is not run (rule (b) compares µP with SP; NTK's
sharpness is measured). The estimate is an extrapolation from one partial cell (±50%), not a measurement of the
design.
"""

from configs.claims._base import check_scale, claim_config, set_keys

ARMS = (
    {  # label -> the keys that make it (configs/ntk.py, configs/mup.py; the embedding arm: models/parameterization.py)
        "SP": "model.parameterization=standard;model.scale_embeddings=true;model.embedding_lr_scale=auto",
        "NTK": "model.parameterization=ntk;model.scale_embeddings=false;model.embedding_lr_scale=auto",
        "µP": "model.parameterization=mup;model.scale_embeddings=false;model.embedding_lr_scale=auto",
        "SP + µP emb. lr": "model.parameterization=standard;model.scale_embeddings=true;model.embedding_lr_scale=width",
    }
)
SHARPNESS_WIDTHS = {"tiny": (16, 32), "cpu": (32, 128, 256), "paper": (128, 256, 512, 1024)}
# The widest sharpness width, for the arms the verdict's rule (a) compares only (µP, SP): 16× at cpu and paper.
WIDEST = {"tiny": (), "cpu": (512,), "paper": (2048,)}
VERDICT_ARMS = ("SP", "µP")
TRANSFER_WIDTHS = {"tiny": (16, 32), "cpu": (32, 256), "paper": (256, 2048)}  # 8× (2× at tiny)
# The arms run over the lr grid (rule (b) and Kalra & Barkeshli's arm); NTK's sharpness is measured, its transfer not.
TRANSFER_ARMS = {"tiny": ("SP", "µP"), "cpu": ("SP", "µP", "SP + µP emb. lr"), "paper": tuple(ARMS)}
LRS = {  # factor 2, REF_LR in each; cpu: µP's optimum at d 32 is expected near 2e-3..8e-3 (the atlas's Pre-LN d = 32
    # trained up to 1e-2) and SP's 1/d rule moves it 3 steps down by d 256: 2.5e-4 … 8e-3
    "tiny": (1e-3, 2e-2),
    "cpu": (2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3),
    "paper": (6.25e-5, 1.25e-4, 2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3),
}
REF_LR = {"tiny": 1e-3, "cpu": 2e-3, "paper": 5e-4}  # the sharpness runs' lr: near µP's optimum at d_base
STEPS = {"tiny": 8, "cpu": 200, "paper": 2000}  # "the first few hundred steps" (issue 28)
WARMUP = {"tiny": 2, "cpu": 20, "paper": 200}  # a tenth of the run (docs/science.md §8)
CURVATURE_EVERY = {"tiny": 2, "cpu": 20, "paper": 100}  # 10 records at cpu (steps 20, 40, …, 200)
HEADS = {"tiny": 2, "cpu": 2, "paper": 8}
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}
SIZES = {
    "tiny": {
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 8,
        "analysis.lanczos_steps": 4,
        "analysis.tracking_tol": 0.0,  # one Lanczos program per run: the warm start compiles a second
    },
    "cpu": {
        "model.num_encoder_layers": 2,
        "model.num_decoder_layers": 2,
        "data.vocab_size": 2000,  # the atlas's cpu vocabulary (configs/atlas.py)
        "data.batch_size": 32,
        "data.max_eval_loss_examples": 256,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 16,  # the atlas's curvature batch (configs/atlas.py ANALYSIS_SIZES['cpu'])
        "analysis.lanczos_steps": 20,  # a cap: the warm start stops at tracking_tol
        "analysis.tracking_tol": 1e-2,  # warm start: a record stops at a 1% residual bound (analysis/tracking.py)
    },
    "paper": {
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
        "data.pack": True,  # fairseq's --max-tokens 4096 as the claims' paper scale (configs/claims/_training.py)
        "data.batch_size": 32,
        "data.max_eval_loss_examples": -1,
        "train.num_decode_examples": 0,
        "analysis.batch_size": 64,
        # A cap: the warm-started records stopped at the 1% residual bound within 10 products at cpu (median 6:
        # study 13's 200 records). The basis of 21 float64 vectors is 115 GiB at d = 2048 (n ≈ 7.4e8): it is split
        # along n over the mesh, so the paper scale needs 3 devices of 40 GiB each (half an 80 GB accelerator), 4
        # for a power-of-two mesh: `DEVICES['paper']` (tests/test_paper_configs.py). Was 40 steps, which no single
        # device held from d = 1024 on (59 GiB there, 225 GiB at 2048), found by the check before any run.
        "analysis.lanczos_steps": 20,
        "analysis.tracking_tol": 1e-2,
        "analysis.max_basis_bytes": 40 * 2**30,
    },
}
# The fewest devices each scale's runs fit on (the curvature records' basis: above).
DEVICES = {"tiny": 1, "cpu": 1, "paper": 4}
_TRAIN = {
    "model.norm_position": "pre",
    "model.tie_embeddings": False,
    "init.scheme": "auto",
    "optim.name": "adam",  # β1 0.9, β2 0.98, ε 1e-9 (configs/default.py: Vaswani et al. 2017 §5.3)
    "optim.schedule": "linear_warmup",
    "model.dropout_rate": 0.0,
    "model.attention_dropout_rate": 0.0,
    "train.label_smoothing": 0.0,
    "train.keep_checkpoints": 1,
    "train.eval_at_init": True,  # the loss at init and the unigram reference: each run's outcome class
    "analysis.preconditioned_top_k": 1,  # the records add η(t)·λ_max(M·P_t⁻¹H)
    "analysis.num_batches": 1,
    "analysis.top_k": 1,  # the records' λ_max; no other analysis runs (sweep.analysis_at_init stays off)
    "analysis.bottom_k": 0,
}


def _values(xs) -> str:
  return ",".join(format(x, "g") for x in xs)


def grid(scale: str) -> str:
  """One product per arm × width, labelled "<arm> @ width <d>": the transfer arms at the transfer widths over `LRS`,
  every other (arm, width) at `REF_LR` alone (module docstring)."""
  parts = []
  for arm, keys in ARMS.items():
    widths = SHARPNESS_WIDTHS[scale] + (WIDEST[scale] if arm in VERDICT_ARMS else ())
    for d in sorted(set(widths) | set(TRANSFER_WIDTHS[scale] if arm in TRANSFER_ARMS[scale] else ())):
      transfer = arm in TRANSFER_ARMS[scale] and d in TRANSFER_WIDTHS[scale]
      lrs = _values(LRS[scale] if transfer else (REF_LR[scale],))
      parts.append(f"{arm} @ width {d}: {keys};model.d_model={d};model.d_ff={4 * d};optim.learning_rate={lrs}")
  return " | ".join(parts)


def get_config(scale: str = "cpu"):
  check_scale(scale)
  config = claim_config("width", scale, SIZES)
  steps = STEPS[scale]
  set_keys(config, _TRAIN)
  set_keys(
      config,
      {
          "model.num_heads": HEADS[scale],
          "model.mup_base_width": min(SHARPNESS_WIDTHS[scale]),
          "optim.warmup_steps": WARMUP[scale],
          "train.num_steps": steps,
          "train.log_every": max(1, steps // 30),
          "train.eval_every": steps // 2,
          "train.checkpoint_every": steps,
          "train.curvature_every": CURVATURE_EVERY[scale],
      },
  )
  config.sweep.grid = grid(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
