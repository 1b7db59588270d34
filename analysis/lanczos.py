"""Lanczos on a matvec and an example pytree: the project's positional convention over `curvax.lanczos`.

Contract: `lanczos(matvec, v0, num_steps, **options)` is `curvax.lanczos(as_operator(matvec, v0),
num_steps=num_steps, v0=v0, **options)`: the recurrence, its certificates and its programs live in `curvax.lanczos`
(see its docstring); a `LanczosResult` is curvax's.
"""

from typing import Any, Callable

from curvax.lanczos import (  # noqa: F401  (the project's names)
    BREAKDOWN_POLICY,
    LANCZOS_STATIC,
    LanczosResult,
    _lanczos_program,
    lanczos_core,
)
from curvax.lanczos import lanczos as _curvax_lanczos
from curvax.operators import as_operator


def lanczos(matvec: Callable[[Any], Any], v0: Any, num_steps: int, **options) -> LanczosResult:
  """`num_steps` Lanczos steps on `matvec` (a `LinearOperator` or a callable on pytrees shaped like `v0`) from
  `v0`; `options` as in `curvax.lanczos.lanczos` (reorthogonalize, reorth_passes, breakdown_tol, return_basis,
  max_basis_bytes, stop, callback, callback_every, basis_sharding)."""
  return _curvax_lanczos(as_operator(matvec, v0), num_steps=num_steps, v0=v0, **options)
