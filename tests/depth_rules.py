"""Whether an experiment config's rules read a layer's index or its stack's depth, derived from the code that applies
them (not from a list of names), so tests/scripts/config_train.py may train a config whose rules do not at 1+1 layers.

A model's depth reaches its numbers only through these calls, each asked here per layer l and stack depth L:
- the norm placement and the input-norm factor of every sublayer (`models.placement`: Mix-LN's split, layer-norm
  scaling's 1/√l) and whether the stack ends with a norm;
- the residual merge's constants as `models.transformer.Layer._sublayer` sets them (DeepNorm's α, CompleteP's
  (L/L_base)^{−α}, LayerScale's ε by depth);
- the init scheme's rule of every parameter (`init.schemes.Scheme.rule`: dsinit's α/√l, Mitchell's 1/√(2dl),
  T-Fixup's and DeepNet's depth factors) and its learning-rate multiplier (`models.parameterization.lr_multiplier`);
- a post-init procedure of the scheme (Admin's profiling pass, whose ω is a product over the layers).
A config reads the depth when, at some probed depth L, a layer's answers differ from layer 0's, or layer 0's or a
stack's answers differ from those at L = 1, or its scheme has a procedure.
"""

import dataclasses
from typing import Any

import jax

from init.schemes import get_scheme
from models import param_roles
from models.parameterization import lr_multiplier
from models.placement import has_final_norm, input_norm_scale, sublayer_placement
from models.residual import deepnorm_constants, depth_multiplier, layerscale_init

SUBLAYERS = ("self_attn", "cross_attn", "mlp")
# 1 and 2 (the tiny preset), 4 (Mix-LN's ⌊α·L⌋ ≥ 1 at the paper's α = 0.25), 32 (past LayerScale's ε steps at 18, 24).
PROBE_DEPTHS = (1, 2, 4, 32)


def _at_depth(mc: Any, depth: int) -> Any:
  return dataclasses.replace(mc, num_encoder_layers=depth, num_decoder_layers=depth)


def _residual_constants(mc: Any, stack: str) -> tuple:
  """The merge's constants that `models.transformer.Layer._sublayer` reads from the depth."""
  if mc.residual == "deepnorm":
    return deepnorm_constants(mc.arch, mc.num_encoder_layers, mc.num_decoder_layers)[stack]
  if mc.residual == "completep":
    return (depth_multiplier(mc, stack),)
  if mc.residual == "layerscale":
    return (layerscale_init(mc, stack),)
  return ()


def depth_signature(mc: Any, init_cfg: Any, depth: int) -> dict:
  """Every depth-reading answer of the model `mc` (typed, vocab_size set) under `init_cfg` (typed, scheme resolved)
  at `depth` layers per stack: {"stacks": {stack: ...}, "layers": {stack: [per layer]}, "shared": ...}."""
  scheme = get_scheme(init_cfg.scheme)
  hp = init_cfg.hparams(scheme)
  one = _at_depth(mc, 1)
  leaves = jax.tree.leaves(param_roles(one))  # the roles of a 1-layer model; layer 0's stand for every layer
  deep = _at_depth(mc, depth)
  answer = lambda r: (r.path.split("/")[-1], scheme.rule(r, deep, hp), lr_multiplier(r, deep))
  shared = tuple(answer(r) for r in leaves if r.layer is None)
  stacks, layers = {}, {}
  for stack in deep.stacks:
    stacks[stack] = (has_final_norm(deep, stack), _residual_constants(deep, stack))
    layer_roles = [r for r in leaves if r.layer == 0 and r.stack == stack]
    layers[stack] = [
        (
            tuple((sublayer_placement(deep, stack, l, s), input_norm_scale(deep, l)) for s in SUBLAYERS),
            tuple(answer(dataclasses.replace(r, layer=l)) for r in layer_roles),
        )
        for l in range(depth)
    ]
  return {"stacks": stacks, "layers": layers, "shared": shared, "procedure": scheme.procedure}


def reads_depth(mc: Any, init_cfg: Any) -> bool:
  """Whether the rules of (`mc`, `init_cfg`) read a layer's index or the depth (the module docstring)."""
  base = depth_signature(mc, init_cfg, 1)
  if base["procedure"] is not None:
    return True
  for depth in PROBE_DEPTHS[1:]:
    sig = depth_signature(mc, init_cfg, depth)
    if sig["stacks"] != base["stacks"] or sig["shared"] != base["shared"]:
      return True
    for stack, per_layer in sig["layers"].items():
      if any(entry != base["layers"][stack][0] for entry in per_layer):
        return True
  return False
