"""Post-init procedures: steps a scheme runs after sampling, because they need the built model or data.

Registry `get_procedure(name)` / `PROCEDURES`; every procedure is `(variables, model, batch) -> variables`.

- `admin_profile` (Liu et al. 2020, "Understanding the Difficulty of Training Transformers", Eq. 6):
  Admin's profiling pass. With every ω = 1, one forward pass on `batch` records each sublayer's branch output
  F_j (`<sublayer>_branch` in the model's `intermediates`) and each stack's input x_0 (`stream_0`). Sublayers
  are numbered per stack in execution order (layer 0 self_attn, cross_attn, mlp, then layer 1, ...), and
  ω_1 = 1,   ω_i² = Var[x_0] + Σ_{1≤j<i} Var[F_j]   (i ≥ 2),
  written as a constant vector. Var is the variance of all features at non-padding positions around their
  common mean (the authors' Transformer-Clinic code takes `np.var` of the flattened tensor).
  The first-sublayer convention is Transformer-Clinic's (`fairseq/modules/transformer_layer.py`, the
  `adaptive` init): it starts each stack's ratio at 1.0, fills ω of sublayer i with it, then sets
  ratio ← √(Var[ω_i·x_{i−1}] + Var[F_i]). With ω_1 = 1 that is Var[x_0] + Var[F_1] for i = 2, and because
  post-LN makes every later x_{i−1} a LayerNorm output with unit variance (gain 1, bias 0 at init), the
  recursion unrolls to the sum above. Differences from that code, on purpose: one pass at ω = 1 (the
  closed form, not a sequential update during the pass), no dropout, and padding positions excluded.
  Within a stack the one-pass and sequential values agree (tests: to 2%); an encoder-decoder's
  cross-attention differs more (≈15% in Var on the test model), because it reads the encoder output, which
  the encoder's ω change in the sequential code but not in the ω = 1 pass.
"""

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from models import param_roles

Procedure = Callable[[Any, Any, dict], Any]
SUBLAYER_ORDER = ("self_attn", "cross_attn", "mlp")


def _masked_variance(x_BxLxD: jax.Array, valid_BxL: jax.Array) -> jax.Array:
  """Variance of all entries of x at valid positions around their common mean (two-pass, float32)."""
  x = x_BxLxD.astype(jnp.float32)
  w_BxLx1 = valid_BxL[..., None].astype(jnp.float32)
  n = jnp.maximum(w_BxLx1.sum() * x.shape[-1], 1.0)
  mean = (x * w_BxLx1).sum() / n
  return (jnp.square(x - mean) * w_BxLx1).sum() / n


def _stack_valid(stack: str, batch: dict) -> jax.Array:
  # The decoder's positions are those of `targets` (its inputs are targets shifted right); see models.transformer.
  return batch["inputs"] > 0 if stack == "encoder" else batch["targets"] > 0


def admin_omega_squared(intermediates: Any, batch: dict, model_config: Any) -> dict[tuple, float]:
  """ω² of every Admin sublayer from one ω = 1 forward pass (see the module docstring).

  Args:
    intermediates: the `intermediates` collection of `model.apply(..., mutable=["intermediates"])`.
    batch: the profiling batch (0 = padding).
    model_config: the model's ModelConfig.

  Returns:
    {(stack, layer, sublayer): ω²}.
  """
  omega_sq = {}
  for stack in model_config.stacks:
    record = intermediates[stack]
    valid = _stack_valid(stack, batch)
    running = _masked_variance(record["stream_0"][0], valid)  # the j = 0 term: Var[x_0]
    first = True
    for layer in range(model_config.num_layers(stack)):
      layer_record = record[f"layer_{layer}"]
      for sublayer in SUBLAYER_ORDER:
        name = f"{sublayer}_branch"
        if name not in layer_record:
          continue
        omega_sq[(stack, layer, sublayer)] = 1.0 if first else float(running)
        first = False
        running = running + _masked_variance(layer_record[name][0], valid)
  return omega_sq


@functools.lru_cache(maxsize=16)
def _apply_recording(model: Any) -> Callable:
  # One compiled forward pass per model (Linen modules hash by their fields): the op-by-op eager pass is
  # several times slower to dispatch than compiling the whole program once.
  return jax.jit(functools.partial(model.apply, mutable=["intermediates"]))


def admin_profile(variables: Any, model: Any, batch: dict) -> Any:
  """Admin's profiling pass: sets every ω from one forward pass at ω = 1 (Liu et al. 2020, Eq. 6).

  Args:
    variables: the model's variables with sampled parameters (any ω values; they are reset to 1 first).
    model: the Transformer; `model.config.residual` must be 'admin'.
    batch: the profiling batch, in the model's batch format.

  Returns:
    `variables` with every ω (role `residual_scale`) set to the constant vector √ω².
  """
  mc = model.config
  if mc.residual != "admin":
    raise ValueError(f"admin_profile needs model.residual='admin' (ω exists only then), got {mc.residual!r}")
  params = variables["params"]
  roles = param_roles(model, params)
  is_omega = lambda r: r.role == "residual_scale"
  ones = jax.tree.map(lambda p, r: jnp.ones_like(p) if is_omega(r) else p, params, roles)
  _, state = _apply_recording(model)({**variables, "params": ones}, batch)
  omega_sq = admin_omega_squared(state["intermediates"], batch, mc)

  def set_omega(p, r):
    if not is_omega(r):
      return p
    return jnp.full(p.shape, jnp.sqrt(omega_sq[(r.stack, r.layer, r.sublayer)]), p.dtype)

  return {**variables, "params": jax.tree.map(set_omega, params, roles)}


PROCEDURES: dict[str, Procedure] = {
    "admin_profile": admin_profile,
}


def get_procedure(name: str) -> Procedure:
  """The registered procedure `name`.

  Raises:
    ValueError: unknown name, listing the valid ones.
  """
  if name not in PROCEDURES:
    raise ValueError(f"unknown init procedure {name!r}; valid: {sorted(PROCEDURES)}")
  return PROCEDURES[name]
