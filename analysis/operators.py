"""Linear operators as data: the project's name for `curvax.operators` (the code lives there; see its docstring)."""

from curvax.operators import (  # noqa: F401
    FlatSpec,
    FunctionOperator,
    LinearOperator,
    as_operator,
    as_pytree_fn,
    dispatch_callback,
    ravel_leaves,
    register_callback,
    release_callback,
    report,
    run_program,
    with_callback,
)
