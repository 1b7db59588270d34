"""The `config.optim` subtree, typed and checked at one boundary (`OptimConfig`, `validate_optim_config`).

Contract:
  * Bad config values raise ValueError naming `optim.<key>`, the value and the valid choices, before any compute;
    `optim.name` is checked against `train.optimizers.OPTIMIZERS` and the options each optimizer reads.
  * The decay horizon, which needs the run's length, is checked by `check_horizon`.
  * `optim.untuned_warmup=True` (Ma & Yarats 2021, §4): the warmup length is 2/(1 − β₂) updates, derived from
    `optim.b2` at the config boundary: 100 for β₂ = 0.98, 2000 for 0.999.
"""

import dataclasses
from typing import Any, Optional

from configs.schema import Section, contradiction, invalid
from train import muon as muon_lib
from train import schedule_free as schedule_free_lib
from train.optimizers import GRADIENT_INIT_OPTIMIZERS, OPTIMIZERS, SECOND_MOMENT_INITS, WEIGHT_DECAY_OPTIMIZERS
from train.schedules import DECAYING_SCHEDULES, SCHEDULES

# Optimizers whose µP learning-rate multipliers `models.lr_multipliers` implements: the Adam column of Yang et al.
# 2022 (Tensor Programs V), Table 3 (AdamW: the same update with decoupled decay). SGD's column differs and
# Adafactor / RAdam have none; they are rejected with model.parameterization='mup'.
MUP_OPTIMIZERS = ("adam", "adamw")
WEIGHT_DECAY_ON = ("all", "weights")  # `optim.weight_decay_on` (train/optim.py `decay_mask`)


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
  weight_decay_on: str
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


# Every key of `config.optim` (declared with its default and comment in configs/default.py).
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
  if cfg.weight_decay_on not in WEIGHT_DECAY_ON:
    _fail("weight_decay_on", cfg.weight_decay_on, str(list(WEIGHT_DECAY_ON)))
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
