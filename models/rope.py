"""Rotary position embeddings (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding", §3.4,
Eq. 34; docs/science.md §4): the query and the key at position m are rotated, pair of coordinates by pair, by the
angles m·θ_i with θ_i = base^{-2(i-1)/d_k}, i = 1 … d_k/2 (base 10000 in the paper; `model.rope_base`):

    (x_{2i-1}, x_{2i}) ↦ (x_{2i-1}·cos mθ_i − x_{2i}·sin mθ_i,  x_{2i-1}·sin mθ_i + x_{2i}·cos mθ_i).

A rotation by mθ of the query and by nθ of the key leaves q·k depending on the positions only through m − n
(Su et al. 2021, Eq. 16), so the logits are relative-position invariant; values are not rotated. Adjacent pairs as in
Eq. 34 (GPT-NeoX and Hugging Face's LLaMA pair coordinate i with i + d_k/2 instead: the same model up to a
permutation of W_q's and W_k's columns).
"""

import jax
import jax.numpy as jnp
import numpy as np


def rope_frequencies(head_dim: int, base: float) -> np.ndarray:
  """θ_i = base^{-2(i-1)/d_k} for i = 1 … d_k/2 (Su et al. 2021, Eq. 34)."""
  return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def apply_rope(x_BxLxHxK: jax.Array, positions_BxL: jax.Array, base: float) -> jax.Array:
  """Rotates every head of `x` at integer positions `positions_BxL` (module docstring); same shape and dtype.

  The angles are computed in at least float32 (float64 when x is), so a bfloat16 model's rotation stays exact in
  the position.
  """
  dtype = jnp.promote_types(x_BxLxHxK.dtype, jnp.float32)
  k = x_BxLxHxK.shape[-1]
  angles_BxLxP = positions_BxL[..., None].astype(dtype) * jnp.asarray(rope_frequencies(k, base), dtype)
  cos, sin = jnp.cos(angles_BxLxP)[:, :, None, :], jnp.sin(angles_BxLxP)[:, :, None, :]
  pairs = x_BxLxHxK.astype(dtype).reshape(*x_BxLxHxK.shape[:-1], k // 2, 2)
  even, odd = pairs[..., 0], pairs[..., 1]
  rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
  return rotated.reshape(x_BxLxHxK.shape).astype(x_BxLxHxK.dtype)
