"""Normalization layers (registry `get_norm(name)`).

- `layernorm` (Ba, Kiros & Hinton 2016): g ⊙ (x − μ)/√(var + ε) + b; the bias only when `use_bias`.
- `rmsnorm` (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): g ⊙ x/√(mean(x²) + ε); no centring,
  no bias (T5, docs/science.md §5).
- `none`: the identity (no parameters).

Statistics are computed in float32 whatever the compute dtype, as flax does, so bfloat16 runs stay stable.
Scale and bias declare the logical axis ("embed",) (`models.axes`).
"""

from typing import Any, Callable

import flax.linen as nn
import jax

NORMS = ("layernorm", "rmsnorm", "none")
_SCALE_INIT = nn.with_logical_partitioning(nn.initializers.ones, ("embed",))
_BIAS_INIT = nn.with_logical_partitioning(nn.initializers.zeros, ("embed",))


class Identity(nn.Module):
  """No normalization: returns its input."""

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    return x


def get_norm(name: str) -> Callable[..., nn.Module]:
  """Returns a factory `(epsilon, use_bias, dtype, param_dtype, name) -> nn.Module` for the norm `name`."""
  if name == "layernorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name: nn.LayerNorm(
        epsilon=epsilon,
        use_bias=use_bias,
        dtype=dtype,
        param_dtype=param_dtype,
        scale_init=_SCALE_INIT,
        bias_init=_BIAS_INIT,
        name=name,
    )
  if name == "rmsnorm":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name: nn.RMSNorm(
        epsilon=epsilon, dtype=dtype, param_dtype=param_dtype, scale_init=_SCALE_INIT, name=name
    )
  if name == "none":
    return lambda *, epsilon, use_bias, dtype, param_dtype, name: Identity(name=name)
  raise ValueError(f"model.norm_type={name!r} is not one of {list(NORMS)}")


def make_norm(config: Any, name: str, norm_type: str | None = None) -> nn.Module:
  """The configured norm as a named submodule (call inside a compact method)."""
  return get_norm(norm_type or config.norm_type)(
      epsilon=config.norm_epsilon,
      use_bias=config.use_bias,
      dtype=config.dtype,
      param_dtype=config.param_dtype,
      name=name,
  )
