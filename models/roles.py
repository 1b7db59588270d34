"""Parameter roles: what every leaf of the parameter pytree is, derived in ONE place from the module structure.

`param_roles(params)` returns a pytree with the structure of `params` whose leaves are `ParamRole` records:
role, stack (`encoder` / `decoder` / `shared`), layer index (None outside layers), sublayer (`self_attn`,
`cross_attn`, `mlp`, ... ), fan_in and fan_out (multi-head kernels count heads × head_dim as one axis).
Init schemes, µP learning-rate multipliers and per-block Hessians are built on these records, never on path
matching elsewhere. An unknown path raises, so a new module cannot silently go without a role.

Roles: embedding, position, attn_q, attn_k, attn_v, attn_out, mlp_in, mlp_out, norm_scale, norm_bias,
residual_scale, head, bias.
"""

import dataclasses
import re
from typing import Any, Optional

import jax
import numpy as np

ROLES = (
    "embedding",
    "position",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_out",
    "mlp_in",
    "mlp_out",
    "norm_scale",
    "norm_bias",
    "residual_scale",
    "head",
    "bias",
)
_ATTN = {"query": "attn_q", "key": "attn_k", "value": "attn_v", "out": "attn_out"}
_MLP = {"wi": "mlp_in", "wo": "mlp_out"}


@dataclasses.dataclass(frozen=True)
class ParamRole:
  """What a parameter is. Not a pytree node, so it is a leaf of the roles tree."""

  role: str
  stack: str
  layer: Optional[int]
  sublayer: Optional[str]
  fan_in: int
  fan_out: int
  path: str

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def _key_name(k) -> str:
  return str(getattr(k, "key", getattr(k, "name", k)))


def _fans(role: str, shape: tuple) -> tuple[int, int]:
  if role in ("embedding", "position"):  # [V, D]: as a readout x·Eᵀ its fan-in is D
    return int(shape[-1]), int(shape[0])
  if role == "attn_out":  # [H, K, D]
    return int(np.prod(shape[:-1])), int(shape[-1])
  if len(shape) >= 2:  # [D, ...] kernels: first axis in, the rest out
    return int(shape[0]), int(np.prod(shape[1:]))
  n = int(np.prod(shape)) if shape else 1
  return n, n


def _classify(names: list[str]) -> tuple[str, str, Optional[int], Optional[str]]:
  """(role, stack, layer, sublayer) for a parameter path, or ValueError."""
  path = "/".join(names)
  leaf = names[-1]
  stack = names[0] if names[0] in ("encoder", "decoder") else "shared"
  layer = None
  rest = names[1:] if stack != "shared" else names
  if rest and (m := re.fullmatch(r"layer_(\d+)", rest[0])):
    layer, rest = int(m.group(1)), rest[1:]
  norm_role = {"scale": "norm_scale", "bias": "norm_bias"}
  if names[0] == "token_embedding" and leaf == "embedding":
    return "embedding", stack, None, "embedding"
  if len(rest) == 2 and rest[0] == "pos_embedding":
    return "position", stack, None, "position"
  if names[0] == "head":
    return ("head" if leaf == "kernel" else "bias"), stack, None, "head"
  if names[0] == "mlm_transform":
    return ("head" if leaf == "kernel" else "bias"), stack, None, "mlm_transform"
  if names[0] == "mlm_norm" and leaf in norm_role:
    return norm_role[leaf], stack, None, "mlm_head"
  if names[0] == "mlm_output_bias":
    return "bias", stack, None, "mlm_head"
  if rest == ["final_norm", leaf] and leaf in norm_role:
    return norm_role[leaf], stack, None, "final_norm"
  if rest == ["embedding_norm", leaf] and leaf in norm_role:
    return norm_role[leaf], stack, None, "embedding_norm"
  if layer is not None and len(rest) >= 2:
    module = rest[0]
    if len(rest) == 3 and module in ("self_attn", "cross_attn") and rest[1] in _ATTN:
      return (_ATTN[rest[1]] if leaf == "kernel" else "bias"), stack, layer, module
    if len(rest) == 3 and module == "mlp" and rest[1] in _MLP:
      return (_MLP[rest[1]] if leaf == "kernel" else "bias"), stack, layer, "mlp"
    if m := re.fullmatch(r"(self_attn|cross_attn|mlp)_(post_norm|norm)", module):
      if leaf in norm_role:
        return norm_role[leaf], stack, layer, m.group(1)
    if m := re.fullmatch(r"(self_attn|cross_attn|mlp)_residual", module):
      if leaf in ("alpha", "omega"):
        return "residual_scale", stack, layer, m.group(1)
  raise ValueError(f"parameter {path!r} has no role; models/roles.py must classify every parameter")


def param_roles(params: Any) -> Any:
  """The `ParamRole` of every leaf of `params` (arrays or ShapeDtypeStructs), as a pytree like `params`.

  Args:
    params: the model's `params` collection (without the {"params": ...} wrapper).

  Returns:
    A pytree with the structure of `params` and `ParamRole` leaves.
  """

  def role_of(path, leaf):
    names = [_key_name(k) for k in path]
    role, stack, layer, sublayer = _classify(names)
    fan_in, fan_out = _fans(role, tuple(leaf.shape))
    return ParamRole(role, stack, layer, sublayer, fan_in, fan_out, "/".join(names))

  return jax.tree_util.tree_map_with_path(role_of, params)
