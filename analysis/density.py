"""The SLQ spectral density on a matvec and an example pytree: the project's convention over `curvax.density`.

Contract: `spectral_density(matvec, example, num_steps, num_probes, key, **options)` is
`curvax.spectral_density(as_operator(matvec, example), num_steps=, num_probes=, key=, **options)`; the quadrature,
its band and its programs live in `curvax.density` (see its docstring).
"""

from typing import Any, Callable

import jax

from curvax.density import SpectralDensity, gaussian_kernel  # noqa: F401  (the project's names)
from curvax.density import spectral_density as _curvax_spectral_density
from curvax.operators import as_operator


def spectral_density(
    matvec: Callable[[Any], Any], example: Any, num_steps: int, num_probes: int, key: jax.Array, **options
) -> SpectralDensity:
  """SLQ density of `matvec` on pytrees shaped like `example` (`curvax.density.spectral_density`)."""
  return _curvax_spectral_density(
      as_operator(matvec, example), num_steps=num_steps, num_probes=num_probes, key=key, **options
  )
