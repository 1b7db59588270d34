"""Per-layer gradient-norm profiles (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture",
Fig. 3 and Theorem 1: at init the gradient of the last FFN weight is O(d·√(ln d)) for Post-LN and O(d·√(ln d / L))
for Pre-LN, so Post-LN's per-layer gradient norm grows toward the output while Pre-LN's stays flat).

Contract: `per_layer_grad_norms(loss_fn, params, batch)` returns one JSON-able record per parameter tensor,
{stack, layer, sublayer, role, path, size, norm} with norm = ‖∂L/∂W‖_F, in `jax.tree.leaves` order;
`aggregate_grad_norms` combines records of several (params, batch) pairs (seeds × batches) into mean, std
(population, ddof=0), min, max and count per parameter path.
"""

from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import curvax
from models import ROLES, ParamRole, param_roles
from models.roles import NORM_ROLES

WEIGHT_ROLES = tuple(r for r in ROLES if r not in (*NORM_ROLES, "residual_scale", "bias"))  # the matrices
KEY_FIELDS = ("stack", "layer", "sublayer", "role", "path", "size")


@jax.jit
def _grad_program(loss_fn, params, batch):
  return jax.grad(loss_fn)(params, batch)


def _grad(loss_fn, params, batch):
  """∂loss/∂params; the loss enters as a pytree argument (`curvax.as_pytree_fn`), so repeated profiles of one model
  share a compilation."""
  return _grad_program(curvax.as_pytree_fn(loss_fn), params, batch)


def _check_roles(roles):
  bad = sorted(set(roles) - set(ROLES))
  if bad:
    raise ValueError(f"roles={list(roles)} contains {bad}, not parameter roles; valid roles: {list(ROLES)}")


@jax.jit
def _leaf_norms(leaves: list) -> list:
  """The Frobenius norm of every leaf in one program (replicated scalars): also for leaves split over the devices of
  several processes, where one eager op per leaf would be one cross-process program each."""
  return [jnp.sqrt(jnp.sum(jnp.square(g))) for g in leaves]


def grad_norm_records(grads: Any, model: Any, roles: Optional[Sequence[str]] = None) -> list:
  """Records {stack, layer, sublayer, role, path, size, norm} of the Frobenius norm of each gradient leaf.

  Args:
    grads: gradient pytree shaped like the model's params.
    model: the Transformer (or its ModelConfig) declaring the parameters' roles (`models.param_roles`).
    roles: keep only these roles (e.g. `WEIGHT_ROLES`); None keeps every tensor (biases, norms, residual scales).
  """
  if roles is not None:
    _check_roles(roles)
  role_leaves = jax.tree.leaves(param_roles(model, grads), is_leaf=lambda r: isinstance(r, ParamRole))
  norms = jax.device_get(_leaf_norms(jax.tree.leaves(grads)))
  return [
      dict(
          stack=r.stack,
          layer=r.layer,
          sublayer=r.sublayer,
          role=r.role,
          path=r.path,
          size=int(np.prod(g.shape)),
          norm=float(n),
      )
      for r, g, n in zip(role_leaves, jax.tree.leaves(grads), norms)
      if roles is None or r.role in roles
  ]


def per_layer_grad_norms(
    loss_fn: Callable[[Any, dict], jax.Array],
    params: Any,
    batch: dict,
    *,
    model: Any,
    roles: Optional[Sequence[str]] = None,
) -> list:
  """Frobenius norm of ∂loss/∂W for every parameter tensor W (Xiong et al. 2020, Fig. 3).

  Args:
    loss_fn: `loss_fn(params, batch) -> scalar`.
    params: the model's params.
    batch: one batch.
    model: the Transformer (or its ModelConfig) declaring the parameters' roles.
    roles: keep only these roles (`WEIGHT_ROLES` for the weight matrices); None keeps all tensors.

  Returns:
    A list of JSON-able records (see `grad_norm_records`).
  """
  return grad_norm_records(_grad(loss_fn, params, batch), model, roles)


def aggregate_grad_norms(record_lists: Sequence[list]) -> list:
  """Mean, std (ddof=0), min, max and count of `norm` per parameter over several record lists.

  Args:
    record_lists: one list of records per (params, batch) pair, e.g. seeds × batches.

  Returns:
    One record per parameter path (first-seen order) with the key fields and norm_mean, norm_std, norm_min,
    norm_max, count.
  """
  if not record_lists:
    raise ValueError("record_lists is empty: pass at least one list of grad-norm records")
  values, keys = {}, {}
  for records in record_lists:
    for r in records:
      keys.setdefault(r["path"], {k: r[k] for k in KEY_FIELDS})
      values.setdefault(r["path"], []).append(r["norm"])
  out = []
  for path, key in keys.items():
    v = np.asarray(values[path], np.float64)
    out.append(
        dict(
            key,
            norm_mean=float(v.mean()),
            norm_std=float(v.std()),
            norm_min=float(v.min()),
            norm_max=float(v.max()),
            count=int(v.size),
        )
    )
  return out


def grad_norm_profile(
    loss_fn: Callable[[Any, dict], jax.Array],
    params_list: Sequence[Any],
    batches: Sequence[dict],
    *,
    model: Any,
    roles: Optional[Sequence[str]] = None,
) -> dict:
  """Gradient norms over every (params, batch) pair, raw and aggregated.

  Args:
    loss_fn: `loss_fn(params, batch) -> scalar`.
    params_list: parameter pytrees (e.g. one per init seed), all with the same structure.
    batches: batches (same shapes share one compilation).
    model: the Transformer (or its ModelConfig) declaring the parameters' roles.
    roles: as in `per_layer_grad_norms`.

  Returns:
    {"per_pair": [{"params_index", "batch_index", "records"}], "aggregate": aggregated records}.
  """
  pairs = [
      dict(params_index=i, batch_index=j, records=grad_norm_records(_grad(loss_fn, p, b), model, roles))
      for i, p in enumerate(params_list)
      for j, b in enumerate(batches)
  ]
  return dict(per_pair=pairs, aggregate=aggregate_grad_norms([p["records"] for p in pairs]))
