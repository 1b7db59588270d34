"""Schedule-free AdamW (Defazio et al. 2024, "The Road Less Scheduled", §2, Alg. 1) on `optax.contrib.schedule_free`.

Three sequences, with β = `optim.b1` (the interpolation, 0.9 in the paper) and the base step d_t = g_t/(√v̂_t + ε)
(Adam without momentum: optax's `scale_by_rms` with bias correction and ε outside the root, β₂ = `optim.b2`):
    y_t     = (1 − β)·z_t + β·x_t                      the point where the gradient g_t is taken (the train params)
    z_{t+1} = z_t − γ_t·(d_t + λ·y_t)                  the SGD-like sequence (decoupled decay at y, λ = weight_decay)
    x_{t+1} = (1 − c_{t+1})·x_t + c_{t+1}·z_{t+1},   c_{t+1} = γ_t²/Σ_{i≤t} γ_i²   (their §4 weighting, power 2)
so x_T is the γ²-weighted average of z_2 … z_{T+1}, the point to evaluate.

Warmup: γ_t = η·min(1, t/T_w) (`optim.schedule` 'linear_warmup' or 'constant'; the method replaces a decay). One
1-based t sets the z step and the averaging weight, as in the paper's reference code (optax's `schedule_free_adamw`
reads t − 1 for the z step), so `optax.contrib.schedule_free` gets the schedule shifted by one. The
weights c use the running max of γ (the reference's lr_max), equal to γ_t under a monotone warmup, so the warmup's
small steps get small weight in x.

Which is which (stated once, used by the loop): the train state's `params` are y (gradients, the
train-step loss and every train metric are at y); the optimizer state holds z (`ScheduleFreeState.z`), so a
checkpoint of the train state (y, z, the weight sum, Adam's v) resumes bit for bit; x is derived,
x = (y − (1 − β)·z)/β (`optax.contrib.schedule_free_eval_params`, `eval_params` here), and is what evaluation and
decoding use (`train.state.TrainState.eval_variables`); curvature analyses read y, where the steps are taken.

The peak lr (`train.optim.scale_by_peak_lr`) and the per-parameter multipliers sit inside the base optimizer
(`tail`), before z: y is not linear in a factor applied to its update; the weights c, invariant to the peak, get the
unit-peak schedule.
"""

from typing import Any, Sequence

import jax
import optax
from optax import contrib

from configs.schema import contradiction, invalid

# The schedules schedule-free learning runs under: no decay (the method's point), an optional linear warmup.
SCHEDULES = ("constant", "linear_warmup")
WEIGHT_LR_POWER = 2.0  # c_{t+1} ∝ γ_t² (Defazio et al. 2024, §4 and their reference code's default)


def schedule_free_adamw(
    lr: optax.Schedule, cfg, weight_decay_mask=None, *, tail: Sequence[optax.GradientTransformation] = ()
) -> optax.GradientTransformation:
  """Schedule-free AdamW (module docstring) with the unit-peak schedule `lr`; `tail` (the peak lr, the per-leaf
  multipliers) is chained after the base step, inside the wrapper."""
  base = optax.chain(
      optax.scale_by_rms(decay=cfg.b2, eps=cfg.eps, eps_in_sqrt=False, bias_correction=True),
      optax.add_decayed_weights(cfg.weight_decay, mask=weight_decay_mask),  # λ·y, decoupled (Defazio et al. §4)
      optax.scale_by_learning_rate(lr),
      *tail,
  )
  # ScheduleFreeState.step_count starts at 1 while the base's count starts at 0: read the schedule at the same t.
  return contrib.schedule_free(
      base, learning_rate=lambda step: lr(step - 1), b1=cfg.b1, weight_lr_power=WEIGHT_LR_POWER
  )


def check_config(cfg) -> None:
  """Schedule-free's constraints on `config.optim`; ValueError naming the keys, the values and the valid choices."""
  if cfg.name != "schedule_free_adamw":
    return
  if cfg.schedule not in SCHEDULES:
    raise contradiction(
        "optim.name",
        cfg.name,
        "optim.schedule",
        cfg.schedule,
        f"schedule-free learning replaces the decay (Defazio et al. 2024); valid: {list(SCHEDULES)}",
    )
  if cfg.b1 == 0:  # x = (y − (1 − β)·z)/β
    raise invalid("optim.b1", cfg.b1, "a number in (0, 1) for optim.name='schedule_free_adamw' (the interpolation β)")


def _state(opt_state: Any):
  found = [s for s in jax.tree.leaves(opt_state, is_leaf=_is_state) if _is_state(s)]
  return found[0] if found else None


def _is_state(x) -> bool:
  return isinstance(x, contrib.ScheduleFreeState)


def eval_params(opt_state: Any, params: Any) -> Any:
  """The parameters to evaluate: x = (y − (1 − β)·z)/β under a schedule-free optimizer state (module docstring),
  `params` themselves under any other."""
  state = _state(opt_state)
  return params if state is None else contrib.schedule_free_eval_params(state, params)
