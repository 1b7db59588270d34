"""Parameter roles: what every leaf of the parameter pytree is, declared by the model where the parameter is created.

Every parameter of the model is created through `declare(init, axes, role=..., sublayer=...)`: Flax's logical
partitioning metadata (`nn.LogicallyPartitioned`, as in the Flax lm1b/wmt examples and MaxText) extended with the
parameter's role and the sublayer it belongs to. `param_roles(model)` reads these declarations back without
computing anything (`jax.eval_shape` of `nn.Module.init`, which keeps the boxes `Transformer.init` strips) and
returns a pytree shaped like the params whose leaves are `ParamRole` records: role, stack (`encoder` / `decoder` /
`shared`: the stack module the parameter sits in), layer index (the `layer_<i>` module it sits in; None outside
layers), sublayer (`self_attn`, `cross_attn`, `mlp`, `embedding`, `position`, `final_norm`, `head`, ...), fan_in and
fan_out (multi-head kernels count heads × head_dim as one axis). Init schemes, µP learning-rate multipliers,
per-block Hessians and gradient profiles are built on these records, never on parameter names. A parameter created
without a declared role fails `param_roles`, so a new module cannot silently go without one.

Roles: embedding, position, attn_q, attn_k, attn_v, attn_out, mlp_in, mlp_out, norm_scale, norm_bias,
residual_scale, head, bias.
"""

import dataclasses
import functools
import re
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

ROLES = (
    "embedding",
    "position",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_out",
    "mlp_in",
    "mlp_out",
    "norm_scale",
    "norm_bias",
    "residual_scale",
    "head",
    "bias",
)


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


def _key_name(k) -> str:
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
      lambda path, box: _record([_key_name(k) for k in path], box), boxed_params, is_leaf=is_box
  )


@functools.lru_cache(maxsize=64)
def boxed_param_shapes(config: Any) -> Any:
  """`nn.Module.init` of `Transformer(config)` traced abstractly (`jax.eval_shape`, on a one-token batch: no shape
  depends on the length) with its declarations' boxes kept: ShapeDtypeStructs in `Declared` boxes, the params only.
  Cached per config: the roles and the logical axes (`models.axes`) read it, and a run's setup asked for both (three
  traces of the whole model with init's own, each as long as the model is deep); a sweep's seeds share it."""
  # Imported here: models.transformer imports models.parameterization, which reads roles.
  from models.transformer import Transformer  # pylint: disable=g-import-not-at-top

  batch = {k: jnp.ones((1, 1), jnp.int32) for k in ("inputs", "targets")}
  return jax.eval_shape(functools.partial(nn.Module.init, Transformer(config)), jax.random.key(0), batch)["params"]


@functools.lru_cache(maxsize=64)
def _declared_roles(config: Any) -> Any:
  boxed = boxed_param_shapes(config)
  shapes = tuple(tuple(box.value.shape) for box in jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, Declared)))
  return declared_roles(boxed), shapes


def param_roles(model: Any, params: Any = None) -> Any:
  """The `ParamRole` of every parameter `model` declares, as a pytree like its params.

  Args:
    model: a `models.Transformer` or its `ModelConfig` (with `vocab_size` set).
    params: optionally a pytree of arrays or ShapeDtypeStructs (params, gradients, ...) to check against: its tree
      structure and shapes must be the model's, else ValueError.

  Returns:
    A pytree with the structure of the model's `params` and `ParamRole` leaves (read from the declarations, cached
    per model config).
  """
  config = getattr(model, "config", model)
  if getattr(config, "vocab_size", None) is None:
    raise ValueError(f"param_roles needs a models.Transformer or a ModelConfig with vocab_size, got {model!r}")
  roles, shapes = _declared_roles(config)
  if params is not None:
    is_role = lambda r: isinstance(r, ParamRole)
    if jax.tree.structure(params) != jax.tree.structure(roles, is_leaf=is_role):
      theirs = {"/".join(_key_name(k) for k in p) for p, _ in jax.tree_util.tree_leaves_with_path(params)}
      ours = {r.path for r in jax.tree.leaves(roles, is_leaf=is_role)}
      raise ValueError(
          f"params do not match the model's parameters: missing {sorted(ours - theirs)[:5]}, "
          f"not declared by the model {sorted(theirs - ours)[:5]}"
      )
    for r, shape, leaf in zip(jax.tree.leaves(roles, is_leaf=is_role), shapes, jax.tree.leaves(params)):
      if tuple(leaf.shape) != shape:
        raise ValueError(f"parameter {r.path!r} has shape {tuple(leaf.shape)}, the model's is {shape}")
  return roles
