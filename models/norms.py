"""Normalization layers (registry `get_norm(name)`).

- `layernorm` (Ba, Kiros & Hinton 2016): g ⊙ (x − μ)/√(var + ε) + b; the bias only when `use_bias`.
- `rmsnorm` (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): g ⊙ x/√(mean(x²) + ε); no centring,
  no bias (T5, docs/science.md §5).
- `none`: the identity (no parameters).

Statistics are computed in float32 whatever the compute dtype, as flax does, so bfloat16 runs stay stable.
Scale and bias declare the logical axis ("embed",) (`models.axes`) and the roles `norm_scale` / `norm_bias` of the
sublayer the norm belongs to (`models.roles`).
"""

from typing import Any, Callable

import flax.linen as nn
import jax

from models.roles import declare

NORMS = ("layernorm", "rmsnorm", "none")


class Identity(nn.Module):
  """No normalization: returns its input."""

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return x


def get_norm(name: str) -> Callable[..., nn.Module]:
  """Returns a factory `(epsilon, use_bias, dtype, param_dtype, name, sublayer, axes) -> nn.Module` for the norm
  `name`; `axes` is the logical name of the normalized (last) axis, ("embed",) on the residual stream, ("kv",) for
  QK-norm over the head dimension."""
  scale_init = lambda sublayer, axes: declare(nn.initializers.ones, axes, role="norm_scale", sublayer=sublayer)
  bias_init = lambda sublayer, axes: declare(nn.initializers.zeros, axes, role="norm_bias", sublayer=sublayer)
  if name == "layernorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",): nn.LayerNorm(
        epsilon=epsilon,
        use_bias=use_bias,
        dtype=dtype,
        param_dtype=param_dtype,
        scale_init=scale_init(sublayer, axes),
        bias_init=bias_init(sublayer, axes),
        name=name,
    )
  if name == "rmsnorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",): nn.RMSNorm(
        epsilon=epsilon, dtype=dtype, param_dtype=param_dtype, scale_init=scale_init(sublayer, axes), name=name
    )
  if name == "none":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name, sublayer, axes=("embed",): Identity(name=name)
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
  )
