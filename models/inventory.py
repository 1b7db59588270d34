"""What the whole model declares, read back: every parameter's role, logical axes and learning-rate multiplier.

The layers below (`models.norms`, `dense`, `attention`, `residual`, `transformer`) declare each parameter where they
create it (`models.roles.declare`); this module sits above `models.transformer` and reads those declarations back
from one abstract init of the model (`jax.eval_shape` of `nn.Module.init`, which keeps the boxes `Transformer.init`
strips), cached per config:
- `param_roles(model[, params])`: a `models.roles.ParamRole` per parameter;
- `logical_axes(model)`: a `PartitionSpec` of logical names (`models.axes.LOGICAL_AXES`) per parameter;
- `lr_multipliers(params, config)`: each parameter's learning-rate multiplier, the rule of
  `models.parameterization.lr_multiplier` applied to its role.
So `models/` reads bottom-up: nothing below this module imports it or `models.transformer`.
"""

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from models.parameterization import lr_multiplier
from models.roles import Declared, ParamRole, declared_roles, key_name
from models.transformer import Transformer


@functools.lru_cache(maxsize=64)
def boxed_param_shapes(config: Any) -> Any:
  """`nn.Module.init` of `Transformer(config)` traced abstractly (`jax.eval_shape`, on a one-token batch: no shape
  depends on the length) with its declarations' boxes kept: ShapeDtypeStructs in `Declared` boxes, the params only.
  Cached per config: the roles and the logical axes read it, and a run's setup asked for both (three traces of the
  whole model with init's own, each as long as the model is deep); a sweep's seeds share it."""
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
      theirs = {"/".join(key_name(k) for k in p) for p, _ in jax.tree_util.tree_leaves_with_path(params)}
      ours = {r.path for r in jax.tree.leaves(roles, is_leaf=is_role)}
      raise ValueError(
          f"params do not match the model's parameters: missing {sorted(ours - theirs)[:5]}, "
          f"not declared by the model {sorted(theirs - ours)[:5]}"
      )
    for r, shape, leaf in zip(jax.tree.leaves(roles, is_leaf=is_role), shapes, jax.tree.leaves(params)):
      if tuple(leaf.shape) != shape:
        raise ValueError(f"parameter {r.path!r} has shape {tuple(leaf.shape)}, the model's is {shape}")
  return roles


def logical_axes(model: Any) -> Any:
  """The logical `PartitionSpec` of every parameter of `model`, as a pytree shaped like its `params`.

  Args:
    model: a `models.Transformer` or its `ModelConfig` (with `vocab_size` set).

  Returns:
    A pytree like `params` whose leaves are `jax.sharding.PartitionSpec`s of names from `models.axes.LOGICAL_AXES`,
    one entry per axis of the parameter (P() for a scalar). Read from the boxes of the abstract init traced once per
    config for the roles (`boxed_param_shapes`), so it computes and traces nothing more.
  """
  return nn.get_partition_spec(boxed_param_shapes(getattr(model, "config", model)))


def lr_multipliers(params: Any, config: Any) -> Any:
  """Per-parameter learning-rate multipliers (a pytree like `params`) for the optimizer: the parameterization's rule
  (`models.parameterization.lr_multiplier`) applied to every parameter's declared role."""
  return jax.tree.map(lambda r: lr_multiplier(r, config), param_roles(config, params))
