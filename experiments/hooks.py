"""The step hooks a run's config asks for, built from `analysis/` for `train.loop.train_and_evaluate` (which cannot
import `analysis/`): main.py's train mode and every run of a sweep or claim use `step_hooks(exp)`.

  * `train.curvature_every = k > 0`: λ_max of the training loss's Hessian, its residual bound, the learning rate
    and their product at steps k, 2k, ... on the `analysis` group's operator settings and batches
    (analysis/tracking.py; metric names `analysis.tracking.NAMES`); with `analysis.preconditioned_top_k > 0` also
    λ_max of Adam's preconditioned Hessian P_t⁻¹H and η·λ_max(P_t⁻¹H) (`analysis.tracking.PRECONDITIONED_NAMES`),
    with the run's per-layer lr multipliers (µP's) in it: M·P_t⁻¹H.
"""

import jax

import analysis.tracking
import models
import train.loop
from models.config import contradiction


def _adam(config) -> dict:
  """Adam's constants for the preconditioned λ_max (checked before training: the optimizer must be Adam's)."""
  if config.optim.name not in analysis.tracking.ADAM_OPTIMIZERS:
    raise contradiction(
        "analysis.preconditioned_top_k",
        config.analysis.preconditioned_top_k,
        "optim.name",
        config.optim.name,
        f"train.curvature_every records λ_max of Adam's preconditioned Hessian, which needs optim.name in "
        f"{list(analysis.tracking.ADAM_OPTIMIZERS)}; set analysis.preconditioned_top_k=0 for another optimizer",
    )
  return dict(beta1=float(config.optim.b1), beta2=float(config.optim.b2), eps=float(config.optim.eps))


def step_hooks(exp: train.loop.Experiment) -> list[train.loop.StepHook]:
  """The `StepHook`s of `exp.config` (none by default); built, and their settings checked, before training."""
  config = exp.config
  hooks = []
  if config.train.curvature_every:
    n, size = config.analysis.num_batches, config.analysis.batch_size
    fn = analysis.tracking.curvature_hook(
        config.analysis,
        model=exp.model,
        batches=exp.batches(n, size),
        schedule=exp.schedule,
        num_params=sum(x.size for x in jax.tree.leaves(exp.state.params)),
        mesh=exp.mesh,
        mlm_mask_rate=config.train.mlm_mask_rate,
        adam=_adam(config) if config.analysis.preconditioned_top_k else None,
        lr_multipliers=models.lr_multipliers(exp.state.params, exp.model.config),
    )
    hooks.append(train.loop.StepHook(config.train.curvature_every, fn))
  return hooks
