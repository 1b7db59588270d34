"""Muon for the hidden matrices, AdamW for the rest, the split decided by each parameter's declared role.

Muon (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks"; modded-nanogpt): a Nesterov
momentum M_t = β·M_{t−1} + G_t whose matrix is replaced by its orthogonal factor, O_t = NS₅(M̂_t) ≈ U·Vᵀ for
M̂_t = U·S·Vᵀ (five quintic Newton–Schulz steps, coefficients (3.4445, −4.7750, 2.0315)), then
W_{t+1} = W_t − η_t·(s·O_t + λ·W_t), with decoupled decay λ. The scale s:
  * `optim.muon_consistent_rms = r > 0` (Liu et al. 2025, "Muon is Scalable for LLM Training", §2, their update
    W_t = W_{t−1} − η_t·(0.2·O_t·√max(A, B) + λ·W_{t−1}) for an A×B matrix): s = r·√max(m, n). O_t has singular
    values ≈ 1, so RMS(O_t) = √(min(m, n)/(m·n)) = 1/√max(m, n) and RMS(s·O_t) = r: r = 0.2 matches AdamW's
    typical update RMS (their §2), so Muon shares AdamW's learning rate and weight decay;
  * `optim.muon_consistent_rms = 0`: Jordan et al.'s s = √max(1, fan_out/fan_in).
Which parameters: the hidden matrices, by role (`MUON_ROLES`: attention q/k/v/out and gate, MLP in/gate/out), each
one fan_in × fan_out matrix (multi-head kernels flattened over heads × head_dim, as `models.roles.ParamRole` counts).
Everything else (embeddings, readout / MLM head, norm gains and biases, DyT/Derf α and shifts, residual scalars) goes
to AdamW with `optim.b1`, `optim.b2`, `optim.eps`, as in both papers.

Built from optax's pieces, `optax.partition` of `optax.contrib.scale_by_muon` (Nesterov, β = `optim.muon_beta`,
`optim.muon_ns_steps` steps, ε = `optim.eps`) and this project's `adamw`, not `optax.contrib.muon` as a whole, which
applies Nesterov momentum to the Adam half too (NAdamW) and does not mask its weight decay; s is one line here
(`shape_scale`), as optax's `scale_by_shape` is private. tests/test_muon.py checks both halves against optax.

Warmup: one unit-peak schedule η_t multiplies both halves; Muon's update size is set by η_t alone (‖O_t‖₂ ≈ 1), so
warmup ramps its RMS linearly from r·η/T_w. Per-parameter lr multipliers (µP, CompleteP) are refused at the config
boundary (`train.config.resolve`); the SP embedding-lr rule, which touches AdamW leaves only, composes.
"""

import math
from typing import Any, Optional

import jax
import optax
from optax import contrib

from configs.schema import invalid
from models.roles import ParamRole, key_name

# The hidden matrices Muon orthogonalizes (Jordan et al. 2024; Liu et al. 2025 §2); every other role gets AdamW.
MUON_ROLES = ("attn_q", "attn_k", "attn_v", "attn_out", "attn_gate", "mlp_in", "mlp_gate", "mlp_out")
MUON, ADAM = "muon", "adam"


def dimension_numbers(role: str, ndim: int) -> contrib.MuonDimensionNumbers:
  """The (fan_in axes, fan_out axes) of a Muon matrix, as `models.roles.ParamRole` counts its fans: the [H, K, D]
  out projection reduces over (H, K), every other kernel ([D, H, K], [D, F], [F, D]) over its first axis."""
  if role == "attn_out":
    return contrib.MuonDimensionNumbers(reduction_axis=tuple(range(ndim - 1)), output_axis=(ndim - 1,))
  return contrib.MuonDimensionNumbers(reduction_axis=(0,), output_axis=tuple(range(1, ndim)))


def shape_scale(fan_in: int, fan_out: int, consistent_rms: float) -> float:
  """s of the module docstring for a fan_in × fan_out matrix."""
  if consistent_rms:
    return consistent_rms * math.sqrt(max(fan_in, fan_out))  # Liu et al. 2025 §2: RMS(s·O) = consistent_rms
  return math.sqrt(max(1.0, fan_out / fan_in))  # Jordan et al. 2024 (modded-nanogpt): √max(1, fan_out/fan_in)


def labels(param_roles: Any) -> Any:
  """'muon' or 'adam' for every parameter, by its declared role (a pytree like the params)."""
  return jax.tree.map(lambda r: MUON if r.role in MUON_ROLES else ADAM, param_roles, is_leaf=_is_role)


def _is_role(x) -> bool:
  return isinstance(x, ParamRole)


def _path(path) -> str:
  return "/".join(key_name(k) for k in path)


def _by_path(param_roles: Any) -> dict[str, str]:
  leaves = jax.tree_util.tree_leaves_with_path(param_roles, is_leaf=_is_role)
  return {_path(path): r.role for path, r in leaves}


def _numbers_fn(roles: dict[str, str]):
  """Dimension numbers of the Muon half's leaves; optax hands it the half's tree, whose AdamW leaves are masked
  (`optax.MaskedNode`, no leaves), so the Muon leaves keep their paths."""
  return lambda tree: jax.tree_util.tree_map_with_path(lambda p, x: dimension_numbers(roles[_path(p)], x.ndim), tree)


def scale_by_shape(roles: dict[str, str], consistent_rms: float) -> optax.GradientTransformation:
  """Multiplies each Muon leaf's orthogonalized update by its s (module docstring)."""

  def scale(path, u):
    dims = dimension_numbers(roles[_path(path)], u.ndim)
    fan_in = math.prod(u.shape[a] for a in dims.reduction_axis)
    fan_out = math.prod(u.shape[a] for a in dims.output_axis)
    return u * shape_scale(fan_in, fan_out, consistent_rms)

  def update_fn(updates, state, params=None):
    del params
    return jax.tree_util.tree_map_with_path(scale, updates), state

  return optax.GradientTransformation(optax.init_empty_state, update_fn)


def muon(
    lr: optax.Schedule, cfg, weight_decay_mask=None, *, param_roles: Optional[Any] = None, adamw=None
) -> optax.GradientTransformation:
  """Muon on the `MUON_ROLES` matrices, AdamW (the project's `adamw` builder, passed in) on the rest.

  Args:
    lr: the (unit-peak) schedule, shared by both halves.
    cfg: the typed `config.optim`.
    weight_decay_mask: optional pytree of bools like the params (True = decay), applied in both halves.
    param_roles: the `models.roles.ParamRole` of every parameter (`models.param_roles`); required.
    adamw: the AdamW builder `(lr, cfg, weight_decay_mask) -> tx` of `train.optimizers`.
  """
  if param_roles is None:
    raise ValueError(
        "optim.name='muon' splits the parameters by their declared roles: pass param_roles=models.param_roles(model)"
    )
  roles = _by_path(param_roles)
  mask = weight_decay_mask
  muon_half = optax.chain(
      contrib.scale_by_muon(
          ns_steps=cfg.muon_ns_steps,
          beta=cfg.muon_beta,
          eps=cfg.eps,
          nesterov=True,
          weight_dimension_numbers=_numbers_fn(roles),
      ),
      scale_by_shape(roles, cfg.muon_consistent_rms),
      optax.add_decayed_weights(cfg.weight_decay, mask=mask),  # decoupled, η_t·λ·W (Liu et al. 2025 §2)
      optax.scale_by_learning_rate(lr),
  )
  return optax.partition({MUON: muon_half, ADAM: adamw(lr, cfg, mask)}, labels(param_roles))


def check_config(cfg) -> None:
  """The Muon keys of `config.optim`; ValueError naming the key, its value and the valid choices."""
  number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
  if not (number(cfg.muon_beta) and 0 <= cfg.muon_beta < 1):
    raise invalid("optim.muon_beta", cfg.muon_beta, "a number in [0, 1) (0.95 in Jordan et al. 2024)")
  if not isinstance(cfg.muon_ns_steps, int) or isinstance(cfg.muon_ns_steps, bool) or cfg.muon_ns_steps < 1:
    raise invalid("optim.muon_ns_steps", cfg.muon_ns_steps, "an integer >= 1 (5 in Jordan et al. 2024)")
  if not (number(cfg.muon_consistent_rms) and 0 <= cfg.muon_consistent_rms < math.inf):
    raise invalid(
        "optim.muon_consistent_rms", cfg.muon_consistent_rms, "a finite number >= 0 (0.2 in Liu et al. 2025; 0 = off)"
    )
