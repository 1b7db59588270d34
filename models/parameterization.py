"""Parameterizations: the forward multipliers and per-parameter learning-rate multipliers of SP, NTK and µP.

A parameterization says, for each matmul, what constant multiplies its output and how its kernel is stored
(the init scale is the scheme's business, in `init/`):
- `standard` (SP): y = W x; every multiplier is 1.
- `ntk` (Jacot et al. 2018; Park et al. 2019, docs/science.md §3): y = (1/√fan_in)·W x with W stored at unit
  variance; the tied readout is x·Eᵀ/√d. Same function as SP at init when W_ntk = W_sp·√fan_in (tested).
- `mup` (Yang & Hu 2021; Yang et al. 2022, "Tensor Programs V", Table 3 in its "readout multiplier" form, as the
  `mup` package implements it): hidden matmuls have multiplier 1 and learning rate ×1/width_ratio under Adam;
  the readout has multiplier 1/width_ratio; embeddings, biases, norms and residual scalars keep learning rate ×1;
  attention uses 1/d_k (validated in ModelConfig). width_ratio = d_model / mup_base_width.

Depth (`model.residual='completep'`, Dey et al. 2025, "Don't be lazy: CompleteP...", Table 1, the AdamW column;
Bordelon et al. 2024 for α = 1/2): the branches are multiplied by (L/L_base)^{−α} (`models.residual`), the learning
rates of the parameters inside the layers (hidden matrices, their biases and norm parameters) by (L/L_base)^{α−1}
(1 for CompleteP's α = 1; (L/L_base)^{−1/2} for Depth-µP), the init is unchanged with depth. Table 1's Adam ε rule
(ε·(L/L_base)^{−α} for the hidden parameters) is not applied: `optim.eps` is one number for every parameter (1e-9 by
default, far below √ν at these sizes, so it does not bind).
"""

import math
from typing import Any

import flax.linen as nn

# Roles of matrices with both dimensions growing with width ("matrix-like" in Tensor Programs V).
# The gates (`attn_gate`, `mlp_gate`) map d to H·d_k or d_ff like W_q and mlp_in: hidden by the same definition.
HIDDEN_ROLES = ("attn_q", "attn_k", "attn_v", "attn_out", "attn_gate", "mlp_in", "mlp_gate", "mlp_out")
# The input layer: µP keeps its Adam lr at η at every width (Tensor Programs V, Table 3), so relative to the hidden
# matrices' η/width_ratio it is width_ratio× larger.
EMBEDDING_ROLES = ("embedding", "position")


def hidden_multiplier(config: Any, fan_in: int) -> float:
  """Forward multiplier of a hidden matmul with the given fan-in."""
  return 1.0 / math.sqrt(fan_in) if config.parameterization == "ntk" else 1.0


def readout_multiplier(config: Any, *, tied: bool) -> float:
  """Forward multiplier of the output logits."""
  m = 1.0
  if config.parameterization == "ntk" or (tied and config.tied_readout_scale == "rsqrt_d"):
    m /= math.sqrt(config.d_model)
  if config.parameterization == "mup":
    m /= config.width_ratio
  return m


def lr_multiplier(role: Any, config: Any) -> float:
  """The learning-rate multiplier of a parameter with the given `models.roles.ParamRole` (`models.inventory`
  applies it to every parameter).

  1 everywhere except µP's hidden matrices (and their role `head` transform in the MLM head, which is hidden too),
  which get 1/width_ratio (Tensor Programs V, Table 3, Adam column), times, under `completep`, (L/L_base)^{α−1} for
  every parameter inside a layer (Dey et al. 2025, Table 1; module docstring). With `embedding_lr_scale='width'`
  (SP only, validated in ModelConfig) the token and position embeddings get width_ratio and nothing else changes:
  SP with µP's embedding learning rate relative to the hidden layers, "increasing it by a factor of width to match
  µP" (Kalra & Barkeshli 2026, arXiv 2605.21486, abstract).
  """
  depth = 1.0
  if config.embedding_lr_scale == "width" and role.role in EMBEDDING_ROLES:  # SP + µP's embedding lr
    return config.width_ratio
  if config.residual == "completep" and role.layer is not None:  # Dey et al. 2025, Table 1: η·(L/L_base)^{α−1}
    depth = (config.num_layers(role.stack) / config.depth_base) ** (config.depth_alpha - 1.0)
  if config.parameterization != "mup":
    return depth
  hidden = role.role in HIDDEN_ROLES or (role.role == "head" and role.sublayer == "mlm_transform")
  return depth / config.width_ratio if hidden else depth


def default_kernel_init(config: Any):
  """The model's own kernel init (used when no `init/` scheme is applied): unit variance for NTK, else LeCun."""
  return nn.initializers.normal(1.0) if config.parameterization == "ntk" else nn.initializers.lecun_normal()
