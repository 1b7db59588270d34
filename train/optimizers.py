"""The optimizer registry: `OPTIMIZERS` maps `optim.name` to a builder `(schedule, optim_config, weight_decay_mask)
-> optax.GradientTransformation`, and `get_optimizer(name)` raises naming the valid ones.

Contract:
  * Each builder runs the (unit-peak) schedule it is given; `train.optim.make_optimizer` chains the clip before it
    and the peak lr and per-leaf multipliers after it.
  * Weight decay is decoupled everywhere (Loshchilov & Hutter 2019, AdamW/SGDW): update = -η_t·(direction + λ·θ),
    masked by the optional `weight_decay_mask` (True = decay) so biases and norm scales can be exempt.
  * The name tuples (`WEIGHT_DECAY_OPTIMIZERS`, `GRADIENT_INIT_OPTIMIZERS`, `ROLE_OPTIMIZERS`, `INNER_LR_OPTIMIZERS`)
    say which options each optimizer reads; `train.optim_config` checks `config.optim` against them.
  * `optim.second_moment_init='gradient'` (GI-Adam, Kalra & Barkeshli 2024, §6): Adam's second moment starts from
    ν₀ = g₀² instead of 0, the rest of Adam unchanged, so the first bias-corrected ν̂₁ is g₀²/(1 − β₂) and the first
    updates are √(1 − β₂) times Adam's, growing back over ~1/(1 − β₂) steps: a warmup built into the optimizer.
"""

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from configs.schema import invalid
from train import muon as muon_lib
from train import schedule_free as schedule_free_lib


# Builders: (schedule, optim_config, weight_decay_mask) -> GradientTransformation.
def _decoupled_decay(cfg, weight_decay_mask) -> list:
  """[add λ·θ] when λ > 0, placed before the lr scaling so the decay is η_t·λ·θ (AdamW)."""
  if not cfg.weight_decay:
    return []
  return [optax.add_decayed_weights(cfg.weight_decay, mask=weight_decay_mask)]


SECOND_MOMENT_INITS = ("zero", "gradient")
# Optimizers whose state is optax's `ScaleByAdamState` (mu, nu), which `optim.second_moment_init` sets.
GRADIENT_INIT_OPTIMIZERS = ("adam", "adamw", "radam")


def second_moment_from_first_gradient(inner: optax.GradientTransformation) -> optax.GradientTransformation:
  """GI-Adam (Kalra & Barkeshli 2024 §6): `inner` (an `optax.scale_by_adam` / `scale_by_radam`) with its second
  moment started from the first gradient, ν₀ = g₀².

  optax's `init` sees the parameters, not a gradient, so ν₀ is set at the first update: when the state's count is 0,
  ν is replaced by g² before `inner.update` runs, which then computes ν₁ = β₂·g₀² + (1 − β₂)·g₀² = g₀² and the usual
  bias corrections. Written here because optax has no hook for ν₀; everything else is optax's own
  `ScaleByAdamState` and update (tests/test_optim.py checks the first updates against optax started from ν₀ = g₀²).
  """

  def update_fn(updates, state, params=None):
    first = state.count == 0
    nu = jax.tree.map(lambda n, g: jnp.where(first, jnp.square(g).astype(n.dtype), n), state.nu, updates)
    return inner.update(updates, state._replace(nu=nu), params)

  return optax.GradientTransformation(inner.init, update_fn)


def _scale_by_adam(cfg) -> optax.GradientTransformation:
  """optax's Adam direction, with ν₀ = g₀² under `optim.second_moment_init='gradient'`."""
  direction = optax.scale_by_adam(b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
  return second_moment_from_first_gradient(direction) if cfg.second_moment_init == "gradient" else direction


def adam(lr: optax.Schedule, cfg, weight_decay_mask=None) -> optax.GradientTransformation:
  """Adam (Kingma & Ba 2015), no weight decay (use `adamw`): `optax.adam`'s chain, scale_by_adam then the lr."""
  del weight_decay_mask
  return optax.chain(_scale_by_adam(cfg), optax.scale_by_learning_rate(lr))


def adamw(lr: optax.Schedule, cfg, weight_decay_mask=None) -> optax.GradientTransformation:
  """AdamW (Loshchilov & Hutter 2019): Adam plus decoupled decay η_t·λ·θ (`optax.adamw`'s chain)."""
  return optax.chain(
      _scale_by_adam(cfg),
      optax.add_decayed_weights(cfg.weight_decay, mask=weight_decay_mask),
      optax.scale_by_learning_rate(lr),
  )


def sgd(lr: optax.Schedule, cfg, weight_decay_mask=None) -> optax.GradientTransformation:
  """SGD with heavy-ball or Nesterov momentum (Sutskever et al. 2013) and decoupled decay
  (SGDW, Loshchilov & Hutter 2019). Unlike Adam its update is proportional to the gradient
  (docs/science.md §8), so it feels the gradient-scale effects of init and norm placement."""
  parts = []
  if cfg.momentum:
    parts.append(optax.trace(decay=cfg.momentum, nesterov=cfg.nesterov))
  parts += _decoupled_decay(cfg, weight_decay_mask)
  parts.append(optax.scale_by_learning_rate(lr))
  return optax.chain(*parts)


def adafactor(lr: optax.Schedule, cfg, weight_decay_mask=None) -> optax.GradientTransformation:
  """Adafactor (Shazeer & Stern 2018) with the T5 settings (Raffel et al. 2020, Mesh TF).

  T5 defaults kept: factored second moments for matrices whose two dims are both
  >= `adafactor_min_dim_size_to_factor` (128), second-moment decay t^{-0.8}
  (`adafactor_decay_rate`), update clipping at RMS 1.0 (`adafactor_clipping_threshold`,
  0/None = off), **no momentum** (β1 = 0; `b1`/`momentum` are ignored), eps 1e-30, and
  the *relative* step: the lr is multiplied by max(1e-3, RMS(θ)) per tensor when
  `adafactor_param_scale` is True. The paper's relative step *size* ρ_t = min(1e-2, t^{-1/2})
  is not built in: our lr comes from the schedule (T5 used 0.01 for 10^4 steps then
  t^{-1/2}; `rsqrt` with `rsqrt_d_model=0`, `learning_rate=0.01`, `warmup_steps=10^4`
  is the nearest entry, with linear instead of constant warmup). Weight decay is made
  decoupled-and-lr-scaled like the other optimizers by passing η_t·λ as optax's rate.
  """
  decay = None
  if cfg.weight_decay:
    decay = lambda count: cfg.weight_decay * lr(count)  # noqa: E731  (η_t·λ, see docstring)
  return optax.adafactor(
      learning_rate=lr,
      min_dim_size_to_factor=cfg.adafactor_min_dim_size_to_factor,
      decay_rate=cfg.adafactor_decay_rate,
      multiply_by_parameter_scale=cfg.adafactor_param_scale,
      clipping_threshold=cfg.adafactor_clipping_threshold or None,
      momentum=None,
      weight_decay_rate=decay,
      weight_decay_mask=weight_decay_mask,
  )


def radam(lr: optax.Schedule, cfg, weight_decay_mask=None) -> optax.GradientTransformation:
  """RAdam (Liu et al. 2020, "On the Variance of the Adaptive Learning Rate and Beyond"):
  rectifies Adam's early-step variance, the paper's explanation of why warmup helps;
  optional decoupled decay."""
  direction = optax.scale_by_radam(b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
  if cfg.second_moment_init == "gradient":
    direction = second_moment_from_first_gradient(direction)
  return optax.chain(
      direction,
      *_decoupled_decay(cfg, weight_decay_mask),
      optax.scale_by_learning_rate(lr),
  )


OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "adam": adam,
    "adamw": adamw,
    "sgd": sgd,
    "adafactor": adafactor,
    "radam": radam,
    "muon": muon_lib.muon,  # Jordan et al. 2024; Liu et al. 2025 (train/muon.py)
    "schedule_free_adamw": schedule_free_lib.schedule_free_adamw,  # Defazio et al. 2024 (train/schedule_free.py)
}
# Optimizers that read optim.weight_decay; any other with weight_decay > 0 is a config error.
WEIGHT_DECAY_OPTIMIZERS = ("adamw", "sgd", "adafactor", "radam", "muon", "schedule_free_adamw")
# Optimizers that split the parameters by their declared roles (`make_optimizer(param_roles=)`).
ROLE_OPTIMIZERS = ("muon",)
# Optimizers whose peak lr and per-leaf multipliers go inside them (`tail=`): their update is not linear in a factor
# applied afterwards (schedule-free's y).
INNER_LR_OPTIMIZERS = ("schedule_free_adamw",)


def get_optimizer(name: str) -> Callable[..., optax.GradientTransformation]:
  """Returns the optimizer builder `(schedule, optim_config, weight_decay_mask) -> tx`."""
  if name not in OPTIMIZERS:
    raise invalid("optim.name", name, sorted(OPTIMIZERS))
  return OPTIMIZERS[name]
