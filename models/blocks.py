"""The decoder-LM block options of 2020-2025 (LLaMA, OLMo 2, Gemma 2, Qwen): their names, the gated MLP's hidden
width convention, and their validation at the config boundary (`ModelConfig.__post_init__` calls `validate_blocks`).

- `model.position='rope'` with `model.rope_base` θ: rotary embeddings on queries and keys (`models.rope`).
- `model.mlp='swiglu' | 'geglu'`: gated MLPs (Shazeer 2020, "GLU Variants Improve Transformer", Eq. 6), a third
  matrix W (role `mlp_gate`) beside V (`mlp_in`) and W₂ (`mlp_out`); 'plain' is the 2017 MLP (`models.mlp`).
- `model.num_kv_heads`: grouped-query attention (Ainslie et al. 2023, "GQA", §2.2): G key/value heads, each shared by
  num_heads/G query heads; None (or num_heads) is multi-head attention, 1 multi-query (Shazeer 2019).
- `model.attention_gate`: a head-wise elementwise sigmoid gate on the attention output (Qiu et al. 2025), its matrix
  has the role `attn_gate` (`models.attention`).
- `model.attn_logit_softcap`, `model.final_logit_softcap`: c·tanh(z/c) on the attention and output logits (Gemma
  Team 2024, "Gemma 2", §2, Table 2: 50 and 30); 0 = off.
This module imports only `configs.schema`.
"""

import math
from typing import Any

from configs.schema import contradiction, invalid

MLPS = ("plain", "swiglu", "geglu")
GATED_MLPS = ("swiglu", "geglu")


def gated_hidden_width(d_model: int, multiple_of: int) -> int:
  """The gated MLP's hidden width when `model.d_ff` is unset: 2/3 of the plain 4·d, rounded up to a multiple.

  Shazeer 2020 §2 shrinks d_ff by 2/3 so that the three matrices of a gated MLP hold as many parameters as the two of a
  plain one of width 4d; LLaMA (Touvron et al. 2023, §2 "SwiGLU" and its `FeedForward`: `int(2 * 4d / 3)`, then
  `multiple_of * ceil(hidden / multiple_of)`) rounds 8d/3 up to a multiple (256 there) for efficient kernels.
  """
  hidden = int(2 * (4 * d_model) / 3)
  return multiple_of * math.ceil(hidden / multiple_of)


def _positive_int(name: str, value: Any) -> None:
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise invalid(f"model.{name}", value, "a positive integer")


def validate_blocks(c: Any) -> None:
  """Raises ValueError naming the key, its value and the valid choices for every block key of `c` (a ModelConfig)."""
  if c.mlp not in MLPS:
    raise invalid("model.mlp", c.mlp, list(MLPS))
  _positive_int("mlp_multiple_of", c.mlp_multiple_of)
  if not 0.0 < c.rope_base < float("inf"):
    raise invalid("model.rope_base", c.rope_base, "a finite number > 0 (Su et al. 2021: 10000)")
  if c.position == "rope" and c.qkv_head_dim % 2:
    raise contradiction(
        "model.position",
        "rope",
        "model.head_dim",
        c.qkv_head_dim,
        "RoPE rotates pairs of a head's coordinates (Su et al. 2021, Eq. 34); valid: an even head_dim",
    )
  if c.num_kv_heads is not None:
    _positive_int("num_kv_heads", c.num_kv_heads)
    if c.num_heads % c.num_kv_heads:
      raise contradiction(
          "model.num_kv_heads",
          c.num_kv_heads,
          "model.num_heads",
          c.num_heads,
          "each key/value head serves num_heads/num_kv_heads query heads (Ainslie et al. 2023); valid: a divisor "
          f"of num_heads, {[g for g in range(1, c.num_heads + 1) if c.num_heads % g == 0]}",
      )
  if not isinstance(c.attention_gate, bool):
    raise invalid("model.attention_gate", c.attention_gate, "True or False")
  for name in ("attn_logit_softcap", "final_logit_softcap"):
    value = getattr(c, name)
    if not 0.0 <= value < float("inf"):
      raise invalid(f"model.{name}", value, "a finite number >= 0 (0 = off; Gemma 2: 50 attention, 30 final)")


def gate_roles(c: Any) -> tuple[str, ...]:
  """The roles of the third matrices a config creates: `mlp_gate` for a gated MLP, `attn_gate` for gated attention
  (what the init schemes that cannot extend to a third matrix refuse, `init.schemes.Scheme.check_model`)."""
  return (("mlp_gate",) if c.mlp in GATED_MLPS else ()) + (("attn_gate",) if c.attention_gate else ())
