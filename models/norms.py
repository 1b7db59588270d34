"""Normalization layers (registry `get_norm(name)`).

- `layernorm` (Ba, Kiros & Hinton 2016): g ⊙ (x − μ)/√(var + ε) + b; the bias only when `use_bias`.
- `rmsnorm` (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): g ⊙ x/√(mean(x²) + ε); no centring,
  no bias (T5, docs/science.md §5).
- `dyt` (Zhu, Chen, He, LeCun & Liu 2025, "Transformers without Normalization", Eq. 1): γ ⊙ tanh(α·x) + β, a
  learnable scalar α initialized at α₀ (`model.norm_alpha_init`) and a per-channel affine (β only when `use_bias`);
  no statistics, so it replaces every norm of the model (placements, final norm, QK-norm, embedding and MLM norms).
- `derf` (Chen, Lu, Zhu, Sun & Liu 2025, "Stronger Normalization-Free Transformers", arXiv 2512.10938, Eq. 10):
  γ ⊙ erf(α·x + s) + β, learnable scalars α (α₀ as DyT's) and s (s₀ = `model.derf_shift_init`).
- `none`: the identity (no parameters).

DyT's α₀ (Zhu et al. 2025 §7, "Initialization of α"): 0.5 works for every non-LLM model of the paper (its default);
for LLMs the best α₀ falls with width and is higher in the norms in front of attention than elsewhere; their LLaMA
table (7B, d = 4096: attention 0.8, others 0.2; 13B, d = 5120: 0.6 / 0.15; 34B and 70B, d = 8192: 0.2 / 0.05) is what
`model.norm_alpha_init_attention` and `model.norm_alpha_init` set. The paper reports width, not depth, as what moves
α₀; we found no depth rule in it and apply none. Derf's α₀ = 0.5, s₀ = 0 are the defaults of the authors' code
(zlab-princeton/Derf); we did not find them stated as equations in the paper.

Statistics are computed in float32 whatever the compute dtype, as flax does, so bfloat16 runs stay stable.
Scale and bias declare the logical axis ("embed",) (`models.axes`; ("kv",) for QK-norm) and the roles `norm_scale` /
`norm_bias` of the sublayer the norm belongs to (`models.roles`); DyT's and Derf's α and Derf's s are scalars (no
logical axis) with the roles `norm_alpha` / `norm_shift`.
"""

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from models.roles import declare

NORMS = ("layernorm", "rmsnorm", "dyt", "derf", "none")
POINTWISE = ("dyt", "derf")  # norms with a learnable α (no statistics)
ATTENTION_SUBLAYERS = ("self_attn", "cross_attn")


def alpha_init(config: Any, sublayer: str) -> float:
  """α₀ of a DyT / Derf norm of `sublayer`: `model.norm_alpha_init_attention` in front of (and inside) attention when
  set, else `model.norm_alpha_init` (Zhu et al. 2025 §7; module docstring). The model creates α with it and
  `init.schemes` keeps it."""
  attention = getattr(config, "norm_alpha_init_attention", None)
  return attention if attention is not None and sublayer in ATTENTION_SUBLAYERS else config.norm_alpha_init


class PointwiseNorm(nn.Module):
  """DyT (`fn='tanh'`) or Derf (`fn='erf'`): γ ⊙ f(α·x [+ s]) + β over the last axis (module docstring).

  Computed in float32 whatever the compute dtype, as the statistics of LayerNorm are.
  """

  fn: str
  alpha_init: float
  shift_init: float
  use_bias: bool
  dtype: Any
  param_dtype: Any
  sublayer: str
  axes: tuple

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    scalar = lambda value, role: declare(nn.initializers.constant(value), (), role=role, sublayer=self.sublayer)
    alpha = self.param("alpha", scalar(self.alpha_init, "norm_alpha"), (), self.param_dtype)
    gamma = self.param(
        "scale",
        declare(nn.initializers.ones, self.axes, role="norm_scale", sublayer=self.sublayer),
        (x.shape[-1],),
        self.param_dtype,
    )
    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    if self.fn == "erf":  # Chen et al. 2025, Eq. 10
      shift = self.param("shift", scalar(self.shift_init, "norm_shift"), (), self.param_dtype)
      y = jax.scipy.special.erf(alpha * x32 + shift)
    else:  # Zhu et al. 2025, Eq. 1
      y = jnp.tanh(alpha * x32)
    y = y * gamma
    if self.use_bias:
      y = y + self.param(
          "bias",
          declare(nn.initializers.zeros, self.axes, role="norm_bias", sublayer=self.sublayer),
          (x.shape[-1],),
          self.param_dtype,
      )
    return y.astype(self.dtype)


class Identity(nn.Module):
  """No normalization: returns its input."""

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return x


def get_norm(name: str) -> Callable[..., nn.Module]:
  """Returns a factory `(epsilon, use_bias, dtype, param_dtype, name, sublayer, axes, alpha_init, shift_init) ->
  nn.Module` for the norm `name`; `axes` is the logical name of the normalized (last) axis, ("embed",) on the residual
  stream, ("kv",) for QK-norm over the head dimension; `alpha_init` / `shift_init` are DyT's and Derf's α₀ and s₀
  (ignored by the others)."""
  scale_init = lambda sublayer, axes: declare(nn.initializers.ones, axes, role="norm_scale", sublayer=sublayer)
  bias_init = lambda sublayer, axes: declare(nn.initializers.zeros, axes, role="norm_bias", sublayer=sublayer)
  if name == "layernorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",), **_: nn.LayerNorm(
        epsilon=epsilon,
        use_bias=use_bias,
        dtype=dtype,
        param_dtype=param_dtype,
        scale_init=scale_init(sublayer, axes),
        bias_init=bias_init(sublayer, axes),
        name=name,
    )
  if name == "rmsnorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",), **_: nn.RMSNorm(
        epsilon=epsilon, dtype=dtype, param_dtype=param_dtype, scale_init=scale_init(sublayer, axes), name=name
    )
  if name in POINTWISE:
    fn = {"dyt": "tanh", "derf": "erf"}[name]

    def pointwise(*, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",), alpha_init, shift_init):
      del epsilon  # no statistics, nothing to guard
      return PointwiseNorm(fn, alpha_init, shift_init, use_bias, dtype, param_dtype, sublayer, tuple(axes), name=name)

    return pointwise
  if name == "none":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",), **_: Identity(name=name)
  raise ValueError(f"model.norm_type={name!r} is not one of {list(NORMS)}")


def make_norm(
    config: Any, name: str, sublayer: str, norm_type: str | None = None, axes: tuple = ("embed",)
) -> nn.Module:
  """The configured norm as a named submodule of `sublayer` (call inside a compact method or setup), normalizing the
  last axis, whose logical name is `axes`."""
  return get_norm(norm_type or config.norm_type)(
      epsilon=config.norm_epsilon,
      use_bias=config.use_bias,
      dtype=config.dtype,
      param_dtype=config.param_dtype,
      name=name,
      sublayer=sublayer,
      axes=axes,
      alpha_init=alpha_init(config, sublayer),
      shift_init=config.derf_shift_init,
  )
