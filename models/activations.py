"""Activation functions, including second-moment-normalized ones.

Registry `get_activation(name)`: `relu`, `gelu`, `selu`, `normalized_relu`, `normalized_gelu`, `identity`.

The "tweaked activation" of Su 2021a §3 (docs/science.md §2) is `f(x) / sqrt(E[f(z)^2])`, `z ~ N(0, 1)`: with unit
second-moment pre-activations the output keeps second moment 1. The constant is computed by Gauss–Hermite
quadrature (`second_moment`), never typed in. SELU uses the constants of Klambauer et al. 2017 ("Self-Normalizing
Neural Networks"), which `init.math.selu_constants` re-derives from the moment equations and a test compares.
"""

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

Activation = Callable[[jax.Array], jax.Array]

# SELU (Klambauer et al. 2017, eq. 2 and the solution of E[s(z)] = 0, E[s(z)^2] = 1).
SELU_LAMBDA = 1.0507009873554805
SELU_ALPHA = 1.6732632423543772


def second_moment(f: Callable, num_points: int = 200) -> float:
  """E[f(z)^2] for z ~ N(0, 1) by Gauss–Hermite quadrature (probabilists' weights).

  Exact for polynomials of degree < 2·num_points. A kink at 0 converges slowly: relu is exact only because the
  nodes are symmetric about 0; for SELU the error at 200 nodes is about 2e-5 (tests use 1e-4 there).

  Args:
    f: a scalar function, applied elementwise to a float64 numpy array.
    num_points: number of quadrature nodes.

  Returns:
    The second moment as a Python float.
  """
  nodes, weights = np.polynomial.hermite_e.hermegauss(num_points)
  values = np.asarray(f(nodes), dtype=np.float64)
  return float(np.sum(weights * values**2) / np.sqrt(2.0 * np.pi))


def _np_relu(x):
  return np.maximum(x, 0.0)


def _np_gelu(x):
  # Exact (erf) GELU, matching jax.nn.gelu(approximate=False).
  from scipy.special import erf

  return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def _normalized(jax_fn: Activation, np_fn: Callable) -> Activation:
  """Returns f / sqrt(E[f(z)^2]) (Su 2021a §3, docs/science.md §2)."""
  scale = 1.0 / np.sqrt(second_moment(np_fn))
  return lambda x: jax_fn(x) * jnp.asarray(scale, x.dtype)


def _selu(x):
  return SELU_LAMBDA * jnp.where(x > 0, x, SELU_ALPHA * jnp.expm1(jnp.minimum(x, 0.0)))


_REGISTRY: dict[str, Callable[[], Activation]] = {
    "identity": lambda: (lambda x: x),
    "relu": lambda: jax.nn.relu,
    "gelu": lambda: functools.partial(jax.nn.gelu, approximate=False),
    "selu": lambda: _selu,
    "normalized_relu": lambda: _normalized(jax.nn.relu, _np_relu),
    "normalized_gelu": lambda: _normalized(functools.partial(jax.nn.gelu, approximate=False), _np_gelu),
}
ACTIVATIONS = tuple(_REGISTRY)


def get_activation(name: str) -> Activation:
  """Returns the activation called `name`; raises ValueError listing the valid names."""
  if name not in _REGISTRY:
    raise ValueError(f"model.activation={name!r} is not one of {list(_REGISTRY)}")
  return _REGISTRY[name]()
