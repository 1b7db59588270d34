"""Extreme eigenvalues on a matvec and an example pytree: the project's positional convention over `curvax.spectrum`.

Contract: `top_eigenvalues(matvec, example, k, num_steps=, key=, ...)` is
`curvax.top_eigenvalues(as_operator(matvec, example), k, num_steps=, key=, ...)` (likewise `bottom_eigenvalues`); the
algorithm, its certified bounds and its programs live in `curvax.spectrum` (see its docstring).
"""

from typing import Any, Callable

from curvax.operators import as_operator
from curvax.spectrum import ExtremeEigenvalues  # noqa: F401  (the project's name)
from curvax.spectrum import bottom_eigenvalues as _curvax_bottom_eigenvalues
from curvax.spectrum import top_eigenvalues as _curvax_top_eigenvalues


def top_eigenvalues(matvec: Callable[[Any], Any], example: Any, k: int, **options) -> ExtremeEigenvalues:
  """The k largest eigenvalues of `matvec` on pytrees shaped like `example` (`curvax.spectrum.top_eigenvalues`)."""
  return _curvax_top_eigenvalues(as_operator(matvec, example), k, **options)


def bottom_eigenvalues(matvec: Callable[[Any], Any], example: Any, k: int, **options) -> ExtremeEigenvalues:
  """The k smallest eigenvalues of `matvec` on pytrees shaped like `example` (`curvax.spectrum.bottom_eigenvalues`)."""
  return _curvax_bottom_eigenvalues(as_operator(matvec, example), k, **options)
