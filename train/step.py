"""The jitted train and eval steps, data parallel over a device Mesh with NamedSharding.

`make_train_step(model, tx, ...)` returns `train_step(state, batch) -> (state, metrics)`, to be jitted with the
state replicated, the batch sharded on the mesh's `data` axis and the state donated (`jit_train_step`). The same
code runs on CPU, GPU and TPU; nothing here is CPU specific.

Inside the step (cheap, so done every step and fetched by the host only when it logs):
- the per-parameter gradient norms (Xiong et al. 2020, Fig. 3 profiles during training) and the global norm;
- a finiteness check of the loss and every gradient leaf. A non-finite step leaves the state unchanged (so the
  state never holds NaN) and reports which leaves were non-finite; the loop then stops the run as diverged.
"""

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from models import ALPHA_COLLECTION, scheduled_alpha_update
from train.loss import mlm_batch, token_cross_entropy
from train.state import TrainState

DATA_AXIS = "data"


def make_mesh(devices: Optional[list] = None) -> Mesh:
  """A 1-D mesh over all devices (of all processes) with axis `data`."""
  devices = jax.devices() if devices is None else devices
  return Mesh(np.asarray(devices), (DATA_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def global_batch(local_batch: dict, mesh: Mesh) -> dict:
  """This process's numpy batch -> a global jax.Array batch sharded on the data axis."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in local_batch.items()}


def leaf_names(tree: Any) -> list[str]:
  """'/'-joined paths of the leaves of `tree`, in `jax.tree.leaves` order."""
  paths = jax.tree_util.tree_flatten_with_path(tree)[0]
  return ["/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path) for path, _ in paths]


MLM_MASK_ID = 2  # [MASK] for the encoder's MLM is the unknown id 2 (our vocabularies reserve no mask token)


def mlm_masked(model_config, batch: dict, key: jax.Array, mask_rate: float = 0.15) -> dict:
  """The batch an encoder (arch="encoder") trains on: BERT's masked-LM corruption of the text in batch["targets"].

  The text is `targets` whatever else the batch carries (an LM batch has only it; a translation batch's source
  `inputs` and their packing keys are not the encoder's and are dropped); with packing, the targets' segment ids and
  positions become the encoder's `inputs_segmentation` / `inputs_position`.

  Returns:
    {"inputs": corrupted text, "targets": original tokens at the selected positions, 0 elsewhere} (`mlm_batch`),
    plus `inputs_segmentation` / `inputs_position` when the batch is packed.
  """
  out = mlm_batch(batch["targets"], key, vocab_size=model_config.vocab_size, mask_id=MLM_MASK_ID, mask_rate=mask_rate)
  for suffix in ("_segmentation", "_position"):
    if f"targets{suffix}" in batch:
      out[f"inputs{suffix}"] = batch[f"targets{suffix}"]
  return out


def make_train_step(
    model: Any, tx: optax.GradientTransformation, *, label_smoothing: float = 0.0, mlm_mask_rate: float = 0.15
) -> Callable:
  """The (unjitted) train step for `model` and optimizer `tx`."""
  c = model.config

  def train_step(state: TrainState, batch: dict):
    step_key = jax.random.fold_in(state.rng, state.step)
    dropout_key, mask_key = jax.random.split(step_key)
    if c.arch == "encoder":
      batch = mlm_masked(c, batch, mask_key, mlm_mask_rate)

    def loss_fn(params):
      logits = model.apply(
          {"params": params, **state.variables}, batch, deterministic=False, rngs={"dropout": dropout_key}
      )
      total, count = token_cross_entropy(logits, batch["targets"], label_smoothing)
      correct = jnp.sum((jnp.argmax(logits, -1) == batch["targets"]) * (batch["targets"] > 0))
      return total / jnp.maximum(count, 1.0), (count, correct)

    (loss, (count, correct)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    grad_norms = jax.tree.map(lambda g: jnp.sqrt(jnp.sum(jnp.square(g.astype(jnp.float32)))), grads)
    leaf_finite = jax.tree.map(lambda g: jnp.all(jnp.isfinite(g)), grads)
    finite = jnp.isfinite(loss) & jnp.all(jnp.stack(jax.tree.leaves(leaf_finite)))

    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    variables = dict(state.variables)
    if ALPHA_COLLECTION in variables:
      variables[ALPHA_COLLECTION] = scheduled_alpha_update(variables[ALPHA_COLLECTION], c.alpha_step, c.alpha_final)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state, variables=variables)
    # A non-finite step changes nothing: the state stays the last good one.
    new_state = jax.tree.map(
        lambda new, old: jnp.where(finite, new, old), new_state, state.replace(step=state.step + 1)
    )
    metrics = {
        "loss": loss,
        "tokens": count,
        "accuracy": correct / jnp.maximum(count, 1.0),
        "grad_norm": optax.global_norm(grads),
        "finite": finite,
        "grad_norms": grad_norms,
        "grad_finite": leaf_finite,
    }
    return new_state, metrics

  return train_step


def jit_train_step(train_step: Callable, mesh: Mesh) -> Callable:
  """jit with the state replicated and donated, the batch sharded on `data`."""
  return jax.jit(
      train_step,
      in_shardings=(replicated(mesh), batch_sharding(mesh)),
      out_shardings=(replicated(mesh), replicated(mesh)),
      donate_argnums=(0,),
  )


def make_eval_step(model: Any, *, mlm_mask_rate: float = 0.15) -> Callable:
  """`eval_step(variables, batch, key) -> sums` of loss, tokens and correct tokens (dropout off)."""
  c = model.config

  def eval_step(variables, batch, key):
    if c.arch == "encoder":
      batch = mlm_masked(c, batch, key, mlm_mask_rate)
    logits = model.apply(variables, batch, deterministic=True)
    total, count = token_cross_entropy(logits, batch["targets"])
    correct = jnp.sum((jnp.argmax(logits, -1) == batch["targets"]) * (batch["targets"] > 0))
    return {"loss_sum": total, "tokens": count, "correct": correct}

  return eval_step
