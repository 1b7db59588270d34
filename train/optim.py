"""The optimizer of a run, built from the typed `config.optim` at one boundary.

Contract:
  * `make_optimizer(optim_config, lr_multipliers=..., total_steps=...)` returns
    `(optax.GradientTransformation, schedule)`. The transformation is
    `clip (optional) -> optimizer (unit-peak schedule, weight decay) -> × peak lr -> per-leaf lr multipliers`.
    `optim.weight_decay_on` says which parameters decay (`decay_mask`, from the parameters' roles).
    The optimizer runs the schedule's shape with peak 1 and the peak `optim.learning_rate` multiplies its update
    afterwards from the optimizer state (`scale_by_peak_lr`): every schedule is linear in its peak, so the update
    is the same, and the runs of an lr sweep share one compiled program.
  * The schedule is `train.schedules.make_schedule`'s, evaluated at the 1-based update index t = count + 1.
  * The optimizers are `train.optimizers.OPTIMIZERS`; `config.optim` is typed and checked by
    `train.optim_config.OptimConfig` (bad values raise ValueError naming `optim.<key>`, before any compute).

The per-leaf multiplier transform is written here because optax has none; it is a few `jnp` lines, and tests check
it against exact ratios. Two options of the warmup question (docs/science.md §8) live in the modules they act in:
GI-Adam's ν₀ = g₀² (`train.optimizers`) and the untuned warmup 2/(1 − β₂) (`train.optim_config`).
"""

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from configs.schema import as_section
from models.roles import NORM_ROLES
from train import optim_config as optim_config_lib
from train.optimizers import INNER_LR_OPTIMIZERS, ROLE_OPTIMIZERS, adamw, get_optimizer
from train.schedules import get_schedule


class PeakLRState(NamedTuple):
  """The peak learning rate, a float32 scalar of the optimizer state."""

  peak: jax.Array


def scale_by_peak_lr(peak: float) -> optax.GradientTransformation:
  """Multiplies every update by the peak lr held in the optimizer state (module docstring: one compiled program for
  every peak of an lr sweep). Written here rather than `optax.inject_hyperparams(optax.scale)` because that
  multiplies by a float32 array, which turns bfloat16 updates into float32 ones; this casts the peak to each
  update's dtype, as the Python-float lr of `optax.scale_by_learning_rate` does, and stores it as a strongly typed
  float32 (a restored checkpoint compiles the same program)."""

  def init_fn(params):
    del params
    return PeakLRState(jnp.asarray(peak, jnp.float32))

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map(lambda u: u * state.peak.astype(u.dtype), updates), state

  return optax.GradientTransformation(init_fn, update_fn)


def scale_by_lr_multipliers(lr_multipliers) -> optax.GradientTransformation:
  """Multiplies each leaf's update by its multiplier (µP per-parameter lr, Yang & Hu 2021,
  "Tensor Programs V", Table 3). Chained last, so it scales weight decay too, exactly as a
  per-parameter learning rate would. optax has no per-leaf float scaling transform."""

  def init_fn(params):
    if jax.tree.structure(params) != jax.tree.structure(lr_multipliers):
      raise ValueError(
          "lr_multipliers must have the structure of the params; got "
          f"{jax.tree.structure(lr_multipliers)} for params {jax.tree.structure(params)}"
      )
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    del params
    scaled = jax.tree.map(lambda u, m: u * jnp.asarray(m, u.dtype), updates, lr_multipliers)
    return scaled, state

  return optax.GradientTransformation(init_fn, update_fn)


def make_schedule(optim_config, *, total_steps: Optional[int] = None) -> optax.Schedule:
  """The schedule `count -> lr` of `optim_config` (an `OptimConfig`, trusted; or its ConfigDict, typed and checked)."""
  cfg = as_section(
      optim_config_lib.OptimConfig, optim_config, lambda c: optim_config_lib.check_horizon(c, total_steps)
  )  # the door
  return _schedule(cfg, total_steps, float(cfg.learning_rate))


def _schedule(cfg: optim_config_lib.OptimConfig, total_steps: Optional[int], peak: float) -> optax.Schedule:
  """`cfg`'s schedule with peak `peak` (1.0: the unit schedule the optimizer runs, module docstring)."""
  return get_schedule(cfg.schedule)(
      learning_rate=peak,
      warmup_steps=cfg.warmup_steps,
      decay_steps=cfg.decay_steps or total_steps,
      min_lr_ratio=float(cfg.min_lr_ratio),
      rsqrt_d_model=cfg.rsqrt_d_model,
      decay_start=cfg.decay_start,
  )


# The roles `optim.weight_decay_on='weights'` leaves undecayed: the norms' gains and shifts and the biases (BERT's
# released optimizer, google-research/bert optimization.py: exclude_from_weight_decay=["LayerNorm", "layer_norm",
# "bias"]), and the residual scales (ReZero's α, LayerScale's diagonal), gains like a norm's that decay would pull to 0.
NO_DECAY_ROLES = (*NORM_ROLES, "bias", "residual_scale")


def decay_mask(weight_decay_on: str, param_roles) -> Optional[object]:
  """The weight-decay mask of `optim.weight_decay_on` (True = decay) over the params' `param_roles`
  (`models.param_roles`): None for 'all' (every parameter decays, no mask), else False on `NO_DECAY_ROLES`."""
  if weight_decay_on == "all":
    return None
  if param_roles is None:
    raise ValueError(f"optim.weight_decay_on={weight_decay_on!r} needs the parameters' roles (models.param_roles)")
  is_role = lambda x: hasattr(x, "role")
  return jax.tree.map(lambda r: r.role not in NO_DECAY_ROLES, param_roles, is_leaf=is_role)


def make_optimizer(
    optim_config,
    *,
    lr_multipliers=None,
    weight_decay_mask=None,
    total_steps: Optional[int] = None,
    param_roles=None,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """Builds `clip -> optimizer -> lr multipliers` and returns it with its schedule.

  Args:
    optim_config: the typed `config.optim` (an `OptimConfig`, trusted as `train.config.resolve` built it), or its
      ConfigDict (keys `OPTIM_KEYS`), typed and checked at this door (`configs.schema.as_section`).
    lr_multipliers: optional pytree of non-negative floats with the params' structure
      (µP per-parameter lr multipliers); each leaf's final update is multiplied by it.
    weight_decay_mask: optional pytree of bools with the params' structure; True = decay. Default: the mask of
      `optim.weight_decay_on` over `param_roles` (`decay_mask`).
    total_steps: number of updates in the run; the horizon when `optim.decay_steps` is 0.
    param_roles: the `models.roles.ParamRole` of every parameter (`models.param_roles`), read by the optimizers of
      `ROLE_OPTIMIZERS` (Muon: which parameters are hidden matrices) and by `decay_mask`.

  Returns:
    `(tx, schedule)`; `schedule(count)` is the lr of the update made when `count` updates
    have been applied (before any lr multiplier).
  """
  optim_config = as_section(
      optim_config_lib.OptimConfig, optim_config, lambda c: optim_config_lib.check_horizon(c, total_steps)
  )  # the door
  peak = float(optim_config.learning_rate)
  schedule = _schedule(optim_config, total_steps, peak)
  unit = _schedule(optim_config, total_steps, 1.0)
  if lr_multipliers is not None:
    for path, m in jax.tree_util.tree_leaves_with_path(lr_multipliers):
      if not (float(m) >= 0.0 and float(m) < float("inf")):
        raise ValueError(
            f"lr_multipliers{jax.tree_util.keystr(path)}={m!r} is invalid; " "valid choices: a finite number >= 0"
        )
  parts = []
  if optim_config.grad_clip_norm:
    parts.append(optax.clip_by_global_norm(optim_config.grad_clip_norm))
  tail = [scale_by_peak_lr(peak)]  # the peak lr as data (module docstring)
  if lr_multipliers is not None:
    tail.append(scale_by_lr_multipliers(lr_multipliers))
  name, kwargs = optim_config.name, {}
  if name in ROLE_OPTIMIZERS:
    kwargs.update(param_roles=param_roles, adamw=adamw)
  if name in INNER_LR_OPTIMIZERS:
    kwargs["tail"], tail = tail, []
  if weight_decay_mask is None:
    weight_decay_mask = decay_mask(optim_config.weight_decay_on, param_roles)
  parts.append(get_optimizer(name)(unit, optim_config, weight_decay_mask, **kwargs))
  return optax.chain(*parts, *tail), schedule
