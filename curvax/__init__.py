"""curvax: curvature of any JAX loss as operators that are data, and certified spectra of them.

Build an operator (`hessian`, `ggn`, `empirical_fisher`, `block`, `matrix_operator`, `as_operator`), compose it
(`A @ v`, `A + B`, `c * A`, `A + lam * identity_like(A)`, `diagonal_preconditioned(A, d)`, `to_scipy(A)`), then pass
it, operator first, to a routine that takes its shapes from it; `batch_sharpness` reads a loss over mini-batches
directly. A client's own programs over operators use `ravel_leaves` (a pytree as the flat vector of the operators'
flat products), `as_pytree_fn` (a function as jit-able data), `as_batches` and `normalized_weights` (the batches and
batch weights the constructors read); its configs check against `REORTHOGONALIZATIONS`, `BASIS_MEMORIES`,
`TRACE_METHODS` and `check_basis_memory` before any compute. Imports only jax, numpy and (for XTrace) matfree; `to_scipy` imports scipy
when called. `top_eigenvalues(..., max_vectors=m)` bounds the stored vectors by thick restart;
`lanczos_memory` counts a routine's buffers beforehand. See docs/curvax.md.
"""

from curvax.algebra import (
    IdentityOperator,
    LinearCombination,
    PreconditionedOperator,
    diagonal_preconditioned,
    identity_like,
    to_scipy,
)
from curvax.blocks import BlockOperator, block, block_indices, leaf_paths
from curvax.cache import enable_compilation_cache
from curvax.closures import as_pytree_fn
from curvax.curvature import (
    GaussNewtonOperator,
    HessianOperator,
    JvpHessianOperator,
    dense_hessian,
    dense_matrix,
    empirical_fisher,
    ggn,
    hessian,
)
from curvax.density import SpectralDensity, spectral_density
from curvax.host_basis import BASIS_MEMORIES
from curvax.inputs import as_batches, normalized_weights
from curvax.lanczos import LanczosResult, lanczos
from curvax.lanczos_options import REORTHOGONALIZATIONS, check_basis_memory
from curvax.memory import lanczos_memory
from curvax.operators import FlatSpec, LinearOperator, MatrixOperator, as_operator, matrix_operator, ravel_leaves
from curvax.sharpness import BatchSharpness, batch_sharpness
from curvax.spectrum import (
    ExtremeEigenvalues,
    bottom_eigenvalues,
    ritz_mass,
    ritz_vector,
    top_eigenvalues,
    warm_start,
)
from curvax.trace import TRACE_METHODS, DiagonalEstimate, TraceEstimate, diagonal, trace

__all__ = [
    "BatchSharpness",
    "batch_sharpness",
    "DiagonalEstimate",
    "ExtremeEigenvalues",
    "LanczosResult",
    "SpectralDensity",
    "TraceEstimate",
    "bottom_eigenvalues",
    "diagonal",
    "lanczos",
    "lanczos_memory",
    "ritz_mass",
    "ritz_vector",
    "spectral_density",
    "top_eigenvalues",
    "trace",
    "warm_start",
    "BlockOperator",
    "FlatSpec",
    "GaussNewtonOperator",
    "HessianOperator",
    "IdentityOperator",
    "JvpHessianOperator",
    "LinearCombination",
    "LinearOperator",
    "MatrixOperator",
    "as_operator",
    "block",
    "block_indices",
    "dense_hessian",
    "dense_matrix",
    "empirical_fisher",
    "enable_compilation_cache",
    "ggn",
    "hessian",
    "identity_like",
    "leaf_paths",
    "matrix_operator",
    "to_scipy",
    "PreconditionedOperator",
    "diagonal_preconditioned",
    "ravel_leaves",
    "as_pytree_fn",
    "normalized_weights",
    "as_batches",
    "REORTHOGONALIZATIONS",
    "BASIS_MEMORIES",
    "TRACE_METHODS",
    "check_basis_memory",
]
