"""A general dense layer with an explicit forward multiplier (for NTK / µP parameterizations).

y = multiplier · (x ⋅ W) + b, contracting `axis` of x with the leading axes of W. The kernel has shape
`x.shape[axis] + features`, e.g. a query projection [d_model, heads, head_dim]; the caller computes the multiplier
from `models.parameterization`. Flax's DenseGeneral has no multiplier, and folding it into the kernel would change
what the optimizer sees (the point of NTK/µP), hence this small module.

`axes` names the kernel's axes for sharding (Flax logical partitioning metadata, `models.axes`): the contracted
input axes, then the feature axes; the bias takes the feature axes' names. `role` and `sublayer` are what the kernel
is (`models.roles`); the bias declares the role `bias` in the same sublayer.
"""

from typing import Any, Callable, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from models.roles import declare


def _tuple(x):
  return tuple(x) if isinstance(x, Sequence) else (x,)


class Dense(nn.Module):
  """Dense layer over several input/output axes with a forward multiplier.

  Attributes:
    features: output feature shape (int or tuple).
    axis: input axes to contract (int or tuple; negative indices).
    use_bias: add a bias of shape `features`.
    multiplier: constant multiplying x⋅W before the bias.
    kernel_init, bias_init: flax initializers (the model's defaults; `init/` schemes re-initialize by role).
    axes: logical axis names of the kernel (input axes, then feature axes; `models.axes.LOGICAL_AXES`), None: unnamed.
    role: the kernel's role (`models.roles.ROLES`); sublayer: the part of the model it belongs to.
    dtype: compute dtype; param_dtype: storage dtype.
  """

  features: int | Sequence[int]
  axis: int | Sequence[int] = -1
  use_bias: bool = True
  multiplier: float = 1.0
  kernel_init: Callable = nn.initializers.lecun_normal()
  bias_init: Callable = nn.initializers.zeros
  axes: Optional[tuple[Optional[str], ...]] = None
  role: Optional[str] = None
  sublayer: Optional[str] = None
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    features, axis = _tuple(self.features), tuple(a % x.ndim for a in _tuple(self.axis))
    in_shape = tuple(x.shape[a] for a in axis)
    fan_in = int(np.prod(in_shape))

    def kernel_init(key, shape, dtype):
      # Initialize as a [fan_in, fan_out] matrix so fans are right for multi-head shapes.
      flat = self.kernel_init(key, (fan_in, int(np.prod(features))), dtype)
      return flat.reshape(shape)

    names = (None,) * (len(in_shape) + len(features)) if self.axes is None else tuple(self.axes)
    if len(names) != len(in_shape) + len(features):
      raise ValueError(f"Dense {self.name}: axes={self.axes} has not one name per kernel axis {in_shape + features}")
    kernel_init = declare(kernel_init, names, role=self.role, sublayer=self.sublayer)
    kernel = self.param("kernel", kernel_init, in_shape + features, self.param_dtype)
    x, kernel = nn.dtypes.promote_dtype(x, kernel, dtype=self.dtype)
    contract = (axis, tuple(range(len(axis))))
    y = jax.lax.dot_general(x, kernel, (contract, ((), ())))
    if self.multiplier != 1.0:
      y = y * jnp.asarray(self.multiplier, y.dtype)
    if self.use_bias:
      bias_init = declare(self.bias_init, names[len(in_shape) :], role="bias", sublayer=self.sublayer)
      bias = self.param("bias", bias_init, features, self.param_dtype)
      y = y + bias.astype(y.dtype)
    return y
