"""The project's name for `curvax.ritz` (the code lives there; see its docstring)."""

from curvax.ritz import (  # noqa: F401
    gap_refined_bounds,
    ritz_converged,
    ritz_vectors,
    tridiagonal_eigh,
)
