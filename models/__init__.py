"""Transformer models (Flax Linen) with pluggable norm placement, residual rule, attention scale, parameterization.

Public API:
- `get_model(model_config) -> nn.Module`: the model for a frozen `ModelConfig`.
- `logical_axes(model)`: the logical axis names (`LOGICAL_AXES`) of every parameter, as PartitionSpecs (`models.axes`).
- `param_roles(model[, params])`: role / stack / layer / sublayer / fans of every parameter, as each declared it
  where it was created (`models.roles.declare`), read back by `models.inventory`.
- `ModelConfig`: the frozen, validated config; `ModelConfig.from_config(cfg.model, vocab_size=...)`.
- `lr_multipliers(params, config)`: µP per-parameter learning-rate multipliers (1 for SP/NTK).
- `scheduled_alpha_update`: the update rule of the `scheduled` residual's α.

Dimension legend for shape-suffixed names: B batch, L length (S source, T target, Q query, K key), D d_model,
H heads, K head_dim inside attention, F d_ff, V vocabulary. This package imports nothing else of the project but `configs.schema` (the config boundary's ground floor).
"""

import flax.linen as nn

from models.axes import LOGICAL_AXES
from models.config import PRESETS, ModelConfig
from models.inventory import logical_axes, lr_multipliers, param_roles
from models.residual import ALPHA_COLLECTION, scheduled_alpha_update
from models.roles import ROLES, ParamRole
from models.transformer import Transformer

__all__ = [
    "ALPHA_COLLECTION",
    "LOGICAL_AXES",
    "PRESETS",
    "ROLES",
    "ModelConfig",
    "ParamRole",
    "Transformer",
    "get_model",
    "logical_axes",
    "lr_multipliers",
    "param_roles",
    "scheduled_alpha_update",
]


def get_model(model_config: ModelConfig) -> nn.Module:
  """The Transformer for `model_config` (a frozen ModelConfig, never a ConfigDict)."""
  if not isinstance(model_config, ModelConfig):
    raise TypeError(
        f"get_model takes a models.ModelConfig (build it with ModelConfig.from_config), "
        f"got {type(model_config).__name__}"
    )
  if model_config.vocab_size is None:
    raise ValueError(
        "get_model needs ModelConfig.vocab_size (the tokenizer's): dataclasses.replace(mc, vocab_size=...)"
    )
  return Transformer(model_config)
