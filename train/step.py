"""The jitted train and eval steps over a 2-D device Mesh (`data`, `fsdp`) with NamedSharding.

`make_train_step(model, tx, ...)` returns `train_step(state, batch) -> (state, metrics)`, to be jitted with the
state's shardings, the batch split over the `data` and `fsdp` axes jointly and the state donated
(`jit_train_step`). The same code runs on CPU, GPU and TPU; nothing here is CPU specific.

The mesh (`config.mesh`, `MeshConfig`): `mesh.fsdp` devices on the `fsdp` axis and devices / fsdp on `data`.
`mesh.fsdp=1` is pure data parallelism: every parameter and optimizer state replicated. With fsdp > 1 (FSDP / ZeRO-3
style), parameters are sharded by the logical axes they declare where they are created (`models.logical_axes`)
mapped to mesh axes by `mesh.rules` (as Flax's `logical_to_mesh_axes`: ordered (logical name, mesh axis) pairs, each
mesh axis used at most once per array), except that a rule whose mesh axes do not divide the dimension is skipped,
so the dimension stays replicated (`mesh_spec`; the tiny/mini presets' d_model 32/128 divide 4 devices). Optimizer-state leaves that mirror a parameter (same path suffix and shape: Adam's μ and
ν, momentum) get that parameter's sharding, everything else (counts, factored Adafactor statistics, the step, the
rng, non-parameter variables) is replicated (`state_shardings`). XLA's SPMD partitioner inserts the all-gathers of
the parameters and the reduce-scatters of the gradients.

Inside the step (cheap, so done every step and fetched by the host only when it logs):
- the per-parameter gradient norms (Xiong et al. 2020, Fig. 3 profiles during training) and the global norm;
- a finiteness check of the loss and every gradient leaf. A non-finite step leaves the state unchanged (so the
  state never holds NaN) and reports which leaves were non-finite; the loop then stops the run as diverged.
"""

import dataclasses
import math
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from configs.schema import Section, invalid
from models import ALPHA_COLLECTION, LOGICAL_AXES, scheduled_alpha_update
from models.attention import MAX_LOGIT_COLLECTION
from train import qk_clip as qk_clip_lib
from train.loss import mlm_batch, token_cross_entropy, token_z_loss
from train.state import TrainState

DATA_AXIS = "data"
FSDP_AXIS = "fsdp"
MESH_AXES = (DATA_AXIS, FSDP_AXIS)


@dataclasses.dataclass(frozen=True)
class MeshConfig(Section):
  """The `config.mesh` subtree, typed and checked (each key's meaning: configs/default.py).

  `rules` is normalized to a tuple of (logical name, mesh axes) pairs, the mesh axes None, a name or a tuple of names.
  Whether `fsdp` divides the device count is checked by `make_mesh` (devices are not known at the config boundary).
  """

  KEY = "mesh"
  fsdp: int
  rules: Any

  def __post_init__(self):
    if not isinstance(self.fsdp, int) or isinstance(self.fsdp, bool) or self.fsdp < 1:
      raise invalid("mesh.fsdp", self.fsdp, "an integer >= 1 (devices on the 'fsdp' axis; 1: data parallel)")
    object.__setattr__(self, "rules", _normalized_rules(self.rules))


def _normalized_rules(rules: Any) -> tuple:
  shape = "a sequence of (logical axis, mesh axis | None | tuple of mesh axes) pairs"
  if isinstance(rules, (str, bytes)) or not hasattr(rules, "__iter__"):
    raise invalid("mesh.rules", rules, shape)
  out = []
  for rule in rules:
    if isinstance(rule, (str, bytes)) or not hasattr(rule, "__len__") or len(rule) != 2:
      raise invalid("mesh.rules", rules, shape, f"{rule!r} is not a pair")
    name, axes = rule
    if name not in LOGICAL_AXES:
      raise invalid("mesh.rules", rules, f"logical axes from {list(LOGICAL_AXES)}", f"unknown logical axis {name!r}")
    if axes is not None and not isinstance(axes, str):
      axes = tuple(axes)
    for axis in (axes,) if isinstance(axes, str) else axes or ():
      if axis not in MESH_AXES:
        raise invalid("mesh.rules", rules, f"mesh axes from {list(MESH_AXES)} or None", f"unknown mesh axis {axis!r}")
    out.append((name, axes))
  return tuple(out)


def make_mesh(devices: Optional[list] = None, fsdp: int = 1) -> Mesh:
  """A (devices / fsdp) × fsdp mesh with axes (`data`, `fsdp`) over `devices` (default: every device of every
  process, in `jax.devices()` order, so each process's devices are a contiguous block of the batch)."""
  devices = jax.devices() if devices is None else devices
  if not isinstance(fsdp, int) or fsdp < 1 or len(devices) % fsdp:
    raise invalid("mesh.fsdp", fsdp, f"a divisor of the number of devices, {len(devices)}")
  return Mesh(np.asarray(devices).reshape(len(devices) // fsdp, fsdp), MESH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """The batch's leading axis split over every batch axis of the mesh (`data` and `fsdp` jointly)."""
  return NamedSharding(mesh, P(tuple(a for a in MESH_AXES if a in mesh.axis_names)))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def mesh_spec(logical: P, shape: tuple, axis_sizes: dict, rules: Any) -> P:
  """The mesh PartitionSpec of one array from its logical axes, like Flax's `logical_to_mesh_axes` (rules in
  priority order, each mesh axis used at most once per array) except that a rule is skipped for a dimension its mesh
  axes do not divide, or whose mesh axes have size 1, so that dimension stays replicated and a later rule may use
  the mesh axis.

  Args:
    logical: one logical name (or None) per dimension.
    shape: the array's shape.
    axis_sizes: mesh axis name -> size (`mesh.shape`).
    rules: (logical name, mesh axes) pairs (`MeshConfig.rules`).
  """
  if len(logical) != len(shape):
    raise ValueError(f"logical axes {logical} do not match an array of shape {shape}")
  dims: list = [None] * len(shape)
  used: set = set()
  for name, axes in rules:
    if axes is None or name not in logical:
      continue
    pos = list(logical).index(name)
    names = (axes,) if isinstance(axes, str) else tuple(axes)
    size = math.prod(axis_sizes[a] for a in names)
    if dims[pos] is None and not used & set(names) and size > 1 and shape[pos] % size == 0:
      dims[pos], used = axes, used | set(names)
  return P(*dims)


def param_shardings(logical: Any, params: Any, mesh: Mesh, rules: Any) -> Any:
  """The NamedSharding of every parameter: its logical axes (`models.logical_axes`) mapped to mesh axes by `rules`
  (`mesh_spec`: a dimension no rule's mesh axes divide is replicated, so `mesh.fsdp=1` replicates everything).

  Args:
    logical: a pytree like `params` of PartitionSpecs of logical names.
    params: the parameters (arrays or ShapeDtypeStructs).
    mesh: the device mesh.
    rules: (logical name, mesh axes) pairs (`MeshConfig.rules`).
  """
  sizes = dict(mesh.shape)
  return jax.tree.map(
      lambda spec, leaf: NamedSharding(mesh, mesh_spec(spec, tuple(leaf.shape), sizes, rules)),
      logical,
      params,
      is_leaf=lambda x: isinstance(x, P),
  )


def _names(path) -> tuple[str, ...]:
  return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def state_shardings(state: TrainState, mesh: Mesh, logical: Any, rules: Any) -> TrainState:
  """The shardings of a train state (module docstring): params by `param_shardings`, each optimizer-state leaf
  whose path ends with a parameter's path and has its shape like that parameter, everything else replicated."""
  params = param_shardings(logical, state.params, mesh, rules)
  by_path = {
      _names(path): (tuple(leaf.shape), sharding)
      for (path, leaf), sharding in zip(jax.tree_util.tree_flatten_with_path(state.params)[0], jax.tree.leaves(params))
  }

  def opt_leaf(path, leaf):
    names = _names(path)
    for start in range(len(names)):
      shape, sharding = by_path.get(names[start:], (None, None))
      if shape is not None:
        return sharding if shape == tuple(leaf.shape) else replicated(mesh)
    return replicated(mesh)

  rep = replicated(mesh)
  return TrainState(
      step=rep,
      params=params,
      opt_state=jax.tree_util.tree_map_with_path(opt_leaf, state.opt_state),
      variables=jax.tree.map(lambda _: rep, state.variables),
      rng=rep,
  )


def global_batch(local_batch: dict, mesh: Mesh) -> dict:
  """This process's numpy batch -> a global jax.Array batch sharded on the data axis."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v)) for k, v in local_batch.items()}


def leaf_names(tree: Any) -> list[str]:
  """'/'-joined paths of the leaves of `tree`, in `jax.tree.leaves` order."""
  return ["/".join(_names(path)) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


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
    model: Any,
    tx: optax.GradientTransformation,
    *,
    label_smoothing: float = 0.0,
    mlm_mask_rate: float = 0.15,
    z_loss: float = 0.0,
    qk_clip: float = 0.0,
) -> Callable:
  """The (unjitted) train step for `model` and optimizer `tx`; the loss it differentiates is the token cross-entropy
  plus `z_loss`·mean log²Z (`train.loss.token_z_loss`; nothing added at 0), which its `loss` metric reports. With
  `qk_clip` = τ > 0 the forward pass also records every attention head's largest logit (metric `max_logits`,
  {attention module: per head}) and QK-clip rescales the updated W_q, W_k of the heads above τ (`train.qk_clip`);
  at 0 nothing of it is traced."""
  c = model.config
  clip_targets = qk_clip_lib.targets(model) if qk_clip else None

  def train_step(state: TrainState, batch: dict):
    step_key = jax.random.fold_in(state.rng, state.step)
    dropout_key, mask_key = jax.random.split(step_key)
    if c.arch == "encoder":
      batch = mlm_masked(c, batch, mask_key, mlm_mask_rate)

    def loss_fn(params):
      variables, rngs = {"params": params, **state.variables}, {"dropout": dropout_key}
      max_logits = {}
      if qk_clip:
        logits, sown = model.apply(variables, batch, deterministic=False, rngs=rngs, mutable=[MAX_LOGIT_COLLECTION])
        max_logits = qk_clip_lib.max_logits_by_module(sown[MAX_LOGIT_COLLECTION])
      else:
        logits = model.apply(variables, batch, deterministic=False, rngs=rngs)
      total, count = token_cross_entropy(logits, batch["targets"], label_smoothing)
      if z_loss:
        total = total + z_loss * token_z_loss(logits, batch["targets"])
      correct = jnp.sum((jnp.argmax(logits, -1) == batch["targets"]) * (batch["targets"] > 0))
      return total / jnp.maximum(count, 1.0), (count, correct, max_logits)

    (loss, (count, correct, max_logits)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    grad_norms = jax.tree.map(lambda g: jnp.sqrt(jnp.sum(jnp.square(g.astype(jnp.float32)))), grads)
    leaf_finite = jax.tree.map(lambda g: jnp.all(jnp.isfinite(g)), grads)
    finite = jnp.isfinite(loss) & jnp.all(jnp.stack(jax.tree.leaves(leaf_finite)))

    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if qk_clip:  # after the update, from the logits of this step's forward pass (Kimi Team 2025, Alg. 1)
      params = qk_clip_lib.clip(params, max_logits, qk_clip, clip_targets)
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
    if qk_clip:
      metrics["max_logits"] = max_logits
    return new_state, metrics

  return train_step


def jit_train_step(train_step: Callable, mesh: Mesh, state_sharding: Any = None) -> Callable:
  """jit with the state in `state_sharding` (a TrainState of shardings, `state_shardings`; None: replicated) in and
  out, donated, the batch split over the mesh's batch axes, the metrics replicated."""
  state_sharding = replicated(mesh) if state_sharding is None else state_sharding
  return jax.jit(
      train_step,
      in_shardings=(state_sharding, batch_sharding(mesh)),
      out_shardings=(state_sharding, replicated(mesh)),
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
