"""Study 12 (Noci et al. 2024; Kalra & Barkeshli 2026): the lr-scaled preconditioned sharpness along training is
width-independent under µP and grows with width under SP, and µP's optimal learning rate moves less with width.

    python main.py --config=configs/claims/width.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/width
    python main.py --config=configs/claims/width.py:tiny   # 12 runs of 8 steps on the synthetic task (minutes)

One sweep (measure and verdict: experiments/claims/width.py), one named product per arm × width:
  arms     `ARMS`: SP, NTK and µP as their own configs set them (configs/ntk.py, configs/mup.py), and "SP + µP emb. lr",
           SP whose token/position embeddings alone get µP's lr, ×d/d_base (`model.embedding_lr_scale='width'`; Kalra
           & Barkeshli 2026, arXiv 2605.21486, abstract). Every arm untied (µP's readout and the embedding arm need
           it), Pre-LN, init.scheme 'auto', µP's base width d_base = the smallest width (the arms' lrs agree there);
  model    heads fixed (`HEADS`: µP's head dim grows with width, Tensor Programs V), d_ff = 4d (Vaswani et al. 2017);
  widths   `SHARPNESS_WIDTHS` at `REF_LR` for every arm, plus `WIDEST` for the arms rule (a) compares (µP, SP);
           `TRANSFER_WIDTHS` × the lr grid `LRS` for `TRANSFER_ARMS` (rule (b));
  lrs      a factor-2 grid (a step is 1 in log₂ lr), one step past an optimum at its edge, ≤ 3 rounds (`extensions`);
  schedule linear warmup over `WARMUP` steps (docs/science.md §8), then constant: a window compares runs at one η;
  records  `train.curvature_every` with `analysis.preconditioned_top_k=1`: λ_max(H)(t), η(t)·λ_max(H) and Adam's
           η(t)·λ_max(M·P_t⁻¹H), M the run's per-layer lr multipliers (analysis/tracking.py), warm-started, on one
           fixed analysis batch; `train.eval_at_init` for the outcome classes (analysis/outcomes.py).
  seeds    `SEEDS` per cell; µP's and SP's: `SHARPNESS_SEEDS` at `REF_LR`, `TRANSFER_SEEDS` over `LRS`.
Scales: tiny (tests: 1+1 layers, widths 16 and 32, lrs {1e-3, 2e-2} for SP and µP, 8 steps, 1 seed); cpu (2+2 layers,
132 runs of 200 steps before extensions, batch 32, Multi30k, SentencePiece 2000, ≈ 4–5 h on 2 cores, fresh seeds on
one machine: docs/design_log.md); paper (6+6 layers, 8 heads, widths 128 → 2048, 4096-token packed batches, 2000
steps, 3 seeds, 4 accelerators: `DEVICES`).
"""

from configs.claims._base import check_scale, claim_config, set_keys


def _arm(parameterization: str, scale_embeddings: bool, embedding_lr_scale: str) -> tuple:
  return (
      ("model.parameterization", parameterization),
      ("model.scale_embeddings", scale_embeddings),
      ("model.embedding_lr_scale", embedding_lr_scale),
  )


ARMS = (
    {  # label -> the keys that make it (configs/ntk.py, configs/mup.py; the embedding arm: models/parameterization.py)
        "SP": _arm("standard", True, "auto"),
        "NTK": _arm("ntk", False, "auto"),
        "µP": _arm("mup", False, "auto"),
        "SP + µP emb. lr": _arm("standard", True, "width"),
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
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}  # per cell, but for the verdict arms' cells below
# The verdict arms' (VERDICT_ARMS) own seeds, stated before their runs: at `REF_LR` (rule (a)'s slope) and over the
# transfer grid (rule (b)'s D). cpu: the 2-seed record's slope scatter put µP's decision at ≈ 5 seeds per width and
# D's at ≈ 3 per cell (its reason; docs/design_log.md).
SHARPNESS_SEEDS = {"tiny": 1, "cpu": 5, "paper": 3}
TRANSFER_SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
FIRST_SEED = {"tiny": 0, "cpu": 2, "paper": 0}  # cpu: seeds 0–1 were seen (the 2-seed record) before these counts
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
        # A cap on the warm-started records (they stop at the 1% residual bound). The basis of 21 float64 vectors
        # is 115 GiB at d = 2048 (n ≈ 7.4e8): it is split along n over the mesh, so the paper scale needs 3 devices
        # of 40 GiB each (half an 80 GB accelerator), 4 for a power-of-two mesh: `DEVICES['paper']`
        # (tests/test_paper_configs.py).
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


def products(scale: str) -> tuple:
  """Products labelled "<arm> @ width <d>", per arm × width: the transfer arms at the transfer widths over `LRS`,
  every other (arm, width) at `REF_LR` alone (module docstring); a verdict arm's lrs below `REF_LR`, `REF_LR` and
  those above are three products where their seeds differ (`SHARPNESS_SEEDS`, `TRANSFER_SEEDS`), in the grid's order,
  so the cells and their folders are those of one product (an extension round repeats the first: transfer seeds)."""
  parts = []
  for arm, keys in ARMS.items():
    widths = SHARPNESS_WIDTHS[scale] + (WIDEST[scale] if arm in VERDICT_ARMS else ())
    for d in sorted(set(widths) | set(TRANSFER_WIDTHS[scale] if arm in TRANSFER_ARMS[scale] else ())):
      transfer = arm in TRANSFER_ARMS[scale] and d in TRANSFER_WIDTHS[scale]
      lrs = LRS[scale] if transfer else (REF_LR[scale],)
      head = (("arm", f"{arm} @ width {d}"), *keys, ("model.d_model", d), ("model.d_ff", 4 * d))
      ref, own = REF_LR[scale], arm in VERDICT_ARMS
      groups = []  # (lrs, seeds pairs), adjacent groups of the same seeds merged: one product
      for lrs_, n in (
          ([lr for lr in lrs if lr < ref], TRANSFER_SEEDS[scale]),
          ([lr for lr in lrs if lr == ref], SHARPNESS_SEEDS[scale]),
          ([lr for lr in lrs if lr > ref], TRANSFER_SEEDS[scale]),
      ):
        seeds = (("seeds", n),) if own and n != SEEDS[scale] else ()
        if lrs_ and groups and groups[-1][1] == seeds:
          groups[-1][0].extend(lrs_)
        elif lrs_:
          groups.append((list(lrs_), seeds))
      parts += [(*head, ("optim.learning_rate", tuple(g)), *seeds) for g, seeds in groups]
  return tuple(parts)


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
  config.sweep.products = products(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.first_seed = FIRST_SEED[scale]
  config.sweep.metric = "eval/loss"
  return config
