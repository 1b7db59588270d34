"""Where the norm goes, per layer and sublayer: `model.norm_position` read as one of five placements of
`models.transformer.Layer._sublayer` (docs/science.md §6), with ⊕ the residual rule:

- `post` (Vaswani et al. 2017): x ← Norm(x ⊕ F(x));  `pre` (Xiong et al. 2020): x ← x ⊕ F(Norm(x));
- `sandwich` (Ding et al. 2021, CogView §2.4): x ← x ⊕ Norm(F(Norm(x)));  `none`: x ← x ⊕ F(x);
- `reordered` (OLMo Team 2025, "2 OLMo 2 Furious", §3, "reordered norm"): x ← x ⊕ Norm(F(x)), the norm on each
  sublayer's output inside the residual and none on its input, plus the final norm. Not Peri-LN (`peri`), which
  keeps the input norm as well: the two differ exactly where Norm(x) ≠ x.

The model-level values that are not one of these five:
- `peri` (Kim et al. 2025, "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture", §3): a norm
  on the input and the output of every sublayer, x ← x + Norm(F(Norm(x))), plus the final norm: `sandwich` under the
  name the 2025 literature uses (an alias: the same model, parameter for parameter).
- `mix` (Li et al. 2025, "Mix-LN: Unleashing the Power of Deeper Layers by Combining Pre-LN and Post-LN", §4):
  Post-LN in the first ⌊α·L⌋ layers of a stack, Pre-LN in the others, α = `model.mix_ln_ratio` (0.25, the paper's
  choice for its LLaMA models; as we read §4, not re-derived here); a final norm when the last layer is Pre-LN.
- `hybrid` (Zhuo et al. 2025, "HybridNorm: Towards Stable and Efficient Transformer Training via Hybrid
  Normalization", §3): QKV-norm in attention (queries, keys and values each normalized per head inside
  `models.attention`, no norm on the stream: x ← x + Attn_QKV(x)) and Post-Norm in the MLP, x ← Norm(x + FFN(x)).

Layer-norm scaling (`model.layer_norm_scaling`; Sun et al. 2025, "The Curse of Depth in Large Language Models",
§4, Eq. 8): the output of the input norm of every sublayer of layer l (1-based) is multiplied by 1/√l, so the
variance a Pre-LN stream gains per layer falls with depth and deep layers stop being near-identities.
This module imports nothing: the layers read it.
"""

import math
from typing import Any

PLACEMENTS = ("post", "pre", "sandwich", "reordered", "none")
ATTENTION = ("self_attn", "cross_attn")


def mix_ln_post_layers(config: Any, stack: str) -> int:
  """⌊α·L⌋: how many of the first layers of `stack` are Post-LN under Mix-LN (Li et al. 2025 §4)."""
  return math.floor(config.mix_ln_ratio * config.num_layers(stack))


def sublayer_placement(config: Any, stack: str, layer: int, sublayer: str) -> str:
  """The placement (one of `PLACEMENTS`) of `sublayer` in layer `layer` (0-based) of `stack`."""
  position = config.norm_position
  if position == "peri":
    return "sandwich"
  if position == "mix":
    return "post" if layer < mix_ln_post_layers(config, stack) else "pre"
  if position == "hybrid":
    return "none" if sublayer in ATTENTION else "post"
  return position


def has_final_norm(config: Any, stack: str) -> bool:
  """Whether `stack` ends with a final norm: when its last layer leaves the stream unnormalized after a norm on the
  branch input (Pre-LN, sandwich/Peri-LN, Mix-LN's Pre-LN layers) or after one on the branch output (OLMo 2's
  reordered norm, whose model ends with a norm)."""
  last = config.num_layers(stack) - 1
  return sublayer_placement(config, stack, last, "mlp") in ("pre", "sandwich", "reordered")


def qkv_norms(config: Any) -> tuple[bool, bool]:
  """(queries and keys, values) normalized inside attention: QK-norm (`model.qk_norm`), HybridNorm's QKV-norm."""
  return config.qk_norm or config.norm_position == "hybrid", config.norm_position == "hybrid"


def input_norm_scale(config: Any, layer: int) -> float:
  """The factor on the input norm's output in layer `layer` (0-based): 1/√(layer + 1) under layer-norm scaling
  (Sun et al. 2025, Eq. 8), else 1."""
  return 1.0 / math.sqrt(layer + 1) if config.layer_norm_scaling else 1.0
