"""Non-finite products stop a routine with one error naming what was not finite.

Contract: every public routine (`lanczos`, `top_eigenvalues`, `bottom_eigenvalues`, `spectral_density`, `trace`,
`diagonal`) ends with `check_finite(routine, op, arrays)` on a few small arrays of its result that every product
entered (Lanczos' α and β, an estimate): one transfer of those arrays at the end of the call, no check inside the
loop, so a finite run pays one host synchronization per call and nothing per step. If one is not finite, it raises
FloatingPointError naming the routine, the array and the first Lanczos step (product) that was not finite, and what
the operator knows of its inputs (`LinearOperator.nonfinite_inputs`: e.g. "loss_fn(params, batch) is nan for
batch(es) [0]"). The operator's own small inputs (`LinearOperator.checked_inputs`: the per-batch losses of
`curvax.hessian`) come in the same transfer, so a NaN loss stops the routine even where its curvature is finite
(log of a negative number has a finite derivative). Inside a caller's `jax.jit` (traced results) nothing can be
fetched and nothing is checked. Only jax and numpy.
"""

from typing import Any

import jax
import numpy as np


def _kind(a: np.ndarray) -> str:
  kinds = [k for k, has in (("nan", np.isnan(a).any()), ("inf", np.isinf(a).any())) if has]
  return " and ".join(kinds)


def check_finite(routine: str, op: Any, arrays: dict) -> None:
  """Raise FloatingPointError if an array of `arrays` ({name: array}) has a NaN or an infinity.

  Args:
    routine: the public routine's name, for the message.
    op: the operator it ran on (asked for `nonfinite_inputs()`).
    arrays: small result arrays every product entered; for "alphas" and "betas" ([m] or [probes, m]) the message
      names the first Lanczos step (and probe) that was not finite.
  """
  inputs = op.checked_inputs() if hasattr(op, "checked_inputs") else {}
  if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((arrays, inputs))):
    return
  host, host_inputs = jax.device_get((arrays, inputs))  # one transfer, after the computation
  if not all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(host_inputs)):
    raise FloatingPointError(f"{routine}: {op.nonfinite_inputs()}")
  for name, a in host.items():
    a = np.asarray(a)
    if np.all(np.isfinite(a)):
      continue
    where = ""
    if name in ("alphas", "betas"):
      first = np.argwhere(~np.isfinite(a))[0]
      where = f" from Lanczos step {int(first[-1])}" + (f" of probe {int(first[0])}" if a.ndim == 2 else "")
    source = op.nonfinite_inputs() if hasattr(op, "nonfinite_inputs") else ""
    raise FloatingPointError(
        f"{routine}: the operator's products are not finite ({name} has {_kind(a)}{where}); "
        + (source or "its inputs are finite, so the products overflowed or hit a non-differentiable point")
    )
