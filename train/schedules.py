"""Learning-rate schedules: a registry of builders, each returning an optax schedule `count -> lr`.

Contract:
  * `get_schedule(name)` returns the builder registered in `SCHEDULES` (an unknown name raises ValueError naming
    `optim.schedule` and the valid choices); `train.optim.make_schedule` calls it with the values of `config.optim`.
  * Schedules are optax schedules: `schedule(count) -> lr`, where `count` is the number of
    updates already applied (optax's own counter, 0 for the first update). Every formula
    below is written in the 1-based update index **t = count + 1**, so the first update
    already has a non-zero learning rate (a 0-lr first step wastes a batch and makes
    `t^{-1/2}` undefined) and the last of `decay_steps` updates uses the end value.
    A training loop that logs `schedule(state.step)` before the update logs the lr used.

The inverse-square-root (Noam) schedule is written here because optax has none; it is a few `jnp` lines, and
tests check it against hand-computed values of the docs/science.md §8 formula.
"""

import math
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax

from configs.schema import invalid

# Every builder takes the same keyword arguments (unused ones are ignored) and returns an
# optax schedule `count -> lr` evaluated at t = count + 1 (see the module docstring).


def _at_one_based(schedule: optax.Schedule) -> optax.Schedule:
  """Evaluates `schedule` at t = count + 1 (the 1-based index of the update)."""
  return lambda count: schedule(count + 1)


def constant(*, learning_rate: float, **_: Any) -> optax.Schedule:
  """η_t = η: no warmup, no decay."""
  return optax.constant_schedule(learning_rate)


def linear_warmup(*, learning_rate: float, warmup_steps: int, **_: Any) -> optax.Schedule:
  """η_t = η·min(1, t/T_w) (docs/science.md §8, linear warmup; Goyal et al. 2017), then constant.

  T_w = 0 is the constant schedule (the limit of the formula).
  """
  if warmup_steps == 0:
    return optax.constant_schedule(learning_rate)
  # linear_schedule clamps at end_value for t >= T_w, which is the min(1, .) of the formula.
  return _at_one_based(optax.linear_schedule(0.0, learning_rate, warmup_steps))


def rsqrt(*, learning_rate: float, warmup_steps: int, rsqrt_d_model: Optional[int], **_: Any) -> optax.Schedule:
  """Noam / inverse square root (Vaswani et al. 2017, Eq. 3; docs/science.md §8).

  With `rsqrt_d_model = d > 0` this is exactly the paper's rule
    η_t = η_0 · d^{-1/2} · min(t^{-1/2}, t·T_w^{-3/2}),
  so η_0 is the paper's dimensionless factor (1.0 in the paper; peak lr η_0/√(d·T_w)).
  With `rsqrt_d_model` 0 or None the d^{-1/2} factor is replaced by the constant that makes the
  peak equal η_0 at t = T_w:  η_t = η_0 · min(√(T_w/t), t/T_w).
  T_w = 0 is treated as T_w = 1, which for t >= 1 equals the T_w -> 0 limit (pure t^{-1/2}).
  """
  t_w = float(max(warmup_steps, 1))
  if rsqrt_d_model:
    scale = learning_rate / math.sqrt(rsqrt_d_model)
  else:
    scale = learning_rate * math.sqrt(t_w)

  def schedule(count):
    t = jnp.asarray(count, jnp.float32) + 1.0
    return scale * jnp.minimum(jax.lax.rsqrt(t), t * t_w**-1.5)

  return schedule


def warmup_rsqrt(*, learning_rate: float, warmup_steps: int, decay_start: int = 0, **_: Any) -> optax.Schedule:
  """Linear warmup, then inverse-square-root decay from a step T_d that need not be the warmup's end:
    η_t = η · min(1, t/T_w) · min(1, √(T_d/t)),   T_d = optim.decay_start, or T_w when it is 0.
  With T_d = T_w this is the normalised Noam rule η·min(t/T_w, √(T_w/t)) (Vaswani et al. 2017, Eq. 3; fairseq's
  `inverse_sqrt`, the schedule of Xiong et al. 2020 §3.2 after their warmup), as `rsqrt` with rsqrt_d_model = 0. With
  T_w = 0 and T_d > 0 the warmup alone is removed: η until T_d, then the same decay as the arm that warms up over
  T_d steps, so a warmup / no-warmup comparison differs in the first T_d steps only (`rsqrt` with T_w = 0 decays as
  η/√t from the first step: at t = 4000 that arm's lr is 63× below its twin's). T_w = T_d = 0 is η/√t.
  """
  t_w = float(warmup_steps)
  t_d = float(max(decay_start or warmup_steps, 1))

  def schedule(count):
    t = jnp.asarray(count, jnp.float32) + 1.0
    ramp = jnp.minimum(1.0, t / t_w) if t_w > 0 else 1.0
    return learning_rate * ramp * jnp.minimum(1.0, jnp.sqrt(t_d / t))

  return schedule


def warmup_cosine(
    *, learning_rate: float, warmup_steps: int, decay_steps: int, min_lr_ratio: float, **_: Any
) -> optax.Schedule:
  """Linear warmup to η over T_w, then cosine decay (Loshchilov & Hutter 2017, SGDR) to
  η·min_lr_ratio at t = decay_steps (decay_steps counts the warmup, as in optax)."""
  return _at_one_based(
      optax.warmup_cosine_decay_schedule(
          init_value=0.0,
          peak_value=learning_rate,
          warmup_steps=warmup_steps,
          decay_steps=decay_steps,
          end_value=learning_rate * min_lr_ratio,
      )
  )


def warmup_linear_decay(
    *, learning_rate: float, warmup_steps: int, decay_steps: int, min_lr_ratio: float, **_: Any
) -> optax.Schedule:
  """Linear warmup to η over T_w, then linear decay to η·min_lr_ratio at t = decay_steps
  (BERT, Devlin et al. 2019 §A.2: warmup 10^4 steps then linear decay)."""
  warmup = optax.linear_schedule(0.0, learning_rate, warmup_steps)
  decay = optax.linear_schedule(learning_rate, learning_rate * min_lr_ratio, decay_steps - warmup_steps)
  return _at_one_based(optax.join_schedules([warmup, decay], [warmup_steps]))


SCHEDULES: dict[str, Callable[..., optax.Schedule]] = {
    "constant": constant,
    "linear_warmup": linear_warmup,
    "rsqrt": rsqrt,
    "warmup_rsqrt": warmup_rsqrt,
    "warmup_cosine": warmup_cosine,
    "warmup_linear_decay": warmup_linear_decay,
}
# Schedules that need a finite horizon (optim.decay_steps or the run's total steps).
DECAYING_SCHEDULES = ("warmup_cosine", "warmup_linear_decay")


def get_schedule(name: str) -> Callable[..., optax.Schedule]:
  """Returns the schedule builder registered under `name`.

  Builders take keyword arguments `learning_rate, warmup_steps, decay_steps, min_lr_ratio,
  rsqrt_d_model, decay_start` (each ignores those it does not use) and return `count -> lr`.
  """
  if name not in SCHEDULES:
    raise invalid("optim.schedule", name, sorted(SCHEDULES))
  return SCHEDULES[name]
