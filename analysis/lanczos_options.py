"""The project's name for `curvax.lanczos_options` (the code lives there; see its docstring)."""

from curvax.lanczos_options import (  # noqa: F401
    DEFAULT_MAX_BASIS_BYTES,
    LANCZOS_KEYS,
    REORTH_PASSES,
    REORTHOGONALIZATIONS,
    STOP_BOUNDS,
    basis_bytes,
    basis_shards,
    check_basis_memory,
    check_basis_sharding,
    check_reorthogonalize,
    check_stop,
    lanczos_options,
    sharding_constraints,
    validate_options,
)
