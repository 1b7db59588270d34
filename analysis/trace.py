"""Stochastic traces on a matvec and an example pytree: the project's positional convention over `curvax.trace`.

Contract: `trace(matvec, example, num_probes, key, method, probe_batch)` is
`curvax.trace(as_operator(matvec, example), num_probes=, key=, method=, probe_batch=)`; the estimators live in
`curvax.trace` (see its docstring).
"""

from typing import Any, Callable, Optional

import jax

from curvax.operators import as_operator
from curvax.trace import MIN_PROBES, TraceEstimate  # noqa: F401  (the project's names)
from curvax.trace import TRACE_METHODS as _CURVAX_TRACE_METHODS
from curvax.trace import trace as _curvax_trace

# The methods the project's analysis offers (`analysis.trace_method`); curvax has more (`curvax.trace.TRACE_METHODS`).
TRACE_METHODS = {name: _CURVAX_TRACE_METHODS[name] for name in ("hutchinson", "hutch++")}


def get_trace_method(name: str):
  """Return the trace estimator registered under `name` in the project's `TRACE_METHODS`."""
  if name not in TRACE_METHODS:
    raise ValueError(f"method={name!r} is not a valid trace method; valid choices: {sorted(TRACE_METHODS)}")
  return TRACE_METHODS[name]


def trace(
    matvec: Callable[[Any], Any],
    example: Any,
    num_probes: int,
    key: jax.Array,
    method: str = "hutchinson",
    probe_batch: Optional[int] = None,
) -> TraceEstimate:
  """Trace estimate of `matvec` on pytrees shaped like `example` (`curvax.trace.trace`; methods of `TRACE_METHODS`)."""
  get_trace_method(method)
  return _curvax_trace(
      as_operator(matvec, example), num_probes=num_probes, key=key, method=method, probe_batch=probe_batch
  )
