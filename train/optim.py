"""Optimizers and the `config.optim` subtree, built at one boundary.

Contract:
  * `make_optimizer(optim_config, lr_multipliers=..., total_steps=...)` returns
    `(optax.GradientTransformation, schedule)`. The transformation is
    `clip (optional) -> optimizer (unit-peak schedule, weight decay) -> × peak lr -> per-leaf lr multipliers`.
    The optimizer runs the schedule's shape with peak 1 and the peak `optim.learning_rate` multiplies its update
    afterwards from the optimizer state (`scale_by_peak_lr`): every schedule is linear in its peak, so the update
    is the same, and the runs of an lr sweep share one compiled program.
  * The schedule is `train.schedules.make_schedule`'s, evaluated at the 1-based update index t = count + 1.
  * Weight decay is decoupled everywhere (Loshchilov & Hutter 2019, AdamW/SGDW): update = -η_t·(direction + λ·θ),
    masked by the optional `weight_decay_mask` (True = decay) so biases and norm scales can be exempt.
  * Bad config values raise ValueError naming `optim.<key>`, the value and the valid choices, before any compute.

The per-leaf multiplier transform is written here because optax has none; it is a few `jnp` lines, and tests check
it against exact ratios.

Two options of the warmup question (docs/science.md §8):
  * `optim.second_moment_init='gradient'` (GI-Adam, Kalra & Barkeshli 2024, §6): Adam's second moment starts from
    ν₀ = g₀² instead of 0, the rest of Adam unchanged, so the first bias-corrected ν̂₁ is g₀²/(1 − β₂) and the first
    updates are √(1 − β₂) times Adam's, growing back over ~1/(1 − β₂) steps: a warmup built into the optimizer;
  * `optim.untuned_warmup=True` (Ma & Yarats 2021, §4): the warmup length is 2/(1 − β₂) updates, derived from
    `optim.b2` at the config boundary: 100 for β₂ = 0.98, 2000 for 0.999.
"""

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from configs.schema import Section, as_section, contradiction, invalid
from train import muon as muon_lib
from train import schedule_free as schedule_free_lib
from train.schedules import DECAYING_SCHEDULES, SCHEDULES, get_schedule

# ---------------------------------------------------------------------------- optimizers
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


# -------------------------------------------------------------------------------- config


# Every key of `config.optim` (declared with its default and comment in configs/default.py).
# Optimizers whose µP learning-rate multipliers `models.lr_multipliers` implements: the Adam column of Yang et al.
# 2022 (Tensor Programs V), Table 3 (AdamW: the same update with decoupled decay). SGD's column differs and
# Adafactor / RAdam have none; they are rejected with model.parameterization='mup'.
MUP_OPTIMIZERS = ("adam", "adamw")


def _fail(key: str, value: Any, valid: str) -> None:
  raise invalid(f"optim.{key}", value, valid)


def _check_number(cfg, key, lo, hi, *, lo_open=False, hi_open=False, allow_none=False):
  value = cfg[key]
  if value is None and allow_none:
    return
  ok = isinstance(value, (int, float)) and not isinstance(value, bool)
  if ok:
    ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
  if not ok:
    bounds = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    _fail(key, value, f"a number in {bounds}" + (" or None" if allow_none else ""))


def _check_int(cfg, key, lo, *, allow_none=False):
  value = cfg[key]
  if value is None and allow_none:
    return
  if not isinstance(value, int) or isinstance(value, bool) or value < lo:
    _fail(key, value, f"an integer >= {lo}" + (" or None" if allow_none else ""))


@dataclasses.dataclass(frozen=True)
class OptimConfig(Section):
  """The `config.optim` subtree, typed and checked (each key's meaning: configs/default.py). The decay horizon,
  which needs the run's length, is checked by `validate_optim_config(..., total_steps=)`."""

  KEY = "optim"
  name: str
  learning_rate: float
  schedule: str
  warmup_steps: int
  rsqrt_d_model: Optional[int]
  decay_steps: Optional[int]
  decay_start: int
  min_lr_ratio: float
  b1: float
  b2: float
  eps: float
  weight_decay: float
  momentum: Optional[float]
  nesterov: bool
  grad_clip_norm: Optional[float]
  adafactor_param_scale: bool
  adafactor_decay_rate: float
  adafactor_clipping_threshold: float
  adafactor_min_dim_size_to_factor: int
  second_moment_init: str
  untuned_warmup: bool
  muon_beta: float
  muon_ns_steps: int
  muon_consistent_rms: float
  qk_clip: float

  def __post_init__(self):
    _check_optim_values(self)
    if self.untuned_warmup:  # Ma & Yarats 2021 §4: the warmup length follows from β₂
      derived = untuned_warmup_steps(self.b2)
      if self.warmup_steps not in (0, derived):
        raise contradiction(
            "optim.untuned_warmup",
            True,
            "optim.warmup_steps",
            self.warmup_steps,
            f"the untuned warmup lasts 2/(1 − optim.b2) = {derived} updates; valid: warmup_steps 0 (derived) or {derived}",
        )
      object.__setattr__(self, "warmup_steps", derived)


def untuned_warmup_steps(b2: float) -> int:
  """2/(1 − β₂), rounded to an integer number of updates (Ma & Yarats 2021 §4: ω_t = min(1, (1 − β₂)·t/2))."""
  return int(round(2.0 / (1.0 - b2)))


OPTIM_KEYS = tuple(f.name for f in dataclasses.fields(OptimConfig))


def validate_optim_config(optim_config, *, total_steps: Optional[int] = None) -> OptimConfig:
  """The typed `config.optim`, checked (`OptimConfig`'s own checks, then the decay horizon: `check_horizon`); raises
  ValueError naming `optim.<key>`, its value and the valid choices. `train.config.resolve` types the section once
  for a run; `make_optimizer` and `make_schedule` trust a typed section they are given.

  Args:
    optim_config: the `config.optim` subtree (its ConfigDict or a mapping; an `OptimConfig` gets the horizon check).
    total_steps: the run's number of updates; the horizon of decaying schedules when
      `optim.decay_steps` is 0/None.
  """
  cfg = OptimConfig.from_config(optim_config)
  check_horizon(cfg, total_steps)
  return cfg


def check_horizon(cfg: OptimConfig, total_steps: Optional[int] = None) -> None:
  """Raises ValueError if a decaying schedule has no horizon (`optim.decay_steps`, else `total_steps`) or one that
  ends within the warmup: the one check of `config.optim` that needs the run's length."""
  if cfg.schedule in DECAYING_SCHEDULES:
    horizon = cfg.decay_steps or total_steps
    if not horizon:
      _fail(
          "decay_steps",
          cfg.decay_steps,
          f"a positive integer (or pass total_steps) for optim.schedule={cfg.schedule!r}",
      )
    if horizon <= cfg.warmup_steps:
      _fail("decay_steps", horizon, f"an integer > optim.warmup_steps={cfg.warmup_steps} (decay_steps includes warmup)")


def _check_optim_values(cfg: OptimConfig) -> None:
  if cfg.name not in OPTIMIZERS:
    _fail("name", cfg.name, str(sorted(OPTIMIZERS)))
  if cfg.schedule not in SCHEDULES:
    _fail("schedule", cfg.schedule, str(sorted(SCHEDULES)))
  inf = float("inf")
  _check_number(cfg, "learning_rate", 0, inf, lo_open=True)
  _check_int(cfg, "warmup_steps", 0)
  _check_int(cfg, "rsqrt_d_model", 0, allow_none=True)
  _check_int(cfg, "decay_steps", 0, allow_none=True)
  _check_int(cfg, "decay_start", 0)
  if cfg.schedule == "warmup_rsqrt" and 0 < cfg.decay_start < cfg.warmup_steps:
    _fail("decay_start", cfg.decay_start, f"0 or an integer >= optim.warmup_steps={cfg.warmup_steps}")
  _check_number(cfg, "min_lr_ratio", 0, 1)
  _check_number(cfg, "b1", 0, 1, hi_open=True)
  _check_number(cfg, "b2", 0, 1, hi_open=True)
  _check_number(cfg, "eps", 0, inf, lo_open=True)
  _check_number(cfg, "weight_decay", 0, inf)
  _check_number(cfg, "momentum", 0, 1, hi_open=True, allow_none=True)
  if not isinstance(cfg.nesterov, bool):
    _fail("nesterov", cfg.nesterov, "True or False")
  _check_number(cfg, "grad_clip_norm", 0, inf, allow_none=True)
  if not isinstance(cfg.adafactor_param_scale, bool):
    _fail("adafactor_param_scale", cfg.adafactor_param_scale, "True or False")
  _check_number(cfg, "adafactor_decay_rate", 0, 1, lo_open=True)
  if cfg.adafactor_clipping_threshold:  # optax requires >= 1 when set
    _check_number(cfg, "adafactor_clipping_threshold", 1, inf)
  _check_int(cfg, "adafactor_min_dim_size_to_factor", 1)
  if cfg.second_moment_init not in SECOND_MOMENT_INITS:
    _fail("second_moment_init", cfg.second_moment_init, str(list(SECOND_MOMENT_INITS)))
  if cfg.second_moment_init == "gradient" and cfg.name not in GRADIENT_INIT_OPTIMIZERS:
    raise contradiction(
        "optim.second_moment_init",
        "gradient",
        "optim.name",
        cfg.name,
        f"ν₀ = g₀² is Adam's second moment (GI-Adam, Kalra & Barkeshli 2024); valid: {list(GRADIENT_INIT_OPTIMIZERS)}",
    )
  if not isinstance(cfg.untuned_warmup, bool):
    _fail("untuned_warmup", cfg.untuned_warmup, "True or False")
  _check_number(cfg, "qk_clip", 0, inf)
  muon_lib.check_config(cfg)
  schedule_free_lib.check_config(cfg)
  if cfg.weight_decay and cfg.name not in WEIGHT_DECAY_OPTIMIZERS:
    _fail(
        "weight_decay",
        cfg.weight_decay,
        f"0.0 for optim.name={cfg.name!r} " f"(weight decay is read by {list(WEIGHT_DECAY_OPTIMIZERS)})",
    )


def make_schedule(optim_config, *, total_steps: Optional[int] = None) -> optax.Schedule:
  """The schedule `count -> lr` of `optim_config` (an `OptimConfig`, trusted; or its ConfigDict, typed and checked)."""
  cfg = as_section(OptimConfig, optim_config, lambda c: check_horizon(c, total_steps))  # the door
  return _schedule(cfg, total_steps, float(cfg.learning_rate))


def _schedule(cfg: OptimConfig, total_steps: Optional[int], peak: float) -> optax.Schedule:
  """`cfg`'s schedule with peak `peak` (1.0: the unit schedule the optimizer runs, module docstring)."""
  return get_schedule(cfg.schedule)(
      learning_rate=peak,
      warmup_steps=cfg.warmup_steps,
      decay_steps=cfg.decay_steps or total_steps,
      min_lr_ratio=float(cfg.min_lr_ratio),
      rsqrt_d_model=cfg.rsqrt_d_model,
      decay_start=cfg.decay_start,
  )


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
    weight_decay_mask: optional pytree of bools with the params' structure; True = decay
      (pass False for biases and norm scales).
    total_steps: number of updates in the run; the horizon when `optim.decay_steps` is 0.
    param_roles: the `models.roles.ParamRole` of every parameter (`models.param_roles`), read by the optimizers of
      `ROLE_OPTIMIZERS` (Muon: which parameters are hidden matrices).

  Returns:
    `(tx, schedule)`; `schedule(count)` is the lr of the update made when `count` updates
    have been applied (before any lr multiplier).
  """
  optim_config = as_section(OptimConfig, optim_config, lambda c: check_horizon(c, total_steps))  # the door
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
  parts.append(get_optimizer(name)(unit, optim_config, weight_decay_mask, **kwargs))
  return optax.chain(*parts, *tail), schedule
