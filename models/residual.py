"""Residual connections: how a branch output F(x) is merged into the residual stream x.

Registry `get_residual(name)` / `RESIDUALS`:
- `plain`:     x + F                                   (He et al. 2016; Vaswani et al. 2017)
- `rezero`:    x + α·F, α a learnable scalar, α = 0 at init (Bachlechner et al. 2020, "ReZero is All You Need")
- `skipinit`:  x + α·F, α a learnable scalar, α = `skipinit_alpha` at init (De & Smith 2020; 0 by default, the
               paper also uses 1/√d)
- `scheduled`: x + α·F, α NOT learned: it lives in the `residual_alpha` variable collection, starts at
               `alpha_init` and is raised by `alpha_step` after every update up to `alpha_final` (Su 2021a §6, the
               blog's variant of ReZero; docs/science.md §6). Because α is a variable it is part of the train state
               and checkpointed, so a resumed run continues exactly; `scheduled_alpha_update` is the update rule.
- `deepnorm`:  α·x + F with the constant α of `deepnorm_constants` (Wang et al. 2022, "DeepNet", eq. in §3 / Table 1)
- `layerscale`: x + λ ⊙ F, λ a learnable vector of width d initialized at ε (`model.layerscale_init`; None: the
               paper's ε by depth, `layerscale_epsilon`; Touvron et al. 2021, CaiT, §2.2, Eq. 4)
- `completep`: x + (L/L_base)^{−α}·F, a constant branch multiplier set by the stack's depth L (Bordelon et al. 2024,
               α = 1/2, Depth-µP; Dey et al. 2025, Table 1, α = 1, CompleteP), with the learning rates of
               `models.parameterization.lr_multiplier`; `depth_multiplier` is the constant
- `admin`:     ω ⊙ x + F, ω a learnable vector of width d initialized to 1 and set by the profiling pass of
               `init.procedures` so that ω_l² = Σ_{j<l} Var[F_j] (Liu et al. 2020, eq. 6)

The Norm placement (post/pre/sandwich/none) is applied around this merge by `models.transformer`. α declares no
logical axis (a scalar), ω and λ the axis ("embed",) (`models.axes`); all declare the role `residual_scale` of their
sublayer (`models.roles`).
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from models.roles import declare

RESIDUALS = ("plain", "rezero", "skipinit", "scheduled", "deepnorm", "admin", "layerscale", "completep")
ALPHA_COLLECTION = "residual_alpha"


def deepnorm_constants(arch: str, num_encoder_layers: int, num_decoder_layers: int) -> dict[str, tuple[float, float]]:
  """DeepNorm's (α, β) per stack (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers", Table 1).

  α multiplies the residual stream before the post-norm; β is the Xavier gain of the FFN, value and output
  projections (query/key keep gain 1).
  - encoder-only, N layers:  α = (2N)^{1/4},            β = (8N)^{-1/4}
  - decoder-only, M layers:  α = (2M)^{1/4},            β = (8M)^{-1/4}
  - encoder-decoder:         encoder α = 0.81(N⁴M)^{1/16}, β = 0.87(N⁴M)^{-1/16};
                             decoder α = (3M)^{1/4},        β = (12M)^{-1/4}
  We follow the paper: torchscale's encoder-decoder encoder β uses 1.15 instead of the paper's 0.87.

  Args:
    arch: "encoder", "decoder" or "encoder_decoder".
    num_encoder_layers: N (ignored for "decoder").
    num_decoder_layers: M (ignored for "encoder").

  Returns:
    {"encoder": (α, β)} and/or {"decoder": (α, β)} for the stacks the architecture has.
  """
  n, m = num_encoder_layers, num_decoder_layers
  for name, value, used in (("num_encoder_layers", n, arch != "decoder"), ("num_decoder_layers", m, arch != "encoder")):
    if used and (not isinstance(value, int) or value < 1):
      raise ValueError(f"model.{name}={value!r} must be a positive integer for DeepNorm's constants")
  if arch == "encoder":
    return {"encoder": ((2 * n) ** 0.25, (8 * n) ** -0.25)}
  if arch == "decoder":
    return {"decoder": ((2 * m) ** 0.25, (8 * m) ** -0.25)}
  if arch == "encoder_decoder":
    return {
        "encoder": (0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)),
        "decoder": ((3 * m) ** 0.25, (12 * m) ** -0.25),
    }
  raise ValueError(f"model.arch={arch!r} is not one of ['encoder', 'decoder', 'encoder_decoder']")


def layerscale_epsilon(depth: int) -> float:
  """LayerScale's ε, the init of every λ, for a stack of `depth` layers (Touvron et al. 2021, CaiT, §2.2: "ε = 0.1
  for depth up to 18, ε = 10⁻⁵ for depth 24 and ε = 10⁻⁶ for deeper networks").

  The paper names no value between 18 and 24; we use 10⁻⁵ there (the next depth it gives), an assumption.
  """
  if not isinstance(depth, int) or depth < 1:
    raise ValueError(f"LayerScale's depth={depth!r} must be a positive integer")
  if depth <= 18:
    return 0.1
  return 1e-5 if depth <= 24 else 1e-6


def layerscale_init(config: Any, stack: str) -> float:
  """λ's init in `stack`: `model.layerscale_init` when set, else `layerscale_epsilon` of the stack's depth. The
  model creates λ with it and `init.schemes` keeps it."""
  if config.layerscale_init is not None:
    return config.layerscale_init
  return layerscale_epsilon(config.num_layers(stack))


def depth_multiplier(config: Any, stack: str) -> float:
  """CompleteP's / Depth-µP's branch multiplier (L/L_base)^{−α} in `stack` (Dey et al. 2025, Table 1: L^{−α} with
  α = `model.depth_alpha`, 1 for CompleteP, 1/2 for Depth-µP, Bordelon et al. 2024; L_base = `model.depth_base`, the
  depth at which the rule equals the plain residual, as µP's base width)."""
  return (config.num_layers(stack) / config.depth_base) ** (-config.depth_alpha)


class Residual(nn.Module):
  """Merges a branch output into the residual stream; see the module docstring for the rules.

  Attributes:
    kind: one of RESIDUALS.
    deepnorm_alpha: α for `deepnorm`; the branch multiplier (L/L_base)^{−α} for `completep`.
    skipinit_alpha: α at init for `skipinit`.
    alpha_init: α at init for `scheduled`.
    layerscale_init: ε, every entry of λ at init, for `layerscale`.
    param_dtype: dtype of α / ω.
    sublayer: the sublayer whose branch this merges (`self_attn`, `cross_attn`, `mlp`), declared by α / ω.
  """

  kind: str
  sublayer: str
  deepnorm_alpha: float = 1.0
  skipinit_alpha: float = 0.0
  alpha_init: float = 0.0
  layerscale_init: float = 0.1
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, branch: jax.Array) -> jax.Array:
    if self.kind == "plain":
      return x + branch
    if self.kind in ("rezero", "skipinit"):
      init = 0.0 if self.kind == "rezero" else self.skipinit_alpha
      alpha = self.param(
          "alpha",
          declare(nn.initializers.constant(init), (), role="residual_scale", sublayer=self.sublayer),
          (),
          self.param_dtype,
      )
      return x + alpha.astype(x.dtype) * branch
    if self.kind == "scheduled":
      alpha = self.variable(ALPHA_COLLECTION, "alpha", lambda: jnp.asarray(self.alpha_init, self.param_dtype))
      return x + alpha.value.astype(x.dtype) * branch
    if self.kind == "deepnorm":
      return jnp.asarray(self.deepnorm_alpha, x.dtype) * x + branch
    if self.kind == "completep":  # Dey et al. 2025, Table 1: x + L^{−α}·F
      return x + jnp.asarray(self.deepnorm_alpha, x.dtype) * branch
    if self.kind == "admin":
      omega_init = declare(nn.initializers.ones, ("embed",), role="residual_scale", sublayer=self.sublayer)
      omega = self.param("omega", omega_init, (x.shape[-1],), self.param_dtype)
      return omega.astype(x.dtype) * x + branch
    if self.kind == "layerscale":  # Touvron et al. 2021, Eq. 4: x + diag(λ)·F(x)
      init = declare(
          nn.initializers.constant(self.layerscale_init), ("embed",), role="residual_scale", sublayer=self.sublayer
      )
      gamma = self.param("gamma", init, (x.shape[-1],), self.param_dtype)
      return x + gamma.astype(x.dtype) * branch
    raise ValueError(f"model.residual={self.kind!r} is not one of {list(RESIDUALS)}")


def scheduled_alpha_update(alphas: Any, step_size: float, final: float) -> Any:
  """One update of the scheduled α's: α ← min(α + step_size, final) (Su 2021a §6; docs/science.md §6).

  Args:
    alphas: the `residual_alpha` collection (a pytree of scalars); may be empty.
    step_size: the fixed increment per optimizer update.
    final: the value α stops at.

  Returns:
    The updated pytree.
  """
  return jax.tree.map(lambda a: jnp.minimum(a + step_size, final).astype(a.dtype), alphas)
