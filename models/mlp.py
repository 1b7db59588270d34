"""The position-wise feed-forward branch, plain or gated (`model.mlp`; docs/science.md §2).

- `plain` (Vaswani et al. 2017, Eq. 2): FFN(x) = act(x·W₁)·W₂, kernels `wi` (role `mlp_in`) and `wo` (`mlp_out`),
  act = `model.activation`.
- `swiglu` / `geglu` (Shazeer 2020, "GLU Variants Improve Transformer", Eq. 6):
  FFN(x) = (act(x·W) ⊙ x·V)·W₂ with act = Swish₁ = x·σ(x) (SwiGLU) or GELU (GeGLU, the exact erf form, as
  `model.activation='gelu'`), kernels `wg` = W (role `mlp_gate`, the matrix through the activation: LLaMA's
  `gate_proj`), `wi` = V (`mlp_in`, linear: LLaMA's `up_proj`), `wo` = W₂ (`mlp_out`). The gated kind fixes its
  activation; `model.activation` is not read. Its width is `model.d_ff` (unset: 8/3·d rounded up,
  `models.blocks.gated_hidden_width`).
"""

from typing import Any

import flax.linen as nn
import jax

from models.activations import get_activation
from models.dense import Dense
from models.parameterization import default_kernel_init, hidden_multiplier

# Shazeer 2020, Eq. 6: the activation of each gated variant.
GATE_ACTIVATIONS = {"swiglu": jax.nn.silu, "geglu": get_activation("gelu")}


class MLP(nn.Module):
  """Position-wise feed-forward branch: wo(act(wi(x))) or wo(act(wg(x)) ⊙ wi(x)) (module docstring)."""

  config: Any

  @nn.compact
  def __call__(self, x_BxLxD, *, deterministic: bool = True):
    c = self.config
    d = x_BxLxD.shape[-1]
    dense = lambda feats, fan_in, axes, role, name: Dense(
        feats,
        use_bias=c.use_bias,
        multiplier=hidden_multiplier(c, fan_in),
        kernel_init=default_kernel_init(c),
        axes=axes,
        role=role,
        sublayer="mlp",
        dtype=c.dtype,
        param_dtype=c.param_dtype,
        name=name,
    )
    if c.mlp == "plain":
      h_BxLxF = get_activation(c.activation)(dense(c.d_ff, d, ("embed", "mlp"), "mlp_in", "wi")(x_BxLxD))
    else:
      gate_BxLxF = dense(c.d_ff, d, ("embed", "mlp"), "mlp_gate", "wg")(x_BxLxD)
      h_BxLxF = GATE_ACTIVATIONS[c.mlp](gate_BxLxF) * dense(c.d_ff, d, ("embed", "mlp"), "mlp_in", "wi")(x_BxLxD)
    if c.dropout_rate > 0 and not deterministic:
      h_BxLxF = nn.Dropout(c.dropout_rate)(h_BxLxF, deterministic=False)
    return dense(d, c.d_ff, ("mlp", "embed"), "mlp_out", "wo")(h_BxLxF)
