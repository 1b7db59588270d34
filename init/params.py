"""`init_params(config.init, model, key, batch)`: the model's variables under a registered scheme.

Contract: shapes come from `jax.eval_shape(model.init, ...)` (nothing is sampled twice); every parameter is
drawn from its scheme rule (`init.schemes`, by `models.param_roles`), with its own key
`fold_in(key, h(path))`, h = the first 31 bits of SHA-256 of the parameter's path — a stable hash, so the
same key gives the same parameters on every machine and Python process, and adding a parameter does not
reshuffle the others. Non-parameter collections get the model's own initial values. Then the scheme's
post-init procedure runs (`init.procedures`). Everything the config and model can get wrong is checked
before any compute: init keys and values, scheme/model compatibility, and the batch a procedure needs.

The batch is the one training is fed (the data pipeline's). An encoder (arch="encoder") trains on BERT's masked LM
of the text in `targets` (`train.step.mlm_masked` builds its `inputs` from them; an LM batch has only `targets`, a
translation batch's source `inputs` are not the encoder's), so its shape and profiling passes read that text, with
the targets' packing keys, uncorrupted: the masking is a fresh draw of every train step, not part of the data.
"""

import hashlib
from typing import Any, Optional

import jax
import jax.numpy as jnp

from configs.schema import as_section
from init import procedures
from init.schemes import AUTO, InitConfig, derived_scheme, get_scheme
from models import ALPHA_COLLECTION, ModelConfig, param_roles


def _path_seed(path: str) -> int:
  return int.from_bytes(hashlib.sha256(path.encode()).digest()[:4], "little") & 0x7FFFFFFF


def _key_path(path) -> str:
  return "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def _collection_value(collection: str, path: str, leaf, mc: ModelConfig) -> jax.Array:
  """Initial value of a non-parameter variable: the model's own rule (models.residual)."""
  if collection == ALPHA_COLLECTION:
    return jnp.full(leaf.shape, mc.alpha_init, leaf.dtype)  # scheduled α starts at model.alpha_init
  raise ValueError(f"init_params has no rule for variable {collection}/{path}; add one to init/params.py")


def check_init_config(cfg: InitConfig, mc: ModelConfig) -> tuple[str, dict[str, Any]]:
  """Checks the typed `config.init` against the model config before any compute; returns the scheme name
  (`scheme='auto'` follows the model: `derived_scheme`) and the hyper-parameters it reads."""
  name, hparams = _scheme(cfg, mc)
  scheme = get_scheme(name)
  scheme.check_model(mc)
  if scheme.procedure is not None:
    procedures.get_procedure(scheme.procedure)
  return name, hparams


def _scheme(cfg: InitConfig, mc: ModelConfig) -> tuple[str, dict[str, Any]]:
  """(scheme name, its hyper-parameters) of the typed `config.init`."""
  name = derived_scheme(mc) if cfg.scheme == AUTO else cfg.scheme
  return name, cfg.hparams(get_scheme(name))


def _check_batch(mc: ModelConfig, batch: Optional[dict], needed: bool, scheme: str) -> None:
  if batch is None:
    if needed:
      raise ValueError(f"init.scheme={scheme!r} runs a profiling pass and needs a batch, got batch=None")
    return
  keys = {"encoder_decoder": ("inputs", "targets"), "decoder": ("targets",), "encoder": ("targets",)}[mc.arch]
  for k in keys:
    if k not in batch:
      raise ValueError(f"batch for model.arch={mc.arch!r} needs key {k!r}, got keys {sorted(batch)}")
    if not jnp.issubdtype(jnp.asarray(batch[k]).dtype, jnp.integer) or jnp.ndim(batch[k]) != 2:
      raise ValueError(
          f"batch[{k!r}] must be an integer [B, L] array of token ids, got "
          f"{jnp.asarray(batch[k]).dtype}{list(jnp.shape(batch[k]))}"
      )


def _model_batch(mc: ModelConfig, batch: dict) -> dict:
  """What the model's forward pass reads from a training batch: for an encoder the text in `targets` as its
  `inputs` (module docstring), otherwise the batch itself."""
  if mc.arch != "encoder":
    return batch
  out = {"inputs": batch["targets"]}
  for suffix in ("_segmentation", "_position"):
    if f"targets{suffix}" in batch:
      out[f"inputs{suffix}"] = batch[f"targets{suffix}"]
  return out


def init_params(config: Any, model: Any, key: jax.Array, batch: Optional[dict] = None) -> dict:
  """Initializes every variable of `model` under the scheme `config.scheme`.

  Args:
    config: the `config.init` subtree (`init.schemes.InitConfig`, or its ConfigDict or a mapping): `scheme` ('auto'
      follows the model config) plus the hyper-parameters schemes read.
    model: a model from `models.get_model`; its `config` is the frozen ModelConfig.
    key: a JAX PRNG key (typed or raw).
    batch: a training batch as the data pipeline gives it: {"inputs", "targets"} (encoder-decoder), {"targets"}
      (decoder; encoder, which reads the text in `targets`, see the module docstring; extra keys are ignored).
      Needed by schemes with a profiling procedure (admin); otherwise optional (a one-token batch is used for
      shapes, which do not depend on the length).

  Returns:
    The full variables dict: {"params": ...} plus non-parameter collections (e.g. `residual_alpha`).

  Raises:
    ValueError: unknown scheme (lists the valid ones), unknown/invalid init keys, a model the scheme makes no
      sense with, or a missing/malformed batch — all before any compute.
  """
  mc = model.config
  if not isinstance(mc, ModelConfig):
    raise TypeError(f"init_params needs a model built by models.get_model, got {type(model).__name__}")
  # The door (`configs.schema.as_section`): a typed `InitConfig` (train.config.resolve checked it against the model)
  # as it is; a ConfigDict or mapping typed and checked here.
  name, hparams = _scheme(as_section(InitConfig, config, lambda cfg: check_init_config(cfg, mc)), mc)
  scheme = get_scheme(name)
  _check_batch(mc, batch, needed=scheme.procedure is not None, scheme=name)

  if batch is not None:
    batch = _model_batch(mc, batch)
  shape_batch = batch if batch is not None else {k: jnp.ones((1, 1), jnp.int32) for k in ("inputs", "targets")}
  shapes = jax.eval_shape(model.init, key, shape_batch)
  roles = param_roles(model, shapes["params"])

  def sample(leaf, role):
    init = scheme.rule(role, mc, hparams).make()
    leaf_key = jax.random.fold_in(key, _path_seed(role.path))
    if role.role in ("embedding", "position"):
      # Stored [V, D] but its fans are those of the readout view x·Eᵀ (fan_in = D, models.roles): sample the
      # [D, V] matrix with those fans and transpose, so fan-dependent rules mean the same for every role.
      return init(leaf_key, leaf.shape[::-1], leaf.dtype, fan_in=role.fan_in, fan_out=role.fan_out).T
    if len(leaf.shape) <= 1:  # scalars and vectors: fan_in = 1 (init.initializers convention)
      return init(leaf_key, leaf.shape, leaf.dtype, fan_in=1, fan_out=max(leaf.size, 1))
    return init(leaf_key, leaf.shape, leaf.dtype, fan_in=role.fan_in, fan_out=role.fan_out)

  variables = {"params": jax.tree.map(sample, shapes["params"], roles)}
  for collection, tree in shapes.items():
    if collection != "params":
      variables[collection] = jax.tree_util.tree_map_with_path(
          lambda p, leaf, c=collection: _collection_value(c, _key_path(p), leaf, mc), tree
      )
  if scheme.procedure is not None:
    variables = procedures.get_procedure(scheme.procedure)(variables, model, batch)
  return variables
