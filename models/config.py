"""The model's frozen, validated configuration: the one boundary where a ConfigDict becomes typed values.

`ModelConfig.from_config(config_dict, vocab_size=...)` reads the `config.model` subtree, fills the size fields from
a preset, validates every key (type, range, valid choices) and raises ValueError naming the key, the bad value and
the valid choices — before any parameter is created. `models/` never sees a ConfigDict after this point.
"""

import dataclasses
from typing import Any, Optional

import jax.numpy as jnp

from models.activations import ACTIVATIONS
from models.residual import RESIDUALS

ARCHS = ("encoder_decoder", "decoder", "encoder")
NORM_TYPES = ("layernorm", "rmsnorm", "none")
NORM_POSITIONS = ("post", "pre", "sandwich", "none")
LOGIT_SCALES = ("sqrt_dk", "none", "dk")
POSITIONS = ("sinusoidal", "learned")
PARAMETERIZATIONS = ("standard", "ntk", "mup")
READOUT_SCALES = ("none", "rsqrt_d")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16, "float64": jnp.float64}

# Sizes per preset. `base` is Vaswani et al. 2017's base model; `mini` trains in minutes on a laptop CPU;
# `tiny` is for tests.
PRESETS = {
    "base": dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, num_heads=8, d_ff=2048),
    "small": dict(num_encoder_layers=3, num_decoder_layers=3, d_model=256, num_heads=4, d_ff=1024),
    "mini": dict(num_encoder_layers=2, num_decoder_layers=2, d_model=128, num_heads=4, d_ff=512),  # CPU runs
    "tiny": dict(num_encoder_layers=2, num_decoder_layers=2, d_model=32, num_heads=2, d_ff=64),
}
_SIZE_KEYS = ("num_encoder_layers", "num_decoder_layers", "d_model", "num_heads", "d_ff")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Every knob of the model; see configs/default.py for a one-line comment on each."""

  vocab_size: int
  arch: str = "encoder_decoder"
  num_encoder_layers: int = 2
  num_decoder_layers: int = 2
  d_model: int = 32
  num_heads: int = 2
  head_dim: Optional[int] = None  # None: d_model // num_heads
  d_ff: int = 64
  max_len: int = 256
  norm_type: str = "layernorm"
  norm_position: str = "post"
  norm_epsilon: float = 1e-6
  residual: str = "plain"
  skipinit_alpha: float = 0.0
  alpha_init: float = 0.0
  alpha_step: float = 1e-3
  alpha_final: float = 1.0
  attention_logit_scale: str = "sqrt_dk"
  use_bias: bool = True
  tie_embeddings: bool = True
  tied_readout_scale: str = "none"
  scale_embeddings: bool = False
  position: str = "sinusoidal"
  embedding_norm: bool = False
  activation: str = "relu"
  parameterization: str = "standard"
  mup_base_width: int = 32
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def __post_init__(self):
    _validate(self)

  @property
  def qkv_head_dim(self) -> int:
    return self.head_dim or self.d_model // self.num_heads

  @property
  def width_ratio(self) -> float:
    """µP width multiplier d_model / base width (Yang & Hu 2021, Tensor Programs V)."""
    return self.d_model / self.mup_base_width

  @property
  def stacks(self) -> tuple[str, ...]:
    return {"encoder_decoder": ("encoder", "decoder"), "decoder": ("decoder",), "encoder": ("encoder",)}[self.arch]

  def num_layers(self, stack: str) -> int:
    return self.num_encoder_layers if stack == "encoder" else self.num_decoder_layers

  @classmethod
  def from_config(cls, cfg: Any, *, vocab_size: int) -> "ModelConfig":
    """Builds the frozen config from the `config.model` ConfigDict (or any mapping).

    Size keys left at None are taken from `cfg.preset`.
    """
    values = dict(cfg.to_dict() if hasattr(cfg, "to_dict") else cfg)
    preset = values.pop("preset", None)
    if preset is not None:
      if preset not in PRESETS:
        raise ValueError(f"model.preset={preset!r} is not one of {list(PRESETS)}")
      for key in _SIZE_KEYS:
        if values.get(key) is None:
          values[key] = PRESETS[preset][key]
    for key in _SIZE_KEYS:
      if values.get(key) is None:
        raise ValueError(f"model.{key} is None and no model.preset gives it; presets: {list(PRESETS)}")
    for key in ("dtype", "param_dtype"):
      if isinstance(values.get(key), str):
        if values[key] not in DTYPES:
          raise ValueError(f"model.{key}={values[key]!r} is not one of {list(DTYPES)}")
        values[key] = DTYPES[values[key]]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ValueError(f"unknown model config keys {unknown}; valid keys: {sorted(known)}")
    return cls(vocab_size=vocab_size, **values)


def _choice(name: str, value: Any, choices: tuple) -> None:
  if value not in choices:
    raise ValueError(f"model.{name}={value!r} is not one of {list(choices)}")


def _positive(name: str, value: Any) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise ValueError(f"model.{name}={value!r} must be a positive integer")


def _validate(c: ModelConfig) -> None:
  _choice("arch", c.arch, ARCHS)
  _choice("norm_type", c.norm_type, NORM_TYPES)
  _choice("norm_position", c.norm_position, NORM_POSITIONS)
  _choice("residual", c.residual, RESIDUALS)
  _choice("attention_logit_scale", c.attention_logit_scale, LOGIT_SCALES)
  _choice("position", c.position, POSITIONS)
  _choice("activation", c.activation, ACTIVATIONS)
  _choice("parameterization", c.parameterization, PARAMETERIZATIONS)
  _choice("tied_readout_scale", c.tied_readout_scale, READOUT_SCALES)
  for name in ("vocab_size", "d_model", "num_heads", "d_ff", "max_len", "mup_base_width"):
    _positive(name, getattr(c, name))
  for stack in c.stacks:
    key = "num_encoder_layers" if stack == "encoder" else "num_decoder_layers"
    _positive(key, getattr(c, key))
  if not isinstance(c.embedding_norm, bool):
    raise ValueError(f"model.embedding_norm={c.embedding_norm!r} must be True or False")
  if c.head_dim is None and c.d_model % c.num_heads:
    raise ValueError(
        f"model.d_model={c.d_model} is not divisible by model.num_heads={c.num_heads}; " "set model.head_dim explicitly"
    )
  if c.head_dim is not None:
    _positive("head_dim", c.head_dim)
  for name in ("dropout_rate", "attention_dropout_rate"):
    rate = getattr(c, name)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"model.{name}={rate!r} must be in [0, 1)")
  if not c.norm_epsilon > 0:
    raise ValueError(f"model.norm_epsilon={c.norm_epsilon!r} must be > 0")
  if (c.norm_type == "none") != (c.norm_position == "none"):
    raise ValueError(
        f"model.norm_type={c.norm_type!r} with model.norm_position={c.norm_position!r}: a norm "
        "placement needs a norm and vice versa; use norm_type='none' together with norm_position='none'"
    )
  if c.residual == "deepnorm" and c.norm_position != "post":
    raise ValueError(
        f"model.residual='deepnorm' is x_(l+1) = Norm(α·x_l + F(x_l)) and needs "
        f"model.norm_position='post', got {c.norm_position!r}"
    )
  if c.residual == "admin" and c.norm_position != "post":
    raise ValueError(
        f"model.residual='admin' is x_(l+1) = Norm(ω⊙x_l + F(x_l)) and needs "
        f"model.norm_position='post', got {c.norm_position!r}"
    )
  if c.parameterization == "mup" and c.attention_logit_scale != "dk":
    raise ValueError(
        f"model.parameterization='mup' uses 1/d_k attention (Tensor Programs V); set "
        f"model.attention_logit_scale='dk', got {c.attention_logit_scale!r}"
    )
  if c.parameterization == "ntk" and c.tied_readout_scale != "none":
    raise ValueError(
        "model.parameterization='ntk' already scales the tied readout by 1/sqrt(d_model); "
        f"set model.tied_readout_scale='none', got {c.tied_readout_scale!r}"
    )
  if c.arch == "encoder" and not c.tie_embeddings:
    raise ValueError(
        "model.arch='encoder' uses BERT's MLM head with the tied output embedding; " "set model.tie_embeddings=True"
    )
  if c.alpha_step < 0 or c.alpha_final < c.alpha_init:
    raise ValueError(
        f"model.alpha_step={c.alpha_step!r} must be >= 0 and model.alpha_final={c.alpha_final!r} "
        f">= model.alpha_init={c.alpha_init!r}"
    )
