"""Random probes of the stochastic estimators (SLQ in `curvax.density`, Hutchinson and Hutch++ in `curvax.trace`),
and how many of them run in lockstep.

Contract: `sample_probes(example, num_probes, key, probe)` draws probes as pytrees shaped like `example` from the
registry `PROBES` (`get_probe(name)`: Rademacher ±1 or Gaussian N(0, 1)), of unit norm for SLQ or not for trace
estimation (E[vvᵀ] = I); `draw_probes` is the flat [num_probes, n] draw the jitted programs call. `map_probes` runs
a per-probe function one after another (`lax.map`, memory of one probe) or `probe_batch` at a time in lockstep
through one vmapped matvec (memory × probe_batch); `check_probe_batch` validates `probe_batch`, whose default per
backend is measured (`PROBE_BATCH_DEFAULTS`). `flat_info` (size, dtype and unravel of an `example` pytree, from its
shapes alone) and `check_positive_int` are the argument checks the estimators share. No project imports: only jax,
numpy and `curvax.operators`.
"""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curvax.operators import FlatSpec, LinearOperator


def _rademacher(key, shape, dtype):
  return jax.random.rademacher(key, shape, dtype=dtype)


def _gaussian(key, shape, dtype):
  return jax.random.normal(key, shape, dtype=dtype)


PROBES = {"rademacher": _rademacher, "gaussian": _gaussian}


def get_probe(name: str):
  """Return the probe sampler `(key, shape, dtype) -> array` registered under `name`."""
  if name not in PROBES:
    raise ValueError(f"probe={name!r} is not a valid probe distribution; valid choices: {sorted(PROBES)}")
  return PROBES[name]


def flat_info(example):
  """(n, dtype, unravel) of a pytree from its shapes and dtypes alone (no data is copied)."""
  spec = FlatSpec.of(example)
  if not jnp.issubdtype(spec.dtype, jnp.floating):
    raise ValueError(f"example must have a real floating dtype, got dtype={spec.dtype}")
  return spec.size, spec.dtype, spec.unravel


def operator_info(op):
  """(operator, n, dtype) of a `LinearOperator`; ValueError before any compute for anything else or a non-float dtype."""
  if not isinstance(op, LinearOperator):
    raise ValueError(
        f"expected a curvax operator (curvax.hessian, curvax.ggn, curvax.block, curvax.matrix_operator, or "
        f"curvax.as_operator(matvec, example) for a plain callable), got {type(op).__name__}"
    )
  if not jnp.issubdtype(op.dtype, jnp.floating):
    raise ValueError(f"the operator must have a real floating dtype, got dtype={op.dtype}")
  return op, op.size, op.dtype


def check_positive_int(name, value, minimum=1):
  if not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f"{name}={value!r} must be an int ≥ {minimum}")


def sample_probes(
    example: Any, num_probes: int, key: jax.Array, probe: str = "rademacher", unit_norm: bool = True
) -> Any:
  """Draw `num_probes` probe vectors as pytrees like `example`, stacked along a new leading axis.

  Args:
    example: pytree giving the size n and dtype.
    num_probes: number of probes.
    key: PRNG key.
    probe: "rademacher" (entries ±1) or "gaussian" (entries N(0, 1)).
    unit_norm: divide each probe by its norm (SLQ needs unit vectors; trace estimation needs E[vvᵀ] = I, i.e. not).

  Returns:
    The stacked pytree (leaves [num_probes, *leaf.shape]); the flat probes are its rows after
      `jax.flatten_util.ravel_pytree`.
  """
  get_probe(probe)
  check_positive_int("num_probes", num_probes)
  n, dtype, unravel = flat_info(example)
  return jax.vmap(unravel)(draw_probes(key, num_probes, n, jnp.dtype(dtype), probe, unit_norm))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def draw_probes(key, num_probes, n, dtype, probe, unit_norm):
  """[num_probes, n] flat probes from `PROBES[probe]`, each row of unit norm if `unit_norm` (sizes are static)."""
  v_pxn = PROBES[probe](key, (num_probes, n), dtype)
  if unit_norm:
    v_pxn = v_pxn / jnp.linalg.norm(v_pxn, axis=1, keepdims=True)
  return v_pxn


# Probes run in lockstep (one vmapped matvec over `probe_batch` probes) or one after another. Defaults per backend
# from `python bench/hessian.py` ("SLQ, probes in lockstep"): on XLA:CPU (2 cores, `small` preset, batch 16x32)
# 8 probes in lockstep ran 1.3-1.5x slower than one after another (the batched tangent pass does not use the cores
# better and the CGS sweeps lose the cache), so 1. Backends not listed (GPU, TPU) have not been measured by this
# project yet and also default to 1 (memory of one probe); set `probe_batch` to try lockstep there.
PROBE_BATCH_DEFAULTS = {"cpu": 1}


def default_probe_batch(num_probes: int) -> int:
  """Probes per lockstep batch on the current backend (`PROBE_BATCH_DEFAULTS`), at most `num_probes`."""
  return max(1, min(num_probes, PROBE_BATCH_DEFAULTS.get(jax.default_backend(), 1)))


def check_probe_batch(probe_batch, num_probes) -> int:
  """`probe_batch` validated (None -> the backend default)."""
  if probe_batch is None:
    return default_probe_batch(num_probes)
  if (
      isinstance(probe_batch, bool)
      or not isinstance(probe_batch, (int, np.integer))
      or not 1 <= probe_batch <= num_probes
  ):
    raise ValueError(
        f"probe_batch={probe_batch!r} must be an int in [1, num_probes={num_probes}] "
        "(1: probes one after another; num_probes: all in lockstep) or None (backend default)"
    )
  return int(probe_batch)


def map_probes(fn, xs, probe_batch):
  """`fn` over the leading axis of `xs`: sequential (`lax.map`) or `probe_batch` at a time through `vmap`."""
  return jax.lax.map(fn, xs, batch_size=None if probe_batch == 1 else probe_batch)
