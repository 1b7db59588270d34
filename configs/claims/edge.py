"""Study 11, the atlas's question cell by cell (issue 28): does the curvature at step 0 predict where training
breaks, and where warmup rescues it?

    python main.py --config=configs/claims/edge.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/edge
    python main.py --config=configs/claims/edge.py:tiny --workdir=/tmp/edge   # a minute, on the synthetic task
    python main.py --config=configs/claims/edge.py:cpu+added --config.data.dir=<Multi30k folder> \
        --workdir=runs/claims/edge_added      # cpu with the registry's methods added after its committed record

The design (rules, predictors and scores: experiments/claims/edge.py, fixed before its runs):
  methods  every method of the atlas's registry (configs/atlas.py ARMS, named by NAMES: the label of each product,
           recorded with every run): the nine classic methods and the ten rules of 2024-26 (DyT, Derf, Peri-LN,
           HybridNorm, Mix-LN, LayerNorm scaling, LayerScale, QK-norm, z-loss, CompleteP), SkipInit counted once (it
           is ReZero's model at α = 0: configs/atlas.py); at `cpu` the 19 its committed record trained
           (`atlas.METHODS['cpu']`), so a rerun reproduces that record's verdict; the config string `cpu+added` (or
           `tiny+added`) appends the methods registered after it (`atlas.ADDED`: the init schemes megatron,
           mitchell, small_init, OLMo 2's reordered norm and init, soft-caps, gated attention, QK-clip), which the
           cross-method boundary rules then count; `paper` runs them all;
  cells    method × warmup {0, T_w} × a factor-2 peak-lr grid (`LRS`); T_w = 2/(1 − β₂) = 100 steps at β₂ = 0.98, the
           rule of thumb of Ma & Yarats 2021 (§4, "2·(1 − β₂)⁻¹ iterations") for Adam's warmup; `paper` adds the
           4000 steps of Vaswani et al. 2017 (§5.3) and Xiong et al. 2020. A constant lr after the warmup (schedule
           `linear_warmup`; warmup 0: a constant lr): the early outcome reads the steps right after the warmup, where
           a decay would confound the peak lr (at `paper` the papers' recipe decays from step 4000 on,
           configs/claims/_training.py RECIPE: after the early windows of warmups 0 and 100). The grid is extended per method, ×2 above and ÷2 below, until its
           boundary is bracketed (experiments/claims/edge.py `extend`; the runner adds the products round by round);
  at init  per method one more product, `train.num_steps=0;analysis.at_init=true`: the step-0 analysis in float64
           of the run's own first batch (`analysis.batch_size` = `data.batch_size` and `analysis.num_batches` = 1: the
           first global batch of a fresh pass in the same data order, the batch the training runs take first; the
           init depends on the seed only, so every cell of a method × seed starts from this model and batch):
           λ_max(H) and its residual bound, Adam's λ_max(P⁻¹H) at the run's ε and at 1e-8·RMS(g) (ε's influence),
           the sharpness along Adam's first update, the Gauss–Newton λ_max and the batch sharpness
           (analysis/run.py stability.json);
  horizon  `STEPS` steps, training loss logged every step (the early window, T_w + 50 steps, is read from it:
           analysis/outcomes.py `early_class`), validation loss at steps 0 and the end (the final class:
           `classify`);
  trace    Post-LN + Xavier at one lr (`TRACE_LR`), with and without the warmup, with `train.curvature_every`:
           λ_max(H)(t) and λ_max(P_t⁻¹H)(t) through the run, warm-started (analysis/tracking.py), on the same batch;
  seeds    3 for every cell (≥ 2 everywhere and 3 at the boundary cells, as the issue asks: the sweep gives each
           cell the same seeds, so the boundary's third seed is every cell's).
The model and data are the atlas's (configs/atlas.py: cpu 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece
vocabulary 2000, batch 32, Multi30k De→En, validation loss on 256 pairs; tiny the tests' synthetic task).
Runs at cpu before any extension: 19 methods × 4 lrs × 2 warmups × 3 seeds = 456 training runs of 200 steps + 57
at-init analyses + 6 trace runs. Calibrated (2026-11-26, DyT, one seed, niced beside claim 6's training on the same 2
cores, so pessimistic): the at-init analysis 261 s (compiling dominates: operator 7 s, λ_max(H) 49 s, λ_max(P⁻¹H) at
two ε and the update sharpness 118 s, the Gauss–Newton λ_max and the batch sharpness 74 s; a later seed of the same
method reuses the compiled programs through the sweep's persistent cache), a 200-step training run 48-62 s (~20 s of
it start-up and evaluation); the extension took 4 rounds for DyT (4e-3 → 6.4e-2, unstable early only at 6.4e-2).
Alone the machine is ~1.5× faster: ≈ 456 × 35 s ≈ 4.4 h of training + ≈ 1 h of analyses + the extension rounds'
runs: more than the 3 hours of one session, so its runs' records are committed as they land and the next session
resumes (experiments/reproduce.py).
"""

from configs import atlas
from configs.claims._atlas_cells import method_keys
from configs.claims._base import check_scale, set_keys

LRS = {  # factor 2; the extension rounds widen it per method until each boundary is bracketed
    "tiny": (1e-3, 1e-1),
    "cpu": (1e-3, 2e-3, 4e-3, 8e-3),
    "paper": (1.25e-4, 2.5e-4, 5e-4, 1e-3, 2e-3),
}
WARMUPS = {"tiny": (0, 2), "cpu": (0, 100), "paper": (0, 100, 4000)}  # 2/(1 − β₂) = 100 at β₂ = 0.98 (docstring)
STEPS = {"tiny": 6, "cpu": 200, "paper": 20_000}
SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
ANALYSIS = {  # the step-0 predictors only (no spectrum, trace, blocks, profiles), in float64
    "analysis.dtype": "float64",
    "analysis.num_batches": 1,
    "analysis.top_k": 1,
    "analysis.bottom_k": 0,
    "analysis.preconditioned_top_k": 1,
    "analysis.update_sharpness": True,
    "analysis.edge_predictors": True,
    "analysis.blocks": False,
    "analysis.spectrum": False,
    "analysis.trace_probes": 0,
    "analysis.grad_norms": False,
    "analysis.signal": False,
}
LANCZOS = {"tiny": 6, "cpu": 20, "paper": 80}  # steps of each λ_max run; its residual bound is recorded with it
# The trace (Kalra & Barkeshli 2024's mechanism measured directly): Post-LN + Xavier at one lr, with and without the
# warmup, recording λ_max(H) and λ_max(P_t⁻¹H) every `TRACE_EVERY` steps (warm-started, `analysis.tracking_tol`): does
# the sharpness fall during the warmup, and does η(t)·λ(t) stay below c? 4e-3 at cpu is where claim 6's Post-LN
# collapses without warmup and trains with 100 steps of it (reports/reproduction/warmup/records).
TRACE_METHODS = ("postln_xavier",)
TRACE_LR = {"tiny": 1e-1, "cpu": 4e-3, "paper": 1e-3}
TRACE_EVERY = {"tiny": 2, "cpu": 10, "paper": 100}


def methods(scale: str, added: bool = False) -> tuple[str, ...]:
  """The atlas's methods at `scale`, then (`added`) those of `atlas.ADDED` the scale lacks."""
  return atlas.METHODS[scale] + (tuple(m for m in atlas.ADDED if m not in atlas.METHODS[scale]) if added else ())


def grid(scale: str, added: bool = False) -> str:
  """Per method, its training product (warmups × lrs) and its at-init product, both labelled with its name."""
  lrs = ",".join(repr(lr) for lr in LRS[scale])
  warmups = ",".join(str(w) for w in WARMUPS[scale])
  products = []
  for m in methods(scale, added):
    keys = method_keys(m, scale)
    products.append(f"{atlas.NAMES[m]}: {keys};optim.warmup_steps={warmups};optim.learning_rate={lrs}")
    products.append(f"{atlas.NAMES[m]}: {keys};train.num_steps=0;analysis.at_init=true")
    if m in TRACE_METHODS:
      products.append(
          f"{atlas.NAMES[m]}: {keys};optim.warmup_steps={warmups};optim.learning_rate={TRACE_LR[scale]!r};"
          f"train.curvature_every={TRACE_EVERY[scale]}"
      )
  return " | ".join(products)


def get_config(arg: str = "cpu"):
  """Study 11 at the scale `arg` names; `<scale>+added` appends `atlas.ADDED` (module docstring)."""
  scale, plus, variant = arg.partition("+")
  if plus and variant != "added":
    raise ValueError(f"config string {arg!r} is invalid; valid: '<scale>' or '<scale>+added'")
  check_scale(scale)
  config = atlas.get_config(scale)
  config.mode = "claim"
  config.claim.name = "edge"
  set_keys(config, ANALYSIS)
  set_keys(
      config,
      {
          "analysis.batch_size": config.data.batch_size,  # the run's own first batch (docstring)
          "analysis.lanczos_steps": LANCZOS[scale],
          "analysis.tracking_tol": 1e-2,  # the trace's records: warm-started, stopped at a 1% residual bound
          "train.num_steps": STEPS[scale],
          "train.log_every": 1,  # the early window reads every step's training loss
          "train.eval_every": STEPS[scale],
          "train.checkpoint_every": STEPS[scale],
      },
  )
  if scale == "paper":  # 81 float64 vectors of n = 35.6M are 21.5 GiB: the 4 GiB default stopped every run's
    config.analysis.max_basis_bytes = 40 * 2**30  # step-0 analysis; 40 GiB is half an 80 GB accelerator
  config.sweep.grid = grid(scale, added=bool(plus))
  config.sweep.seeds = SEEDS[scale]
  return config
