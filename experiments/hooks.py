"""The step hooks a run's config asks for, built from `analysis/` for `train.loop.train_and_evaluate` (which cannot
import `analysis/`): main.py's train mode and every run of a sweep or claim use `step_hooks(exp)`.

  * `train.curvature_every = k > 0`: λ_max of the training loss's Hessian, its residual bound, the learning rate
    and their product at steps k, 2k, ... on the `analysis` group's operator settings and batches
    (analysis/tracking.py; metric names `analysis.tracking.NAMES`); with `analysis.preconditioned_top_k > 0` also
    λ_max of Adam's preconditioned Hessian P_t⁻¹H and η·λ_max(P_t⁻¹H) (`analysis.tracking.PRECONDITIONED_NAMES`),
    with the run's per-layer lr multipliers (µP's) in it: M·P_t⁻¹H.
"""

import dataclasses
from typing import Optional

import jax
import numpy as np

import analysis.run
import analysis.tracking
import models
import train.config
import train.experiment
import train.loop
import train.step
from configs.schema import contradiction
from models.inventory import boxed_param_shapes
from models.roles import Declared

# The fewest token ids a vocabulary has (pad, EOS, unknown: train/data/tokenizers.py): `check_before_runs` counts the
# parameters with this vocabulary, a lower bound on every run's n whatever its tokenizer turns out to be.
_MIN_VOCAB = 3


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


def step_hooks(exp: train.experiment.Experiment) -> list[train.loop.StepHook]:
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


def num_params_at_vocab(model_config, vocab_size: int) -> int:
  """The parameter count of `model_config` with a `vocab_size`-row vocabulary, from one abstract init (no compute;
  cached per config)."""
  boxed = boxed_param_shapes(dataclasses.replace(model_config, vocab_size=vocab_size))
  leaves = jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, Declared))
  return int(sum(np.prod(getattr(x, "value", x).shape) for x in leaves))


def num_params_without_vocab(model_config) -> int:
  """`num_params_at_vocab` at `_MIN_VOCAB` ids: a lower bound on the n of every run of that model (the bytes a basis
  needs only grow with n), known before its tokenizer is built."""
  return num_params_at_vocab(model_config, _MIN_VOCAB)


def check_before_runs(
    config: train.config.Config,
    where: str,
    analyzes: bool = False,
    *,
    mesh: Optional[jax.sharding.Mesh | jax.sharding.AbstractMesh] = None,
    num_params: Optional[int] = None,
) -> None:
  """The memory checks of a run's curvature, made before any run trains (`experiments.sweep.check_memory`), on the
  run's mesh (`mesh`: default this process's, `train.step.make_mesh`): with `train.curvature_every`, the records'
  Lanczos basis (`analysis.tracking.check_basis`); with `analyzes` (the run is analyzed at init or at checkpoints),
  the analysis's bases (`analysis.run.check_basis`). `num_params` defaults to `num_params_without_vocab`, a lower
  bound, so the check never refuses a run that fits; the run checks its exact n again when it starts."""
  checks = []
  if config.train.curvature_every:
    checks.append(
        (f"train.curvature_every={config.train.curvature_every} records λ_max", analysis.tracking.check_basis)
    )
  if analyzes:
    preconditioned = bool(config.analysis.preconditioned_top_k or config.analysis.update_sharpness)
    checks.append(
        ("the run's analysis", lambda a, n, mesh: analysis.run.check_basis(a, n, mesh, preconditioned=preconditioned))
    )
  if not checks:
    return
  n = num_params_without_vocab(config.model) if num_params is None else num_params
  bound = " (the model without its vocabulary rows)" if num_params is None else ""
  try:
    mesh = train.step.make_mesh(fsdp=config.mesh.fsdp) if mesh is None else mesh
  except ValueError as e:  # mesh.fsdp does not divide this process's devices
    raise ValueError(f"{where}: {e}") from None
  for what, check in checks:
    try:
      check(config.analysis, n, mesh)
    except ValueError as e:
      raise ValueError(f"{where}: {what} with a basis of at least {n} parameters{bound}: {e}") from None
