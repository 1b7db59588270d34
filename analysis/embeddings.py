"""What the input stream x_0 of each stack is made of: token content vs position (BERT's input pipeline vs the
original Transformer's; reproduction claim 9).

Contract: `input_stream(model, variables, batch, intermediates)` returns per stack {"token_fraction",
"cos_positions", "tokens"}: x_0 is the stack's input as the model records it (`stream_0`: after positions, the
embedding norm if any, dropout off); it splits exactly into a token part and a position part because the embedding
norm is a per-token affine map. With s = t + p (t the token embeddings, ×√d when `scale_embeddings`; p the position
embeddings) and LayerNorm x_0 = γ⊙(s − s̄)/σ + β, the token part is γ⊙(t − t̄)/σ; without an embedding
norm it is t. Over the non-padding positions, token_fraction = Σ‖token part‖² / Σ‖x_0‖² and cos_positions =
mean cos(x_0, p). BERT's pipeline (learned positions, both tables N(0, 0.02²) truncated, then LayerNorm; Devlin et al.
2019 §3) gives ≈ 1/2 and ≈ 1/√2; 0.0176 token embeddings added to unit-amplitude sinusoids without √d scaling
leave the tokens ≈ 0.0176²/(0.0176² + 1/2). Positions are 0, 1, ... per row: a packed batch (`*_position` keys)
gives {}.
"""

from typing import Any

import numpy as np

from models.transformer import shift_right, sinusoidal_positions


def _stack_tokens(batch: dict, stack: str) -> tuple[np.ndarray, np.ndarray]:
  """(tokens the stack embeds, valid positions) as the model builds them (`models.transformer.Transformer`)."""
  if stack == "encoder":
    tokens = np.asarray(batch["inputs"])
    return tokens, tokens > 0
  targets = np.asarray(batch["targets"])
  return np.asarray(shift_right(targets)), targets > 0


def input_stream(model: Any, variables: dict, batch: dict, intermediates: dict) -> dict:
  """Token fraction of x_0's second moment and cos(x_0, positions) per stack (module docstring).

  Args:
    model: a `models.get_model` Transformer.
    variables: its variables.
    batch: one batch in the model's format.
    intermediates: the model's recorded intermediates on `batch` (dropout off), as `analysis.signal` records them.

  Returns:
    {stack: {"token_fraction": float, "cos_positions": float, "tokens": int (non-padding positions)}}, or {} for a
    packed batch.
  """
  if any(k.endswith("_position") for k in batch):
    return {}
  c = model.config
  params = variables["params"]
  table = np.asarray(params["token_embedding"]["embedding"], np.float64)
  out = {}
  for stack in c.stacks:
    tokens, valid = _stack_tokens(batch, stack)
    x0 = np.asarray(intermediates[stack]["stream_0"][0], np.float64)[valid]
    t = table[tokens] * (np.sqrt(c.d_model) if c.scale_embeddings else 1.0)
    positions = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
    if c.position == "learned":
      p = np.asarray(params[stack]["pos_embedding"]["embedding"], np.float64)[positions]
    else:
      p = np.asarray(sinusoidal_positions(positions, c.d_model), np.float64)
    t, p = t[valid], p[valid]
    if c.embedding_norm:
      norm = params[stack]["embedding_norm"]
      gamma = np.asarray(norm["scale"], np.float64)
      beta = np.asarray(norm.get("bias", np.zeros_like(gamma)), np.float64)
      center = (lambda v: v - v.mean(-1, keepdims=True)) if c.norm_type != "rmsnorm" else (lambda v: v)
      direction = gamma * center(t + p)
      # 1/σ per token, read off the model's own x_0 (so its epsilon is included): x_0 − β = direction / σ.
      inv_sigma = np.sum((x0 - beta) * direction, -1, keepdims=True) / np.sum(direction**2, -1, keepdims=True)
      token_part = gamma * center(t) * inv_sigma
    else:
      token_part = t
    cos = np.sum(x0 * p, -1) / (np.linalg.norm(x0, axis=-1) * np.linalg.norm(p, axis=-1))
    out[stack] = dict(
        token_fraction=float(np.sum(token_part**2) / np.sum(x0**2)),
        cos_positions=float(np.mean(cos)),
        tokens=int(valid.sum()),
    )
  return out
