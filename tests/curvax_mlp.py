"""A plain JAX MLP classifier (no project code) for the curvax tests: `loss_fn(params, (x, y))`, labels 0..C-1
including 0, float64; its dense Hessian and per-position Jacobian are the references."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

IN, HIDDEN, CLASSES = 3, 4, 3


def init_params(seed: int):
  rng = np.random.default_rng(seed)
  return {
      "hidden": {
          "w": jnp.asarray(rng.standard_normal((IN, HIDDEN)) / np.sqrt(IN)),
          "b": jnp.asarray(rng.normal(size=HIDDEN)),
      },
      "out": {"w": jnp.asarray(rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)), "b": jnp.zeros(CLASSES)},
  }


def make_batch(seed: int, rows: int = 6):
  """(x [rows, IN], y [rows]) with y = 0 in the first row (class 0 is a class, not padding)."""
  rng = np.random.default_rng(100 + seed)
  y = rng.integers(0, CLASSES, rows)
  y[0] = 0
  return jnp.asarray(rng.standard_normal((rows, IN))), jnp.asarray(y, jnp.int32)


def logits_fn(params, batch):
  x, _ = batch
  h = jnp.tanh(x @ params["hidden"]["w"] + params["hidden"]["b"])
  return h @ params["out"]["w"] + params["out"]["b"]


def per_example_loss_fn(params, batch):
  _, y = batch
  return -jnp.take_along_axis(jax.nn.log_softmax(logits_fn(params, batch)), y[:, None], axis=1)[:, 0]


def loss_fn(params, batch):
  return jnp.mean(per_example_loss_fn(params, batch))


def dense(matvec_tree, params):
  """The dense matrix of a pytree matvec in `ravel_pytree(params)` order, column by column."""
  flat, unravel = ravel_pytree(params)
  cols = [ravel_pytree(matvec_tree(unravel(e)))[0] for e in np.eye(flat.size)]
  return np.stack([np.asarray(c) for c in cols], axis=1)


def dense_hessian(params, batch):
  flat, unravel = ravel_pytree(params)
  return np.asarray(jax.hessian(lambda x: loss_fn(unravel(x), batch))(flat))


def dense_jacobian(fn, params, batch):
  """[..., n] Jacobian of fn(params, batch) in flat parameters."""
  flat, unravel = ravel_pytree(params)
  return np.asarray(jax.jacobian(lambda x: fn(unravel(x), batch))(flat))
