"""Study 11 (issue 28): does the curvature at step 0 predict, cell by cell, where training breaks and warmup rescues?

    python main.py --config=configs/claims/edge.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/claims/edge
    python main.py --config=configs/claims/edge.py:tiny --workdir=/tmp/edge   # a minute, on the synthetic task
    python main.py --config=configs/claims/edge.py:cpu+added --config.data.dir=<Multi30k folder> \
        --workdir=runs/claims/edge_added      # cpu with the registry's methods added after its committed record

The design (rules, predictors and scores: experiments/claims/edge.py, fixed before its runs):
  methods  the atlas's registry (configs/atlas.py ARMS, named by NAMES); at `cpu` the 19 its committed record trained
           (`atlas.METHODS['cpu']`); `<scale>+added` appends `atlas.ADDED`; `paper` runs them all;
  cells    method × warmup {0, T_w} × a factor-2 peak-lr grid (`LRS`), T_w = 2/(1 − β₂) = 100 steps at β₂ = 0.98
           (Ma & Yarats 2021 §4), plus 4000 at `paper` (Vaswani et al. 2017 §5.3; Xiong et al. 2020); a constant lr
           after the warmup, so no decay confounds the peak lr in the early window; the grid is extended ×2 / ÷2 per
           method until its boundary is bracketed (experiments/claims/edge.py `extend`);
  at init  per method one product `train.num_steps=0;analysis.at_init=true`: in float64 on the run's own first
           batch, λ_max(H) with its residual bound, Adam's λ_max(P⁻¹H) at the run's ε and at 1e-8·RMS(g), the
           sharpness along Adam's first update, the Gauss–Newton λ_max and the batch sharpness (stability.json);
  horizon  `STEPS` steps, training loss every step (the early window, T_w + 50 steps: analysis/outcomes.py
           `early_class`), validation loss at steps 0 and the end (`classify`);
  trace    Post-LN + Xavier at `TRACE_LR`, with and without the warmup, with `train.curvature_every`: λ_max(H)(t) and
           λ_max(P_t⁻¹H)(t), warm-started (analysis/tracking.py), on the same batch;
  seeds    3 for every cell (the boundary cells need 3; the sweep gives every cell the same seeds).
Model and data: the atlas's (configs/atlas.py). Runs at cpu before any extension: 456 training runs of 200 steps +
57 at-init analyses + 6 trace runs, over 5 h on 2 cores (calibration: docs/design_log.md).
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


def products(scale: str, added: bool = False) -> tuple:
  """Per method, its training product (warmups × lrs) and its at-init product, both labelled with its name."""
  out = []
  for m in methods(scale, added):
    head = (("arm", atlas.NAMES[m]), *method_keys(m, scale))
    out.append((*head, ("optim.warmup_steps", WARMUPS[scale]), ("optim.learning_rate", LRS[scale])))
    out.append((*head, ("train.num_steps", 0), ("analysis.at_init", True)))
    if m in TRACE_METHODS:
      trace = (("optim.learning_rate", TRACE_LR[scale]), ("train.curvature_every", TRACE_EVERY[scale]))
      out.append((*head, ("optim.warmup_steps", WARMUPS[scale]), *trace))
  return tuple(out)


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
  if scale == "paper":  # 81 float64 vectors of n = 35.6M are 21.5 GiB, over the 4 GiB default
    config.analysis.max_basis_bytes = 40 * 2**30  # half an 80 GB accelerator
  config.sweep.products = products(scale, added=bool(plus))
  config.sweep.seeds = SEEDS[scale]
  return config
