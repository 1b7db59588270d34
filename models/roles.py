"""Parameter roles: what every leaf of the parameter pytree is, declared by the model where the parameter is created.

Every parameter of the model is created through `declare(init, axes, role=..., sublayer=...)`: Flax's logical
partitioning metadata (`nn.LogicallyPartitioned`, as in the Flax lm1b/wmt examples and MaxText) extended with the
parameter's role and the sublayer it belongs to. `declared_roles(boxed_params)` reads these declarations back as
a pytree shaped like the params whose leaves are `ParamRole` records: role, stack (`encoder` / `decoder` /
`shared`: the stack module the parameter sits in), layer index (the `layer_<i>` module it sits in; None outside
layers), sublayer (`self_attn`, `cross_attn`, `mlp`, `embedding`, `position`, `final_norm`, `head`, ...), fan_in and
fan_out (multi-head kernels count heads × head_dim as one axis). Init schemes, µP learning-rate multipliers,
per-block Hessians and gradient profiles are built on these records, never on parameter names. A parameter created
without a declared role fails `declared_roles`, so a new module cannot silently go without one.

This module sits at the bottom of `models/` (every layer that creates a parameter imports `declare`) and imports
nothing of the project; `models.inventory`, above `models.transformer`, traces the whole model and reads its
declarations back (`param_roles(model)`, `logical_axes(model)`).

Roles: embedding, position, attn_q, attn_k, attn_v, attn_out, attn_gate (gated attention's W_θ, Qiu et al. 2025),
mlp_in (a gated MLP's linear V), mlp_gate (a gated MLP's activated W, Shazeer 2020 Eq. 6), mlp_out, norm_scale,
norm_bias, norm_alpha (DyT's / Derf's α), norm_shift (Derf's s), residual_scale, head, bias. `NORM_ROLES` are the
parameters of norms.
"""

import dataclasses
import functools
import re
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import numpy as np
from flax import struct

ROLES = (
    "embedding",
    "position",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_out",
    "attn_gate",
    "mlp_in",
    "mlp_gate",
    "mlp_out",
    "norm_scale",
    "norm_bias",
    "norm_alpha",
    "norm_shift",
    "residual_scale",
    "head",
    "bias",
)
NORM_ROLES = ("norm_scale", "norm_bias", "norm_alpha", "norm_shift")


class Declared(nn.LogicallyPartitioned):
  """A parameter's box at creation: its value, its logical axis names (`models.axes`), its role and sublayer.

  A subclass of Flax's `LogicallyPartitioned`, so `nn.get_partition_spec`, `nn.unbox` and sharding read it as
  any logically partitioned parameter; `role` and `sublayer` are static metadata (not pytree leaves).
  """

  role: str = struct.field(default="", pytree_node=False)
  sublayer: str = struct.field(default="", pytree_node=False)


def declare(init: Callable, axes: tuple, *, role: str, sublayer: str) -> Callable:
  """Wraps a Flax initializer so the parameter it creates declares its logical `axes`, `role` and `sublayer`.

  Args:
    init: a Flax initializer `(key, shape, dtype) -> array`.
    axes: one logical axis name (`models.axes.LOGICAL_AXES`) or None per axis of the parameter.
    role: one of `ROLES`.
    sublayer: the part of the model it belongs to (e.g. `self_attn`, `mlp`, `final_norm`).

  Returns:
    The initializer returning a `Declared` box.
  """
  if role not in ROLES:
    raise ValueError(f"role={role!r} is not one of {list(ROLES)}")

  @functools.wraps(init)
  def boxed(*args, **kwargs):
    return Declared(init(*args, **kwargs), tuple(axes), role=role, sublayer=sublayer)

  return boxed


@dataclasses.dataclass(frozen=True)
class ParamRole:
  """What a parameter is. Not a pytree node, so it is a leaf of the roles tree."""

  role: str
  stack: str
  layer: Optional[int]
  sublayer: Optional[str]
  fan_in: int
  fan_out: int
  path: str

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def key_name(k) -> str:
  return str(getattr(k, "key", getattr(k, "name", k)))


def _fans(role: str, shape: tuple) -> tuple[int, int]:
  if role in ("embedding", "position"):  # [V, D]: as a readout x·Eᵀ its fan-in is D
    return int(shape[-1]), int(shape[0])
  if role == "attn_out":  # [H, K, D]
    return int(np.prod(shape[:-1])), int(shape[-1])
  if len(shape) >= 2:  # [D, ...] kernels: first axis in, the rest out
    return int(shape[0]), int(np.prod(shape[1:]))
  n = int(np.prod(shape)) if shape else 1
  return n, n


def _record(names: list[str], box: Any) -> ParamRole:
  """The ParamRole of one declared parameter at module path `names`."""
  path = "/".join(names)
  if not isinstance(box, Declared):
    raise ValueError(
        f"parameter {path!r} has no declared role: create it with models.roles.declare(init, axes, role=, sublayer=)"
    )
  # Where it sits: the stack module and the layer module on its path (module structure, not its name).
  stack = names[0] if names[0] in ("encoder", "decoder") else "shared"
  layer = next((int(m.group(1)) for n in names[:-1] if (m := re.fullmatch(r"layer_(\d+)", n))), None)
  fan_in, fan_out = _fans(box.role, tuple(box.value.shape))
  return ParamRole(box.role, stack, layer, box.sublayer, fan_in, fan_out, path)


def declared_roles(boxed_params: Any) -> Any:
  """The `ParamRole` of every parameter of a module's boxed params (what `nn.Module.init` returns, before
  `nn.unbox`), read from their `Declared` boxes; ValueError naming the first parameter that declares no role."""
  is_box = lambda x: isinstance(x, nn.meta.AxisMetadata)
  return jax.tree_util.tree_map_with_path(
      lambda path, box: _record([key_name(k) for k in path], box), boxed_params, is_leaf=is_box
  )
