"""The model's frozen, validated configuration: the one boundary where a ConfigDict becomes typed values.

`ModelConfig.from_config(config_dict, vocab_size=...)` reads the `config.model` subtree, fills the size fields from
a preset, derives `attention_logit_scale='auto'` from the parameterization, validates every key (type, range, valid
choices) and raises ValueError naming the key, the bad value and the valid choices — before any parameter is
created. `models/` never sees a ConfigDict after this point.

The config boundary's error format and `Section` come from `configs.schema`. The decoder-LM block keys (RoPE, gated
MLPs, GQA, gated attention, soft-capping) are validated in `models.blocks`. The defaults of `ModelConfig`'s fields
equal those of configs/default.py (size fields: its default preset, 'mini'); tests/test_config.py checks that they
agree.
"""

import dataclasses
from typing import Any, Optional

import jax.numpy as jnp

from configs.schema import AUTO, Section, contradiction, invalid, typed_values
from models.activations import ACTIVATIONS
from models.blocks import GATED_MLPS, gated_hidden_width, validate_blocks
from models.residual import RESIDUALS

ARCHS = ("encoder_decoder", "decoder", "encoder")
NORM_TYPES = ("layernorm", "rmsnorm", "dyt", "derf", "none")
NORM_POSITIONS = ("post", "pre", "sandwich", "peri", "mix", "hybrid", "reordered", "none")  # models/placement.py
LOGIT_SCALES = ("sqrt_dk", "none", "dk")
POSITIONS = ("sinusoidal", "learned", "rope")
PARAMETERIZATIONS = ("standard", "ntk", "mup")
READOUT_SCALES = ("none", "rsqrt_d")
EMBEDDING_LR_SCALES = ("auto", "width")  # models/parameterization.py: lr_multiplier
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


def derived_attention_logit_scale(parameterization: str) -> str:
  """`model.attention_logit_scale='auto'`: 1/d_k under µP (Yang et al. 2021, Tensor Programs V, §4), else 1/√d_k."""
  return "dk" if parameterization == "mup" else "sqrt_dk"


@dataclasses.dataclass(frozen=True)
class ModelConfig(Section):
  """Every knob of the model; see configs/default.py for a one-line comment on each.

  `vocab_size` is not a key of `config.model`: the data's tokenizer sets it (`dataclasses.replace`); a resolved
  experiment config (`train.config.resolve`) holds the model with `vocab_size=None`, which builds no model.
  """

  KEY = "model"
  vocab_size: Optional[int] = None
  arch: str = "encoder_decoder"
  num_encoder_layers: int = PRESETS["mini"]["num_encoder_layers"]
  num_decoder_layers: int = PRESETS["mini"]["num_decoder_layers"]
  d_model: int = PRESETS["mini"]["d_model"]
  num_heads: int = PRESETS["mini"]["num_heads"]
  head_dim: Optional[int] = None  # None: d_model // num_heads
  d_ff: int = PRESETS["mini"]["d_ff"]
  max_len: int = 256
  norm_type: str = "layernorm"
  norm_position: str = "post"
  norm_epsilon: float = 1e-6
  mix_ln_ratio: float = 0.25
  layer_norm_scaling: bool = False
  norm_alpha_init: float = 0.5
  norm_alpha_init_attention: Optional[float] = None
  derf_shift_init: float = 0.0
  residual: str = "plain"
  skipinit_alpha: float = 0.0
  alpha_init: float = 0.0
  alpha_step: float = 1e-3
  alpha_final: float = 1.0
  layerscale_init: Optional[float] = None  # None: Touvron et al. 2021's ε by depth
  depth_alpha: float = 1.0
  depth_base: int = 2
  attention_logit_scale: str = AUTO  # derived from parameterization in __post_init__
  qk_norm: bool = False
  num_kv_heads: Optional[int] = None  # None: num_heads (multi-head attention)
  attention_gate: bool = False
  attn_logit_softcap: float = 0.0
  final_logit_softcap: float = 0.0
  use_bias: bool = True
  tie_embeddings: bool = True
  tied_readout_scale: str = "none"
  scale_embeddings: bool = True
  position: str = "sinusoidal"
  rope_base: float = 10000.0
  embedding_norm: bool = False
  activation: str = "relu"
  mlp: str = "plain"
  mlp_multiple_of: int = 8
  parameterization: str = "standard"
  mup_base_width: int = 32
  embedding_lr_scale: str = AUTO
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def __post_init__(self):
    if self.attention_logit_scale == AUTO:
      object.__setattr__(self, "attention_logit_scale", derived_attention_logit_scale(self.parameterization))
    _validate(self)
    validate_blocks(self)

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

  def to_dict(self) -> dict[str, Any]:
    """The fields, dtypes by name (what `from_config` reads back)."""
    values = super().to_dict()
    return {k: (jnp.dtype(v).name if k in ("dtype", "param_dtype") else v) for k, v in values.items()}

  @classmethod
  def from_config(cls, cfg: Any, key: Optional[str] = None, *, vocab_size: Optional[int] = None) -> "ModelConfig":
    """Builds the frozen config from the `config.model` ConfigDict (or any mapping, or a ModelConfig).

    Size keys left at None are taken from `cfg.preset`, except a gated MLP's `d_ff`: 8/3·d_model rounded up to a
    multiple of `mlp_multiple_of` (`models.blocks.gated_hidden_width`). `vocab_size` (the tokenizer's) replaces the
    one `cfg` has, if any.
    """
    if isinstance(cfg, cls):
      return cfg if vocab_size is None else dataclasses.replace(cfg, vocab_size=vocab_size)
    group = key or cls.KEY
    values = dict(cfg.to_dict() if hasattr(cfg, "to_dict") else cfg)
    if vocab_size is None:
      vocab_size = values.get("vocab_size")
    values.pop("vocab_size", None)
    preset = values.pop("preset", None)
    if preset is not None:
      if preset not in PRESETS:
        raise invalid("model.preset", preset, list(PRESETS))
      if (
          values.get("d_ff") is None
          and values.get("mlp") in GATED_MLPS
          and isinstance(values.get("mlp_multiple_of"), int)
      ):
        # Shazeer 2020 §2, LLaMA: a gated MLP's unset width is 8/3·d rounded up (models.blocks.gated_hidden_width).
        d_model = values.get("d_model") or PRESETS[preset]["d_model"]
        values["d_ff"] = gated_hidden_width(d_model, values["mlp_multiple_of"])
      for key in _SIZE_KEYS:
        if values.get(key) is None:
          values[key] = PRESETS[preset][key]
    for key in _SIZE_KEYS:
      if values.get(key) is None:
        raise invalid(f"model.{key}", None, f"a positive integer, or a model.preset from {list(PRESETS)}")
    for key in ("dtype", "param_dtype"):
      if isinstance(values.get(key), str):
        if values[key] not in DTYPES:
          raise invalid(f"model.{key}", values[key], list(DTYPES))
        values[key] = DTYPES[values[key]]
    return cls(vocab_size=vocab_size, **typed_values(cls, values, group))


def _choice(name: str, value: Any, choices: tuple) -> None:
  if value not in choices:
    raise invalid(f"model.{name}", value, list(choices))


def _positive(name: str, value: Any) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise invalid(f"model.{name}", value, "a positive integer")


def _validate(c: ModelConfig) -> None:
  _choice("arch", c.arch, ARCHS)
  _choice("norm_type", c.norm_type, NORM_TYPES)
  _choice("norm_position", c.norm_position, NORM_POSITIONS)
  _choice("residual", c.residual, RESIDUALS)
  _choice("attention_logit_scale", c.attention_logit_scale, LOGIT_SCALES + (AUTO,))
  _choice("position", c.position, POSITIONS)
  _choice("activation", c.activation, ACTIVATIONS)
  _choice("parameterization", c.parameterization, PARAMETERIZATIONS)
  _choice("tied_readout_scale", c.tied_readout_scale, READOUT_SCALES)
  _choice("embedding_lr_scale", c.embedding_lr_scale, EMBEDDING_LR_SCALES)
  for name in ("d_model", "num_heads", "d_ff", "max_len", "mup_base_width"):
    _positive(name, getattr(c, name))
  if c.vocab_size is not None:
    _positive("vocab_size", c.vocab_size)
  for stack in c.stacks:
    key = "num_encoder_layers" if stack == "encoder" else "num_decoder_layers"
    _positive(key, getattr(c, key))
  for name in ("embedding_norm", "qk_norm", "layer_norm_scaling"):
    if not isinstance(getattr(c, name), bool):
      raise invalid(f"model.{name}", getattr(c, name), "True or False")
  if c.qk_norm and c.norm_type == "none":
    raise contradiction(
        "model.qk_norm",
        True,
        "model.norm_type",
        "none",
        f"QK-norm applies model.norm_type to queries and keys; valid: a norm_type of {[t for t in NORM_TYPES if t != 'none']}",
    )
  if c.head_dim is None and c.d_model % c.num_heads:
    raise contradiction(
        "model.d_model",
        c.d_model,
        "model.num_heads",
        c.num_heads,
        "d_model must be divisible by num_heads (or set model.head_dim)",
    )
  if c.head_dim is not None:
    _positive("head_dim", c.head_dim)
  for name in ("dropout_rate", "attention_dropout_rate"):
    rate = getattr(c, name)
    if not 0.0 <= rate < 1.0:
      raise invalid(f"model.{name}", rate, "a number in [0, 1)")
  if not 0.0 <= c.mix_ln_ratio <= 1.0:
    raise invalid("model.mix_ln_ratio", c.mix_ln_ratio, "a number in [0, 1] (Li et al. 2025: 0.25)")
  if c.layer_norm_scaling and c.norm_position not in ("pre", "sandwich", "peri", "mix"):
    raise contradiction(
        "model.layer_norm_scaling",
        True,
        "model.norm_position",
        c.norm_position,
        "1/√l scales the output of a sublayer's input norm (Sun et al. 2025, Eq. 8); valid: norm_position in "
        "['pre', 'sandwich', 'peri', 'mix']",
    )
  for name in ("norm_alpha_init", "norm_alpha_init_attention"):
    value = getattr(c, name)
    if value is not None and not 0.0 < value < float("inf"):
      raise invalid(f"model.{name}", value, "a finite number > 0 (DyT's α₀: 0.5 in Zhu et al. 2025)")
  if not -float("inf") < c.derf_shift_init < float("inf"):
    raise invalid("model.derf_shift_init", c.derf_shift_init, "a finite number (Derf's s₀: 0 in Chen et al. 2025)")
  if not c.norm_epsilon > 0:
    raise invalid("model.norm_epsilon", c.norm_epsilon, "a number > 0")
  if (c.norm_type == "none") != (c.norm_position == "none"):
    raise contradiction(
        "model.norm_type",
        c.norm_type,
        "model.norm_position",
        c.norm_position,
        "a norm placement needs a norm and vice versa; 'none' goes with 'none'",
    )
  for residual, formula in (("deepnorm", "Norm(α·x_l + F(x_l))"), ("admin", "Norm(ω⊙x_l + F(x_l))")):
    if c.residual == residual and c.norm_position != "post":
      raise contradiction(
          "model.residual",
          residual,
          "model.norm_position",
          c.norm_position,
          f"x_(l+1) = {formula} is a Post-LN rule; valid: norm_position='post'",
      )
  if c.parameterization == "mup" and c.attention_logit_scale != "dk":
    raise contradiction(
        "model.parameterization",
        "mup",
        "model.attention_logit_scale",
        c.attention_logit_scale,
        "µP uses 1/d_k attention (Yang et al. 2021, Tensor Programs V); valid: 'dk' or 'auto'",
    )
  if c.embedding_lr_scale == "width" and c.parameterization != "standard":
    raise contradiction(
        "model.embedding_lr_scale",
        "width",
        "model.parameterization",
        c.parameterization,
        "'width' gives SP µP's embedding learning rate (Kalra & Barkeshli 2026); valid: parameterization "
        "'standard', or embedding_lr_scale 'auto'",
    )
  if c.embedding_lr_scale == "width" and c.tie_embeddings:
    raise contradiction(
        "model.embedding_lr_scale",
        "width",
        "model.tie_embeddings",
        True,
        "a tied embedding is also the readout, whose learning rate µP does not raise; valid: tie_embeddings=False",
    )
  if c.parameterization == "ntk" and c.tied_readout_scale != "none":
    raise contradiction(
        "model.parameterization",
        "ntk",
        "model.tied_readout_scale",
        c.tied_readout_scale,
        "NTK already scales the tied readout by 1/sqrt(d_model); valid: 'none'",
    )
  if c.arch == "encoder" and not c.tie_embeddings:
    raise contradiction(
        "model.arch",
        "encoder",
        "model.tie_embeddings",
        False,
        "BERT's MLM head uses the tied output embedding; valid: True",
    )
  _positive("depth_base", c.depth_base)
  if not 0.0 <= c.depth_alpha <= 1.0:
    raise invalid("model.depth_alpha", c.depth_alpha, "a number in [0, 1] (CompleteP: 1; Depth-µP: 0.5)")
  if c.residual == "completep" and c.norm_position not in ("pre", "sandwich", "peri", "none"):
    raise contradiction(
        "model.residual",
        "completep",
        "model.norm_position",
        c.norm_position,
        "x + L^(-α)·F(Norm(x)) scales the branches of a stream no norm rescales (Dey et al. 2025 use Pre-LN); "
        "valid: norm_position in ['pre', 'sandwich', 'peri', 'none']",
    )
  if c.layerscale_init is not None and not 0.0 <= c.layerscale_init < float("inf"):
    raise invalid("model.layerscale_init", c.layerscale_init, "a finite number >= 0, or None (CaiT's ε by depth)")
  if c.alpha_step < 0:
    raise invalid("model.alpha_step", c.alpha_step, "a number >= 0")
  if c.alpha_final < c.alpha_init:
    raise contradiction(
        "model.alpha_final",
        c.alpha_final,
        "model.alpha_init",
        c.alpha_init,
        "scheduled α must not decrease; valid: alpha_final >= alpha_init",
    )
