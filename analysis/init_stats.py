"""Statistics of the init itself: every parameter's realized moments, and the second moment an activation keeps
through a deep LeCun MLP (the mean-field setting of Klambauer et al. 2017 §3, Su 2021a §3; docs/science.md §1–2).

Contract:
  param_statistics(params, model) -> [record]   one record per parameter leaf, in tree order: `path`, its `ParamRole`
                                         fields (role, stack, layer, sublayer, fan_in, fan_out), `shape`, `n`, and the
                                         realized `mean`, `std` (population), `max_abs`, `kurtosis`
                                         (E[(x−μ)⁴]/σ⁴; 3 for a normal, 1.8 for a uniform, 2.36 for a normal
                                         truncated at ±2σ) and `std_error` of the std (√((κ−1)/(4n))·σ, the
                                         large-n standard error of a sample std). Reductions run on the device in the
                                         parameters' dtype (float64 under the analysis's x64), so sharded parameters
                                         never gather on one host.
  mlp_second_moments(activation, width=, depth=, rows=, draws=, seed=) -> dict
                                         x_0 ~ N(0, I) of `rows` × `width`; x_l = f(x_{l−1} W_l), W_l ~ N(0, 1/width)
                                         (LeCun), per layer E[x_l²] for each of `draws` weight draws (vmapped, one
                                         compilation), the mean-field prediction q_l = E[f(√q_{l−1} z)²] (Gauss–
                                         Hermite, `models.activations.second_moment`) and the slope d ln q'/d ln q at
                                         q = 1 (< 1: an attracting fixed point; = 1: neutral, so one network's
                                         ln E[x_l²] random-walks with per-layer variance
                                         ~Var[f(z)²]/E[f(z)²]²/width); for SELU also (λ, α) solved from its
                                         moment equations (`init.math.selu_constants`, Klambauer et al. 2017 §3)
                                         as `selu_solved`.
Written here because they are a few lines over the project's own initializers and activations (tests: numpy and the
closed forms).
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from init.math import selu_constants
from models import ParamRole, param_roles
from models.activations import get_activation


def param_statistics(params: Any, model: Any) -> list[dict]:
  """Realized moments of every parameter leaf (module docstring); `model` (the Transformer or its ModelConfig)
  declares their roles."""
  roles = jax.tree.leaves(param_roles(model, params), is_leaf=lambda r: isinstance(r, ParamRole))

  @jax.jit
  def moments(x):
    x = x.reshape(-1)
    mu = jnp.mean(x)
    c = x - mu
    var = jnp.mean(c * c)
    return mu, var, jnp.mean(c**4), jnp.max(jnp.abs(x))

  out = []
  for role, x in zip(roles, jax.tree.leaves(params)):
    mu, var, m4, max_abs = (float(v) for v in moments(x))
    n = int(np.size(x))
    std = math.sqrt(var)
    kurtosis = m4 / var**2 if var > 0 else None
    record = role.to_dict()
    record.update(
        shape=list(np.shape(x)),
        n=n,
        mean=mu,
        std=std,
        max_abs=max_abs,
        kurtosis=kurtosis,
        std_error=(std * math.sqrt(max(kurtosis - 1.0, 0.0) / (4 * n)) if kurtosis is not None else 0.0),
    )
    out.append(record)
  return out


# Gauss–Legendre on [−Z, 0] and [0, Z]: every activation here is analytic on each half-line, so the rule converges
# geometrically on each, where Gauss–Hermite across SELU's kink at 0 converges only algebraically (~2e-5 at 200 nodes,
# models/activations.py second_moment). The tails past |z| = Z = 12 hold under 1e-32 of the Gaussian's mass.
_Z, _NODES = 12.0, 200


def _half_line_nodes() -> tuple[np.ndarray, np.ndarray]:
  """Nodes and weights of E[h(z)], z ~ N(0, 1), as Σ w·h(node): Gauss–Legendre on each half-line, the density folded
  into the weights."""
  x, w = np.polynomial.legendre.leggauss(_NODES)
  half = 0.5 * _Z * (x + 1.0)  # [0, Z]
  wh = 0.5 * _Z * w * np.exp(-0.5 * half**2) / math.sqrt(2.0 * math.pi)
  return np.concatenate([-half[::-1], half]), np.concatenate([wh[::-1], wh])


def _mean_field_map(activation: str):
  """q -> E[f(√q z)²] (Gauss–Legendre on each half-line, `_half_line_nodes`), with f evaluated in float64."""
  f = get_activation(activation)
  nodes, weights = _half_line_nodes()

  def g(q: float) -> float:
    with jax.enable_x64(True):
      values = np.asarray(f(jnp.asarray(math.sqrt(q) * nodes, jnp.float64)), np.float64)
    return float(np.sum(weights * values**2))

  return g


def mean_field(activation: str, depth: int) -> list[float]:
  """q_l = E[f(√q_{l−1} z)²], q_0 = 1, for l = 1..depth."""
  g, q, out = _mean_field_map(activation), 1.0, []
  for _ in range(depth):
    q = g(q)
    out.append(q)
  return out


def fixed_point_slope(activation: str, eps: float = 1e-3) -> float:
  """d ln q_{l+1} / d ln q_l at q = 1 of the mean-field map (central difference in ln q)."""
  g = _mean_field_map(activation)
  return (math.log(g(1 + eps)) - math.log(g(1 - eps))) / (math.log(1 + eps) - math.log(1 - eps))


def mlp_second_moments(activation: str, *, width: int, depth: int, rows: int, draws: int, seed: int = 0) -> dict:
  """E[x_l²] through a `depth`-layer LeCun MLP for `draws` weight draws, with the mean-field prediction."""
  f = get_activation(activation)

  def one(key):
    x = jax.random.normal(jax.random.fold_in(key, 0), (rows, width))

    def layer(x, l):
      w = jax.random.normal(jax.random.fold_in(key, l), (width, width), x.dtype) / math.sqrt(width)
      y = f(x @ w)
      return y, jnp.mean(y * y)

    return jax.lax.scan(layer, x, jnp.arange(1, depth + 1))[1]

  keys = jax.random.split(jax.random.key(seed), draws)
  per_draw = np.asarray(jax.jit(jax.vmap(one))(keys), np.float64)
  return dict(
      activation=activation,
      width=width,
      depth=depth,
      rows=rows,
      draws=draws,
      seed=seed,
      init="LeCun normal, W ~ N(0, 1/width)",
      second_moment_per_draw=per_draw.tolist(),
      second_moment=per_draw.mean(0).tolist(),
      mean_field=mean_field(activation, depth),
      fixed_point_slope=fixed_point_slope(activation),
      **({"selu_solved": dict(zip(("lambda", "alpha"), selu_constants()))} if activation == "selu" else {}),
  )
