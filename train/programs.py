"""A run's optimizer and jitted steps, built once per process for what determines them, so a second run of the same
program in one process (a run resumed in the process that trained it, a sweep's seeds) traces and compiles nothing:
`jax.jit` caches its programs per function object, and every run would otherwise wrap a fresh closure.

Each cache key is exactly the arguments the object is built from, so equal keys build the same program:
- `optimizer`: the typed `config.optim`, the `ModelConfig` (which fixes the params' tree, roles and learning-rate
  multipliers) and the horizon `train.num_steps`;
- `train_step`: the model (a Flax module, equal by its config), the optimizer object itself (optax's
  `GradientTransformation` compares its functions by identity, so a swapped optimizer never matches), the loss
  settings, QK-clip's τ, the mesh and the state's shardings;
- `eval_step`: the model and the MLM mask rate.
Data, parameters and seeds are arguments of the programs, not part of them. The last `MAX_PROGRAMS` keys are kept.
"""

import collections
from collections.abc import Callable, Hashable
from typing import Any

import jax
import optax

import models
from train import optim
from train import step as step_lib

MAX_PROGRAMS = 8
_BUILT: collections.OrderedDict = collections.OrderedDict()


def built_once(key: Hashable, build: Callable[[], Any]) -> Any:
  """`build()` the first time `key` is asked for in this process (of the last `MAX_PROGRAMS` keys), else the object
  built then."""
  if key in _BUILT:
    _BUILT.move_to_end(key)
    return _BUILT[key]
  _BUILT[key] = built = build()
  while len(_BUILT) > MAX_PROGRAMS:
    _BUILT.popitem(last=False)
  return built


def optimizer(optim_config: Any, model_config: Any, params: Any, total_steps: int) -> tuple[Any, optax.Schedule]:
  """`train.optim.make_optimizer` for a model's params: its learning-rate multipliers and roles (fixed by the model
  config); `(tx, schedule)`."""

  def build():
    return optim.make_optimizer(
        optim_config,
        lr_multipliers=models.lr_multipliers(params, model_config),
        total_steps=total_steps,
        param_roles=models.param_roles(model_config, params),
    )

  return built_once(("optimizer", optim_config, model_config, total_steps), build)


def train_step(exp: Any) -> Callable:
  """The jitted train step of a `train.experiment.Experiment` (`train.step.make_train_step`, `jit_train_step`) with the
  state's shardings kept in and out."""
  cfg, qk_clip = exp.config.train, exp.config.optim.qk_clip
  shardings = jax.tree.map(lambda x: x.sharding, exp.state)
  losses = (cfg.label_smoothing, cfg.mlm_mask_rate, cfg.z_loss, qk_clip)

  def build():
    fn = step_lib.make_train_step(
        exp.model,
        exp.tx,
        label_smoothing=cfg.label_smoothing,
        mlm_mask_rate=cfg.mlm_mask_rate,
        z_loss=cfg.z_loss,
        qk_clip=qk_clip,
    )
    return step_lib.jit_train_step(fn, exp.mesh, shardings)

  placement = (exp.mesh, jax.tree.structure(shardings), tuple(jax.tree.leaves(shardings)))
  return built_once(("train_step", exp.model, exp.tx, losses, placement), build)


def eval_step(exp: Any) -> Callable:
  """The jitted eval step of a `train.experiment.Experiment` (`train.step.make_eval_step`)."""
  rate = exp.config.train.mlm_mask_rate
  return built_once(
      ("eval_step", exp.model, rate), lambda: jax.jit(step_lib.make_eval_step(exp.model, mlm_mask_rate=rate))
  )
