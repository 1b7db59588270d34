"""Blocks of a curvature operator: the sub-operator on the parameter leaves a path predicate selects.

Contract: `block(op, select)` takes an operator on pytrees shaped like some `params` (`curvax.hessian`,
`curvax.ggn`, ...) and returns its diagonal block P_B A P_Bᵀ on the selected leaves (∂²L/∂θ_B² with the other
parameters held fixed for a Hessian), as an operator on the dict {path: leaf} of those leaves. A leaf's path is its
keys joined by "/" (`leaf_paths`: dict keys, attribute names, sequence indices, e.g. "dense_0/kernel" or "0/w");
`select` is a predicate on that string, or a pytree of booleans with the structure of `params`. All blocks share the
full operator's linearization: a block product is one full product with the block's vector placed at its offsets.
The offsets are data, so blocks with the same leaf sizes (the query kernels of each layer, say) share one compiled
program. `block_indices` gives a block's flat indices in `ravel_pytree(params)` order (dense references).

Only jax and numpy: no project imports.
"""

from typing import Any, Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from curvax.operators import FlatSpec, LinearOperator, as_operator


def _key_name(k) -> str:
  for attr in ("key", "name", "idx"):
    if hasattr(k, attr):
      return str(getattr(k, attr))
  return str(k)


def path_string(path) -> str:
  """A key path (`jax.tree_util.tree_flatten_with_path`) as "a/b/0"."""
  return "/".join(_key_name(k) for k in path)


def leaf_paths(tree_or_spec) -> list:
  """The "/"-joined path of every leaf, in `jax.tree.leaves` order (of a pytree or a `FlatSpec`)."""
  if isinstance(tree_or_spec, FlatSpec):
    tree_or_spec = jax.tree.unflatten(tree_or_spec.treedef, list(range(len(tree_or_spec.shapes))))
  return [path_string(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree_or_spec)[0]]


def _selected(spec: FlatSpec, select) -> list:
  """Indices (leaf order) of the leaves `select` picks; ValueError before any compute if none or if malformed."""
  paths = leaf_paths(spec)
  if callable(select):
    idx = [i for i, p in enumerate(paths) if select(p)]
  else:
    try:
      flags = spec.treedef.flatten_up_to(select)
    except (ValueError, TypeError) as e:
      raise ValueError(
          "select must be a predicate on leaf paths (str -> bool) or a pytree of booleans with the operator's "
          f"structure; got a {type(select).__name__} that does not match it ({e})"
      ) from None
    if not all(isinstance(f, (bool, np.bool_)) for f in flags):
      raise ValueError("select as a pytree must hold Python booleans (True: the leaf is in the block)")
    idx = [i for i, f in enumerate(flags) if f]
  if len(set(paths)) != len(paths):
    raise ValueError("the operator's leaves do not have distinct paths; blocks need distinct paths")
  if not idx:
    raise ValueError(f"select matches no leaf; the leaf paths are {paths}")
  return idx


@jax.tree_util.register_pytree_node_class
class BlockOperator(LinearOperator):
  """The diagonal block P_B A P_Bᵀ of a full operator A: v_B is placed at its leaves' offsets (data) in a zero
  vector, A is applied, and the block is read back. Its flat form (`flat_operator`) carries only the leaf sizes,
  so every block with the same leaf sizes runs the same compiled program."""

  def __init__(self, full, offsets, sizes, spec):
    self.full, self.offsets, self.sizes, self.spec = full, offsets, tuple(sizes), spec

  def flat_matvec(self, x):
    full_spec = self.full.spec
    z = jnp.zeros((full_spec.size,), full_spec.dtype)
    start = 0
    for j, size in enumerate(self.sizes):
      z = jax.lax.dynamic_update_slice(z, x[start : start + size].astype(z.dtype), (self.offsets[j],))
      start += size
    y = self.full.flat_matvec(z)
    parts = [jax.lax.dynamic_slice(y, (self.offsets[j],), (size,)) for j, size in enumerate(self.sizes)]
    return jnp.concatenate(parts).astype(self.spec.dtype)

  def nonfinite_inputs(self) -> str:
    return self.full.nonfinite_inputs()

  def checked_inputs(self) -> dict:
    return self.full.checked_inputs()

  def flat_operator(self):
    flat = FlatSpec(jax.tree.structure(0), ((self.spec.size,),), (jnp.dtype(self.spec.dtype).name,))
    return BlockOperator(self.full.flat_operator(), self.offsets, self.sizes, flat)

  def tree_flatten(self):
    return (self.full, self.offsets), (self.sizes, self.spec)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], children[1], *aux)


def block_on_leaves(op: LinearOperator, idx, paths) -> BlockOperator:
  """The block of `op` on its leaves `idx` (leaf order), as an operator on {paths[j]: leaf idx[j]} dicts."""
  spec = op.spec
  offsets = np.cumsum([0] + list(spec.sizes))
  order = sorted(range(len(paths)), key=lambda j: paths[j])  # a dict pytree ravels in sorted-key order
  block_spec = FlatSpec(
      jax.tree.structure({p: 0 for p in paths}),
      tuple(spec.shapes[idx[j]] for j in order),
      tuple(spec.dtypes[idx[j]] for j in order),
  )
  starts = jnp.asarray([offsets[idx[j]] for j in order], jnp.int32)
  sizes = [spec.sizes[idx[j]] for j in order]
  return BlockOperator(op, starts, sizes, block_spec)


def block(op: LinearOperator, select: Union[Callable[[str], bool], Any]) -> BlockOperator:
  """The diagonal block of `op` on the leaves `select` picks, an operator on {path: leaf} dicts.

  Args:
    op: a curvax operator on pytrees shaped like the parameters (or any `LinearOperator`).
    select: `select(path) -> bool` on "/"-joined leaf paths (`leaf_paths(params)` lists them), or a pytree of
      booleans with the structure of the parameters.

  Returns:
    A `BlockOperator`: `blk(v_B)` on {path: leaf} dicts; `blk.size`, `blk.dtype`; every curvax routine accepts it.
  """
  op = as_operator(op)
  idx = _selected(op.spec, select)
  paths = leaf_paths(op.spec)
  return block_on_leaves(op, idx, [paths[i] for i in idx])


def block_indices(op_or_params, select) -> np.ndarray:
  """Flat indices (in `ravel_pytree(params)` order) of a block, in the block operator's ravel order (sorted paths)."""
  spec = op_or_params.spec if isinstance(op_or_params, LinearOperator) else FlatSpec.of(op_or_params)
  idx = _selected(spec, select)
  paths = leaf_paths(spec)
  offsets = np.cumsum([0] + list(spec.sizes))
  by_path = {paths[i]: np.arange(offsets[i], offsets[i + 1]) for i in idx}
  return np.concatenate([by_path[p] for p in sorted(by_path)])
