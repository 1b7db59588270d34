"""The checks every curvature constructor makes on its inputs before any compute, each one line naming the bad
thing and the way out.

Contract: `check_params(params)` wants every leaf a real floating array and names the leaf paths that are not (an
NNX State's RNG counts and keys, an unsplit Equinox model's functions) and refuses, by path, running statistics put
among the parameters (leaves under a Linen `batch_stats` collection, or in an NNX `BatchStat`: floats that no gradient
step moves, whose Hessian rows are no direction of training); `as_batches(batch, batches)` gives the list
of batches: `batches=[b1, b2]` explicitly, or a positional `batch` that is one batch unless it is a Python list,
which stays, as it always was, several batches (a list whose elements differ in structure, rank or dtype, as
`[x, y]` does, is refused with the two ways to say what was meant); within a batch, the array leaves must agree on
their leading (example) dimension. `scalar_loss` checks, while the loss is traced, that it returns a real scalar.
Only jax and numpy.
"""

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from curvax.blocks import path_string
from curvax.operators import FlatSpec

NO_BATCH = object()  # the default of a constructor's `batch`: neither `batch` nor `batches` was given
_SHOWN = 6  # offending leaves named in a message; the rest are counted


def _describe(x) -> str:
  if isinstance(x, (jax.Array, np.ndarray, np.generic)):
    return f"{jnp.result_type(x).name}{list(np.shape(x))}"
  return type(x).__name__


def _named(items) -> str:
  more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
  return ", ".join(items[:_SHOWN]) + more


def check_params(params) -> FlatSpec:
  """The `FlatSpec` of `params`; ValueError naming the leaf paths of non-floats and of running statistics."""
  with_paths = jax.tree_util.tree_flatten_with_path(params)[0]
  if not with_paths:
    raise ValueError(
        "params has no array leaves (None entries are empty subtrees): pass the pytree of parameters the loss "
        "differentiates"
    )
  bad = []
  for path, x in with_paths:
    is_number = isinstance(x, (jax.Array, np.ndarray, np.generic, float))
    if not (is_number and jnp.issubdtype(jnp.result_type(x), jnp.floating)):
      bad.append(f"'{path_string(path) or '<root>'}' ({_describe(x)})")
  if bad:
    raise ValueError(
        f"params must be real floating arrays; these leaves are not: {_named(bad)}. Differentiate only the float "
        "parameters and close the loss over the rest (NNX: graphdef, params, rest = nnx.split(model, nnx.Param, "
        "...); Equinox: params, static = eqx.partition(model, eqx.is_inexact_array))"
    )
  stats = _batch_stats(params)
  if stats:
    raise ValueError(
        f"params holds running statistics, not parameters: {_named(stats)}. Differentiate the parameters only and "
        "close the loss over the statistics (Linen: params = variables['params'], loss applying {'params': p, "
        "'batch_stats': batch_stats} with use_running_average=True; NNX: nnx.split(model, nnx.Param, ...))"
    )
  return FlatSpec.of(params)


def _is_batch_stat(x) -> bool:
  # By class name: curvax imports no Flax. An NNX BatchStat is a pytree node around its value.
  return any(c.__name__ == "BatchStat" for c in type(x).__mro__)


def _batch_stats(params) -> list:
  """Named leaves of `params` under a key named "batch_stats" (Linen's collection) or inside an NNX BatchStat."""
  found = []
  for path, node in jax.tree_util.tree_flatten_with_path(params, is_leaf=_is_batch_stat)[0]:
    in_collection = any(path_string((k,)) == "batch_stats" for k in path)
    if in_collection or _is_batch_stat(node):
      for sub, x in jax.tree_util.tree_flatten_with_path(node)[0]:
        found.append(f"'{path_string(path + sub)}' ({_describe(x)})")
  return found


def _signature(batch) -> tuple:
  """A batch's structure without its leading dimensions: the tree and each leaf's rank and dtype."""
  leaves, treedef = jax.tree.flatten(batch)
  return treedef, tuple((np.ndim(x), _describe(x).split("[")[0]) for x in leaves)


def _check_leading_dims(batch, index: int) -> None:
  with_paths = jax.tree_util.tree_flatten_with_path(batch)[0]
  rows = [(path_string(p) or "<root>", np.shape(x)[0]) for p, x in with_paths if np.ndim(x) >= 1]
  counts = sorted({r for _, r in rows})
  if len(counts) > 1:
    named = [f"'{p}' has {r}" for p, r in rows]
    raise ValueError(
        f"batch {index}: its array leaves disagree on the leading (example) dimension ({_named(named)}); every "
        "array leaf of a batch holds its examples on axis 0 (close the loss over per-batch constants instead)"
    )


def as_batches(batch: Any = NO_BATCH, batches: Optional[Sequence[Any]] = None) -> list:
  """The list of batches of a constructor's `batch` / `batches` arguments (module docstring)."""
  if batches is not None:
    if batch is not NO_BATCH:
      raise ValueError("pass either batch= (one batch) or batches= (a list of batches), not both")
    if not isinstance(batches, (list, tuple)) or not batches:
      raise ValueError(f"batches= must be a non-empty list of batches, got {type(batches).__name__} {batches!r:.60}")
    out = list(batches)
  elif batch is NO_BATCH:
    raise ValueError("no batch given: pass batch= (one batch, any pytree the loss reads) or batches=[b1, b2, ...]")
  elif isinstance(batch, list):
    if not batch:
      raise ValueError("batch: an empty list of batches was given; pass one batch (any pytree) or a non-empty list")
    first = _signature(batch[0])
    for i, b in enumerate(batch[1:], 1):
      if _signature(b) != first:
        raise ValueError(
            f"batch is a list, read as {len(batch)} batches, but batch {i} differs from batch 0 in structure, rank "
            f"or dtype ({_named([_describe(x) for x in jax.tree.leaves(batch[0])])} vs "
            f"{_named([_describe(x) for x in jax.tree.leaves(b)])}): for one batch of several arrays pass a tuple "
            "(x, y); for several batches pass batches=[...]"
        )
    out = batch
  else:
    out = [batch]
  for i, b in enumerate(out):
    _check_leading_dims(b, i)
  return out


def normalized_weights(num_batches: int, weights: Optional[Sequence[float]] = None) -> np.ndarray:
  """w_b / Σ w_b (equal weights when `weights` is None); ValueError on a wrong length, a negative entry or a zero sum."""
  raw = np.ones(num_batches) if weights is None else np.asarray(weights, np.float64)
  if raw.shape != (num_batches,):
    raise ValueError(f"weights must have one entry per batch ({num_batches}), got shape {raw.shape}")
  if not np.all(np.isfinite(raw)) or np.any(raw < 0) or raw.sum() <= 0:
    raise ValueError(f"weights={raw.tolist()} must be finite and non-negative with a positive sum")
  return raw / raw.sum()


def scalar_loss(loss_fn, params, batch, name: str = "loss_fn", args: str = "params, batch") -> jax.Array:
  """`loss_fn(params, batch)`, checked (at trace time, so at no run-time cost) to be a real floating scalar."""
  out = loss_fn(params, batch)
  shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
  if shape != () or not jnp.issubdtype(dtype, jnp.floating):
    got = f"{jnp.dtype(dtype).name}{list(shape)}" if shape is not None else type(out).__name__
    raise ValueError(
        f"{name}({args}) must return a real floating scalar, got {got}: average per-example losses "
        "(jnp.mean), or pass them to curvax.empirical_fisher; for a loss returning (loss, aux), pass "
        f"lambda a, b: {name}(a, b)[0]"
    )
  return out
