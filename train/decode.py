"""Greedy decoding for the encoder-decoder model, and the translation metrics built on it.

Decoding re-runs the decoder over the whole (fixed-length) target buffer at every position instead of keeping a
key/value cache: O(T²) work but one compiled program and no cache code to get wrong; at the sizes this project
decodes (evaluation subsets of a few hundred sentences, T ≤ 64) it costs seconds. Position t's query sees only
positions ≤ t (causal mask), so the unfilled tail of the buffer cannot influence the token chosen at t.

BLEU is sacreBLEU's corpus BLEU (Post 2018) on detokenized text; exact match is the fraction of hypotheses equal
to their reference string.
"""

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import sacrebleu

from models.transformer import shift_right

EOS_ID = 1


def make_greedy_decode(model: Any, max_length: int) -> Callable:
  """`decode(variables, inputs_BxS) -> tokens_BxT` (jitted), stopping each row after EOS (then padding)."""

  def decode(variables, inputs_BxS):
    encoded = model.apply(variables, inputs_BxS, method=model.encode)
    b = inputs_BxS.shape[0]
    positions_T = jnp.arange(max_length)

    def body(t, carry):
      tokens_BxT, done_B = carry
      valid = jnp.broadcast_to(positions_T <= t, (b, max_length))
      logits = model.apply(
          variables, shift_right(tokens_BxT), valid, encoded_BxSxD=encoded, inputs_BxS=inputs_BxS, method=model.decode
      )
      next_B = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, t, axis=1, keepdims=False), axis=-1)
      next_B = jnp.where(done_B, 0, next_B).astype(jnp.int32)
      tokens_BxT = jax.lax.dynamic_update_index_in_dim(tokens_BxT, next_B, t, axis=1)
      return tokens_BxT, done_B | (next_B == EOS_ID)

    init = (jnp.zeros((b, max_length), jnp.int32), jnp.zeros((b,), bool))
    return jax.lax.fori_loop(0, max_length, body, init)[0]

  return jax.jit(decode)


def translation_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
  """Corpus BLEU (sacreBLEU) and exact match of detokenized hypotheses against references."""
  if len(hypotheses) != len(references):
    raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
  bleu = sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score if hypotheses else 0.0
  exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(len(hypotheses), 1)
  return {"bleu": float(bleu), "exact_match": float(exact)}
