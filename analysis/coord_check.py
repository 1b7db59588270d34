"""The coordinate check of Yang & Hu (2021, "Tensor Programs IV") and Yang et al. (2022, "Tensor Programs V", App. D.1):
the size of every activation after a few optimizer steps, as a function of width.

Contract: `coord_check(config, widths, batch, num_steps=...)` trains one model per width (`model.d_model = w`,
`model.d_ff = ff_ratio·w`, the heads fixed as in Tensor Programs V or the head dimension fixed) with the project's
own pieces (`train.config.resolve`, `init.init_params`, `train.optim.make_optimizer` with the parameterization's lr
multipliers, `train.step.make_train_step`), all on the same batch, and returns for each width and each step
t = 0..num_steps the RMS (√mean x²) of every activation the model records (`activation_sizes`):

  <stack>/embedding                       x_0, the stack's input stream (token + position embeddings)
  <stack>/layer_<l>/<sublayer>/branch     the sublayer's branch output F(x) (attention or MLP)
  <stack>/layer_<l>/<sublayer>/out        the residual stream after the sublayer
  <stack>/layer_<l>/<sublayer>/attn_logits  the std of the attention logits (mean over heads; the model records it)
  logits                                  the output logits

and `delta` sizes, the RMS of x_t − x_0 (each activation's change since init; attention-logit stds have none): the
change is the part µP controls (under SP with Adam it grows ∝ width: an Adam update of a width-n matrix moves its
output by O(η·n)) and does not hide under an O(1) init value.

The depth coordinate check (`depth_coord_check(config, depths, batch, ...)`; Bordelon et al. 2024; Dey et al. 2025,
"CompleteP", Fig. 3) fixes the width and varies the number of layers L: `depth_sizes` reads, per depth, the residual
stream after the last layer (`stream`), its change after the steps (`delta/stream`) and the logits' (`delta/logits`).
Under CompleteP's x + (L/L_base)^{−1}·F each is the same at every depth; with the plain residual the stream's size
grows like √L at init and its one-step change like L (each of the L branches moves by O(η) under Adam).
"""

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

import init as init_lib
import models
from train import config as config_lib
from train import optim
from train import step as step_lib
from train.state import TrainState


@functools.partial(jax.jit, static_argnums=0)
def _apply(model, variables, batch):
  """(logits, {"intermediates": ...}); the model is static (Linen modules hash by value): one compile per width."""
  return model.apply(variables, batch, deterministic=True, mutable=["intermediates"])


def _rms(x) -> float:
  return float(np.sqrt(np.mean(np.square(np.asarray(x, np.float64)))))


def _first(x):
  return x[0] if isinstance(x, tuple) else x


def activations(model: Any, variables: dict, batch: dict) -> dict[str, np.ndarray]:
  """Every activation `activation_sizes` measures, by name, as numpy (attention: the per-head logit stds)."""
  logits, state = _apply(model, variables, batch)
  out = {"logits": np.asarray(logits)}
  inter = state["intermediates"]
  for stack in ("encoder", "decoder"):
    if stack not in inter:
      continue
    tree = inter[stack]
    out[f"{stack}/embedding"] = np.asarray(_first(tree["stream_0"]))
    layers = sorted(int(k.split("_")[1]) for k in tree if k.startswith("layer_"))
    for layer in layers:
      lt = tree[f"layer_{layer}"]
      for sub in ("self_attn", "cross_attn", "mlp"):
        if f"{sub}_branch" not in lt:
          continue
        name = f"{stack}/layer_{layer}/{sub}"
        out[f"{name}/branch"] = np.asarray(_first(lt[f"{sub}_branch"]))
        out[f"{name}/out"] = np.asarray(_first(lt[f"{sub}_residual_out"]))
        if isinstance(lt.get(sub), dict) and "logit_std" in lt[sub]:
          out[f"{name}/attn_logits"] = np.asarray(_first(lt[sub]["logit_std"]))
  return out


def activation_sizes(acts: dict[str, np.ndarray], init_acts: dict[str, np.ndarray]) -> dict[str, float]:
  """{name: RMS of x_t} and {delta/name: RMS of x_t − x_0} (attention-logit stds: their mean over heads only)."""
  sizes = {}
  for name, x in acts.items():
    if name.endswith("/attn_logits"):
      sizes[name] = float(np.mean(x))
      continue
    sizes[name] = _rms(x)
    sizes[f"delta/{name}"] = _rms(x - init_acts[name])
  return sizes


def width_config(
    config: ml_collections.ConfigDict, width: int, ff_ratio: int, head_dim: Optional[int] = None
) -> config_lib.Config:
  """The resolved config of `config` at `d_model = width`, `d_ff = ff_ratio·width`, and `num_heads = width //
  head_dim` (the head dimension fixed) or, with `head_dim=None`, `model.num_heads` as configured (it grows)."""
  config = ml_collections.ConfigDict(config.to_dict())
  config.model.d_model, config.model.d_ff = width, ff_ratio * width
  if head_dim is not None:
    config.model.num_heads, config.model.head_dim = width // head_dim, head_dim
  return config_lib.resolve(config)


def coord_check(
    config: ml_collections.ConfigDict,
    widths: Sequence[int],
    batch: dict,
    *,
    num_steps: int,
    vocab_size: int,
    ff_ratio: int = 4,
    head_dim: Optional[int] = None,
    num_draws: int = 1,
) -> dict[int, list[dict[str, float]]]:
  """Activation sizes per width and step (see the module docstring).

  Args:
    config: the experiment ConfigDict (configs/default.py plus overrides): parameterization, init, optimizer (its
      learning rate and schedule as for a run), `train.seed`; `model.d_model` / `model.d_ff` are set per width.
    widths: the d_model values.
    batch: the batch trained on (every step) and measured on, as the data pipeline gives it.
    num_steps: optimizer steps.
    vocab_size: the model's vocabulary (the batch's ids are below it).
    ff_ratio: d_ff / d_model.
    head_dim: None: `model.num_heads` fixed, the head dimension d_model / num_heads grows with width (Tensor
      Programs V's setting); an int: this head dimension at every width, `num_heads = width // head_dim`.
    num_draws: independent inits (`train.seed`, `train.seed + 1`, ...) whose sizes are averaged, as the `mup`
      package's coordinate check averages several (the finite-width fluctuation of one draw at width 64 is about
      10%, as large as the tolerance one checks).

  Returns:
    {width: [sizes at step 0, ..., sizes at step num_steps]}, each `activation_sizes`'s dict (mean over draws).
  """
  batch = jax.tree.map(jnp.asarray, batch)
  out = {}
  for width in widths:
    cfg = width_config(config, width, ff_ratio, head_dim)
    model = models.get_model(dataclasses.replace(cfg.model, vocab_size=vocab_size))
    programs = {}  # the width's jitted train step, shared by its draws
    draws = [_trajectory(cfg, model, batch, num_steps, cfg.train.seed + i, programs) for i in range(num_draws)]
    out[width] = [{k: float(np.mean([d[t][k] for d in draws])) for k in draws[0][t]} for t in range(num_steps + 1)]
  return out


def _trajectory(
    cfg: config_lib.Config, model: Any, batch: dict, num_steps: int, seed: int, programs: dict
) -> list[dict]:
  """Activation sizes at steps 0..num_steps of the init drawn from `seed`, trained on `batch`."""
  rng = jax.random.key(seed)
  variables = init_lib.init_params(cfg.init, model, jax.random.fold_in(rng, 0), batch)
  params = variables.pop("params")
  multipliers = models.lr_multipliers(params, model.config)  # µP: hidden matrices × 1/width_ratio
  tx, _ = optim.make_optimizer(cfg.optim, lr_multipliers=multipliers, total_steps=max(num_steps, 1))
  state = TrainState(jnp.asarray(0, jnp.int32), params, tx.init(params), variables, jax.random.fold_in(rng, 1))
  train_step = programs.setdefault("step", jax.jit(step_lib.make_train_step(model, tx)))
  init_acts = activations(model, state.model_variables(), batch)
  sizes = [activation_sizes(init_acts, init_acts)]
  for _ in range(num_steps):
    state, _ = train_step(state, batch)
    sizes.append(activation_sizes(activations(model, state.model_variables(), batch), init_acts))
  return sizes


def spread(sizes: dict[int, list[dict[str, float]]], step: int) -> dict[str, float]:
  """max / min over widths of each size at `step`: 1 = the same at every width (also when 0 at every width, e.g. µP's
  hidden activations after its first step, when the zero readout passed back no gradient), inf where only some are
  0."""
  names = sizes[next(iter(sizes))][step].keys()
  out = {}
  for name in names:
    values = np.asarray([sizes[w][step][name] for w in sizes])
    if values.max() == 0:
      out[name] = 1.0
    else:
      out[name] = float(values.max() / values.min()) if values.min() > 0 else float("inf")
  return out


def depth_config(config: ml_collections.ConfigDict, depth: int) -> config_lib.Config:
  """The resolved config of `config` with `depth` layers in each of its stacks."""
  config = ml_collections.ConfigDict(config.to_dict())
  config.model.num_encoder_layers = config.model.num_decoder_layers = depth
  return config_lib.resolve(config)


def depth_coord_check(
    config: ml_collections.ConfigDict,
    depths: Sequence[int],
    batch: dict,
    *,
    num_steps: int,
    vocab_size: int,
    num_draws: int = 1,
) -> dict[int, list[dict[str, float]]]:
  """Activation sizes per depth and step: `coord_check`'s measurement with `model.num_{encoder,decoder}_layers =
  depth` instead of the width (the module docstring; `depth_sizes` reads the quantities that depend on depth).

  Args:
    config: the experiment ConfigDict: residual rule (`completep` or another), width, optimizer, `train.seed`.
    depths: the numbers of layers.
    batch: the batch trained on (every step) and measured on.
    num_steps: optimizer steps.
    vocab_size: the model's vocabulary.
    num_draws: independent inits averaged per depth.

  Returns:
    {depth: [sizes at step 0, ..., sizes at step num_steps]} (`activation_sizes`'s dicts, mean over draws).
  """
  batch = jax.tree.map(jnp.asarray, batch)
  out = {}
  for depth in depths:
    cfg = depth_config(config, depth)
    model = models.get_model(dataclasses.replace(cfg.model, vocab_size=vocab_size))
    programs = {}
    draws = [_trajectory(cfg, model, batch, num_steps, cfg.train.seed + i, programs) for i in range(num_draws)]
    out[depth] = [{k: float(np.mean([d[t][k] for d in draws])) for k in draws[0][t]} for t in range(num_steps + 1)]
  return out


def depth_sizes(sizes: dict[int, list[dict[str, float]]], step: int, stack: str = "decoder") -> dict[int, dict]:
  """{depth: {"stream", "delta/stream", "delta/logits"}} at `step`: the RMS of the residual stream after the last
  layer of `stack` (before any final norm), of its change since init, and of the logits' change."""
  out = {}
  for depth, per_step in sizes.items():
    last = f"{stack}/layer_{depth - 1}/mlp/out"
    at = per_step[step]
    out[depth] = {"stream": at[last], "delta/stream": at[f"delta/{last}"], "delta/logits": at["delta/logits"]}
  return out
