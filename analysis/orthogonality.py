"""The project's name for `curvax.orthogonality` (the code lives there; see its docstring)."""

from curvax.orthogonality import (  # noqa: F401
    GRAM_COLUMNS,
    REORTH_CHUNK,
    TWICE_IS_ENOUGH_ETA,
    cgs_reorthogonalize,
    measured_orthogonality_loss,
    omega_update,
    project_out,
)
