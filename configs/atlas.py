"""The learning-rate × warmup × curvature atlas (issue 15): every method × warmup {0, T_w} × peak lr × seeds, and its
axis parts: η·λ_max through warmup, λ_max at init against width and depth, learning-rate transfer across widths.

    python main.py --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas
    python main.py --config=configs/atlas.py:cpu --config.data.dir=<folder> --workdir=runs/atlas \
        --config.atlas.parts=width,depth                                                 # those parts only
    python main.py --config=configs/atlas.py:tiny --workdir=/tmp/atlas                  # minutes, synthetic task

main.py's atlas mode (experiments/atlas/run.py) runs the sweeps of the sweep layer, its parts, in the order given by
`atlas.parts` (default '': init, train, length, trace, width, depth, transfer), each in `<workdir>/<part>/`, and
rewrites `<atlas.out>/ATLAS.md` after every run; rerunning the same command resumes them. The step-0 curvature depends on neither the lr nor the warmup, so
it is computed once per method × seed, in a sweep of its own (`init`: the method arms, sweep.analysis_at_init, one
training step whose pre-update loss is ℓ₀, the loss at init), not in every training cell; the training sweep (`train`,
this config's grid) runs no analysis. `--config.mode=sweep` runs the training sweep alone (same cells, so the
atlas resumes it). The axis parts' sweeps are `config.atlas.<part>` (`axes(scale)`: a grid, the keys it sets over this
config, seeds; experiments/atlas/axes.py adds what each measures), a group no run reads:
  trace     Post-LN + Xavier with warmup 0 and T_w, Pre-LN with warmup 0, at this config's model, peak lr 1e-3 (fixed a
            priori), `train.curvature_every`: η(t)·λ_max(H)(t) and Adam's η(t)·λ_max(P⁻¹H)(t) (analysis/tracking.py);
  width     at init, Pre-LN, heads fixed (µP's head dim grows with width, Tensor Programs V), d_ff = 4d: λ_max(H) and
            λ_max(P⁻¹H) per parameterization (`PARAMETERIZATIONS`, as configs/ntk.py and configs/mup.py set them;
            µP's base width the smallest d) × d_model;
  depth     at init, this config's width: λ_max(H) and the per-layer gradient norms per method (`DEPTH_METHODS`) × N
            (N+N layers);
  transfer  the width part's model trained briefly per parameterization × width × peak lr (`LRS`), one seed.
Methods (`ARMS`, one product of the union grid each, named by its label `NAMES[method]`, the name every report uses;
the keys they do not set keep the shared setup below):
  postln_xavier  Post-LN, Xavier (Vaswani et al. 2017)      postln_bert  Post-LN, BERT's N(0, 0.02) (claim 9's arm)
  preln          Pre-LN + final LN (Xiong et al. 2020)      tfixup       no norm, T-Fixup init (Huang et al. 2020)
  rezero         no norm, x + αF, α = 0 learned (Bachlechner et al. 2020); SkipInit (De & Smith 2020) at its α = 0
                 is the same model (a learnable scalar on each residual branch, 0 at init, no norm; the weights'
                 init is Xavier in both), so it is counted once, as this arm (tests/test_atlas.py checks the two
                 configs train bit-identically); `model.residual=skipinit` with `model.skipinit_alpha` > 0 is its
                 distinct variant, not an atlas arm
  scheduled      no norm, α 0 → 1 over a third of the run   deepnorm     LN(αx + F), DeepNet init (Wang et al. 2022)
                 (Su 2021a §6)
  admin          LN(ω ⊙ x + F), ω profiled (Liu et al. 2020)  dsinit    Post-LN, U(±γ/√l) (Zhang, Titov & Sennrich 2019)
Each arm × `optim.warmup_steps` ∈ {0, T_w} × `optim.learning_rate` ∈ LRS[scale] (log-spaced), × sweep.seeds. Adam
(β1 0.9, β2 0.98, ε 1e-9), schedule `linear_warmup` (warmup 0: a constant lr), no dropout, no label smoothing, the same
data order for every run (configs/claims/_training.py's setup), in every part; at paper the training claims' paper
recipe instead (configs/claims/_training.py RECIPE: dropout 0.3, label smoothing 0.1, inverse-square-root decay from
step 4000 with or without the warmup, 4096-token batches). Scales (config string):
  tiny   tests: 1+1 layers of the tiny preset, 6 steps of batch 8 on the synthetic task, 2 methods, 3 lrs, 1 seed;
         axes: trace 3 runs of 6 steps (λ every 2); width SP, µP × d {16, 32}; depth Post-LN, Pre-LN × N {1, 2};
         transfer µP × d {16, 32} × lr {1e-2, 1e-1}, 4 steps;
  cpu    the committed report: 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece vocabulary 2000, 200 steps of
         batch 32 (T_w = 20), Multi30k De→En (validation loss on 256 pairs, no decoding), 9 methods × 2 warmups × 6
         lrs × 2 seeds = 216 runs + 18 at-init analyses (the committed report, run before SkipInit was counted
         once, has 10 and 240); axes: trace 3 runs of 200 steps (λ every 10: analysis batch
         16, 20 Lanczos steps); width 2+2 layers, 3 parameterizations × d {32, 64, 128, 256} × 2 seeds; depth 5
         methods × N {2, 6, 12, 24} × 2 seeds; transfer 2+2 layers, 3 parameterizations × d {32, 64, 128} × 6 lrs,
         100 steps of batch 32, T_w = 10 (54 runs);
  paper  an accelerator: claim 6's paper model and recipe (6+6, d 512, 4 heads, d_ff 1024: fairseq's
         transformer_iwslt_de_en, the IWSLT14 model of Liu et al. 2020's recipe; 32 packed rows of 128 tokens), T_w = 4000 (Vaswani et al. 2017; Xiong et al. 2020), 7 lrs, 3 seeds, 20k steps where the claims run
         the papers' 100k (a fifth: the grid is 378 runs); axes: trace at that model
         (λ every 100 steps, batch 64, 80 Lanczos steps); width 6+6 layers, 8 heads, d {256, …, 2048} (µP base 256);
         depth N {6, 12, 24, 48} at d 512 (Liu et al. 2020 and Wang et al. 2022 train far deeper); transfer d {256,
         512, 1024} × 7 lrs, 2000 steps, T_w = 200.
Calibration of `cpu` (2026-11-24; 2 CPU cores shared with another training job, load average 5-6, so pessimistic):
alone, a 6+6 run of batch 32 on Multi30k trained 1.2 steps/s at d = 64 (vocab 8000 or 2000) and 4.6 steps/s at d = 32
(vocab 2000), hence d = 32. Through the driver (one method, 2 seeds, 30 steps): a training run took 23 s, ~19 s of it
per-run overhead (setup, compilation, the 256-pair evaluation, the checkpoint) at 7-9 steps/s; the at-init analysis
took 422 s for seed 0 (compilation dominates: operator 12 s, λ_max 42 s, λ_min 37 s, stability 124 s, 37 blocks
163 s; all 109 blocks projected to ~15 min, hence the block filter) and 50 s for seed 1 (same programs).
Projection as loaded: 240 × (19 + 200/7) s ≈ 3.2 h + 10 methods × 7.9 min ≈ 1.3 h + reports ≈ 4.6 h; on the free
machine (2-3× faster) ≈ 1.6-2.3 h, inside the 3 h budget. The sweep's ETA lines say which; if it does not fit,
train.num_steps and the block filter are the knobs, and ATLAS.md states the change.
The axis parts, one cell each through the driver (2026-11-24, the same 2 cores shared with the atlas's own run and
other jobs, load average 4-6, so pessimistic; wall time of the command, start-up and report included): trace,
Post-LN without warmup, 424 s (200 steps at ~1.3 steps/s with its 20 curvature records); width, at init, 100 s at
d = 256 (SP) and 88 s at d = 32 (µP) (compilation dominates: λ_max 28 s, λ_max(P⁻¹H) 33 s at d = 256); depth, at
init, 114 s at N = 2 and 692 s at N = 24 (Post-LN; compiling the 48-layer Lanczos program alone took 4 min); transfer
76 s at d = 128 (100 steps). A second seed reuses the compiled programs (the init part: 422 s, then 50 s), so the
at-init parts' seeds cost little. Projection as loaded: trace 3 × 7 min ≈ 21 min; width 12 × 1.6 min + seeds ≈ 25 min;
depth 5 methods × (2 + 3.5 + 6 + 11.5 min, N = 6, 12 interpolated) + seeds ≈ 2 h; transfer 54 × ~0.9 min ≈ 50 min:
≈ 3.5 h more, ~1.2-1.8 h on the free machine; depth's N = 24 is half of it (its knob: `--config.atlas.depth.grid`).
Imports only ml_collections and configs/claims' helpers.
"""

import ml_collections

from configs.claims._base import check_scale, claim_config, set_keys
from configs.claims._training import _TRAIN, RECIPE

NO_NORM = "model.norm_type=none;model.norm_position=none"
BERT = "model.norm_position=post;model.scale_embeddings=false;model.position=learned;model.embedding_norm=true"
ARMS = {  # method -> the keys of its product (the union grid's parts); '{alpha_step}' filled per scale
    "postln_xavier": "model.norm_position=post;init.scheme=xavier",
    "postln_bert": f"{BERT};init.scheme=bert",
    "preln": "model.norm_position=pre;init.scheme=xavier",
    "tfixup": f"{NO_NORM};init.scheme=tfixup",
    "rezero": f"{NO_NORM};model.residual=rezero;init.scheme=rezero",
    "scheduled": f"{NO_NORM};model.residual=scheduled;model.alpha_step={{alpha_step}};init.scheme=xavier",
    "deepnorm": "model.norm_position=post;model.residual=deepnorm;init.scheme=deepnet",
    "admin": "model.norm_position=post;model.residual=admin;init.scheme=admin",
    "dsinit": "model.norm_position=post;init.scheme=dsinit",
}
NAMES = {  # method -> its name in the reports: the label of its grid products (experiments/grid.py), recorded per run
    "postln_xavier": "Post-LN + Xavier",
    "postln_bert": "Post-LN + BERT 0.02",
    "preln": "Pre-LN",
    "tfixup": "T-Fixup",
    "rezero": "ReZero",
    "scheduled": "scheduled α",
    "deepnorm": "DeepNorm",
    "admin": "Admin",
    "dsinit": "DS-Init",
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
    "paper": {  # claim 6's paper model (configs/claims/_training.py SIZES['paper']: fairseq's transformer_iwslt_de_en)
        "model.preset": "base",
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.num_heads": 4,
        "model.d_ff": 1024,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
    },
}
RUN = {
    "tiny": {
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.eval_every": 6,
    },
    "cpu": {"data.batch_size": 32, "data.max_eval_loss_examples": 256, "train.eval_every": 200},
    "paper": {  # 4096-token batches as the claims' paper scale (fairseq's --max-tokens 4096)
        "data.pack": True,
        "data.batch_size": 32,
        "data.max_eval_loss_examples": -1,
        "train.eval_every": 5000,
    },
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

# The axis parts (issue 15 items 3-4), each a sweep of its own in <workdir>/<part>/ (experiments/atlas/axes.py adds
# what each measures): width and transfer sweep one product per parameterization × width (d_ff = 4d moves with d; the
# heads stay fixed, so µP's head dim grows with width, Tensor Programs V), depth one per method × N (N+N layers),
# trace the Post-LN (warmup 0, T_w) and Pre-LN (warmup 0) runs at the atlas's own model with train.curvature_every.
PARAMETERIZATIONS = {  # as each one's own config sets it (configs/ntk.py, configs/mup.py); init.scheme 'auto'
    "standard": "model.parameterization=standard",
    "ntk": "model.parameterization=ntk;model.scale_embeddings=false",
    "mup": "model.parameterization=mup;model.scale_embeddings=false;model.tie_embeddings=false",
}
_WIDE = {  # the width and transfer parts' model: Pre-LN, the scheme each parameterization implies, µP's base width
    "tiny": {"model.num_encoder_layers": 1, "model.num_decoder_layers": 1, "model.mup_base_width": 16},
    "cpu": {"model.num_encoder_layers": 2, "model.num_decoder_layers": 2, "model.mup_base_width": 32},
    "paper": {"model.num_encoder_layers": 6, "model.num_decoder_layers": 6, "model.mup_base_width": 256},
}
HEADS = {"tiny": 2, "cpu": 2, "paper": 8}
DEPTH_METHODS = ("postln_xavier", "preln", "deepnorm", "tfixup", "admin")  # ARMS keys
_P = tuple(PARAMETERIZATIONS)
AXES = {  # per scale: each axis part's sweep (widths d_model, depths N per stack, peak lrs, run lengths, seeds)
    "tiny": {
        "width": dict(widths=(16, 32), parameterizations=("standard", "mup"), seeds=1),
        "depth": dict(depths=(1, 2), methods=("postln_xavier", "preln"), seeds=1),
        "transfer": dict(widths=(16, 32), parameterizations=("mup",), lrs=(1e-2, 1e-1), steps=4, warmup=1),
        "trace": dict(lr=1e-3, curvature_every=2, seeds=1),
    },
    "cpu": {
        "width": dict(widths=(32, 64, 128, 256), parameterizations=_P, seeds=2),
        "depth": dict(depths=(2, 6, 12, 24), methods=DEPTH_METHODS, seeds=2),
        "transfer": dict(widths=(32, 64, 128), parameterizations=_P, lrs=LRS["cpu"], steps=100, warmup=10),
        "trace": dict(lr=1e-3, curvature_every=10, seeds=1),
    },
    "paper": {
        "width": dict(widths=(256, 512, 1024, 2048), parameterizations=_P, seeds=3),
        "depth": dict(depths=(6, 12, 24, 48), methods=DEPTH_METHODS, seeds=3),
        "transfer": dict(widths=(256, 512, 1024), parameterizations=_P, lrs=LRS["paper"], steps=2000, warmup=200),
        "trace": dict(lr=1e-3, curvature_every=100, seeds=1),
    },
}


def grid(scale: str) -> str:
  """The union grid: one product per method, × warmup {0, T_w} × the scale's learning rates."""
  lrs = ",".join(repr(lr) for lr in LRS[scale])
  alpha_step = repr(3.0 / STEPS[scale])  # scheduled α reaches 1 after a third of the run (as claim 10)
  return " | ".join(
      f"{NAMES[m]}: {ARMS[m].format(alpha_step=alpha_step)};optim.warmup_steps=0,{WARMUP[scale]};"
      f"optim.learning_rate={lrs}"
      for m in METHODS[scale]
  )


def _keys(values: dict) -> str:
  """Dotted keys as one product of single values, 'k=v;...' (the grid syntax: the command line can override it)."""
  text = lambda v: str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)
  return ";".join(f"{k}={text(v)}" for k, v in values.items())


def axes(scale: str) -> dict[str, dict]:
  """{part: {grid, overrides, seeds}}: the axis parts' sweeps at `scale` (AXES) over this config."""
  a = AXES[scale]
  wide = {**_WIDE[scale], "model.num_heads": HEADS[scale], "model.norm_position": "pre", "init.scheme": "auto"}
  w, d, t, r = a["width"], a["depth"], a["transfer"], a["trace"]
  sizes = lambda n: f"model.d_model={n};model.d_ff={4 * n}"
  lrs = ",".join(repr(lr) for lr in t["lrs"])
  steps = {
      "train.num_steps": t["steps"],
      "train.log_every": max(1, t["steps"] // 10),
      "train.eval_every": t["steps"],
      "train.checkpoint_every": t["steps"],
      "optim.warmup_steps": t["warmup"],
  }
  trace = {"optim.learning_rate": r["lr"], "train.curvature_every": r["curvature_every"]}
  return {
      "trace": dict(
          grid=" | ".join(
              f"{NAMES[m]} (warmup {w}): {ARMS[m]};optim.warmup_steps={w}"
              for m, w in (("postln_xavier", 0), ("postln_xavier", WARMUP[scale]), ("preln", 0))
          ),
          overrides=_keys(trace),
          seeds=r["seeds"],
      ),
      "width": dict(
          grid=" | ".join(
              f"{p}: {PARAMETERIZATIONS[p]};{sizes(n)}" for n in w["widths"] for p in w["parameterizations"]
          ),
          overrides=_keys(wide),
          seeds=w["seeds"],
      ),
      "depth": dict(
          grid=" | ".join(
              f"{NAMES[m]}: {ARMS[m]};model.num_encoder_layers={n};model.num_decoder_layers={n}"
              for n in d["depths"]
              for m in d["methods"]
          ),
          overrides="",
          seeds=d["seeds"],
      ),
      "transfer": dict(
          grid=" | ".join(
              f"{p}: {PARAMETERIZATIONS[p]};{sizes(n)};optim.learning_rate={lrs}"
              for n in t["widths"]
              for p in t["parameterizations"]
          ),
          overrides=_keys({**wide, **steps}),
          seeds=1,  # one seed: the optimum's shift is read on the lr grid, a factor √10 (cpu) per step
      ),
  }


def get_config(scale: str = "tiny") -> ml_collections.ConfigDict:
  """The atlas at `scale` (module docstring); the default `tiny` needs no data folder."""
  check_scale(scale)
  config = claim_config("atlas", scale, SIZES)
  config.mode = "atlas"  # main.py runs every part (experiments/atlas/run.py); 'sweep': the training grid alone
  config.claim.name = ""  # not a claim: the claim group stays at its default
  set_keys(config, _TRAIN)
  set_keys(config, RECIPE[scale])  # the papers' regularization and schedule at paper; nothing at tiny and cpu
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
  config.atlas = ml_collections.ConfigDict(axes(scale))  # the axis parts (experiments/atlas/axes.py); no run reads it
  config.atlas.parts = ""  # the parts main.py runs, comma-separated, in that order; '' = every part
  config.atlas.out = "reports"  # where ATLAS.md and atlas/ (figures, atlas.json) are written
  config.atlas.report_only = False  # run nothing: rewrite the report from the workdir
  config.atlas.redecide = False  # run nothing: re-decide <atlas.out>/atlas/atlas.json's measurements by today's rules
  return config
