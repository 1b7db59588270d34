"""Greedy decoding for the encoder-decoder model, and the translation metrics built on it.

Decoding re-runs the decoder over the whole (fixed-length) target buffer at every position instead of keeping a
key/value cache: O(T²) work but one compiled program and no cache code to get wrong; at the sizes this project
decodes (evaluation subsets of a few hundred sentences, T ≤ 64) it costs seconds. Position t's query sees only
positions ≤ t (causal mask), so the unfilled tail of the buffer cannot influence the token chosen at t.

Translation metrics (`translation_metrics`), each a corpus score over the decoded sentences:
  bleu         sacreBLEU's corpus BLEU (Post 2018) on detokenized text, case-sensitive, its default `13a` tokenizer:
               the comparable number, the one papers should report;
  bleu_lc      the same with `lowercase=True`: case errors are forgiven. It stands in for what the widely used
               Multi30k tutorials report (Trevett's pytorch-seq2seq notebook 6: torchtext's `bleu_score` on
               lowercased spaCy tokens). The two agree on lowercase, BLEU-4 with uniform weights, corpus-level n-gram
               counts and brevity penalty, but not on tokens: spaCy splits clitics ("man 's") and hyphenated words
               ("t - shirt"), which 13a leaves whole, and torchtext does not smooth zero counts (sacreBLEU's 'exp'
               smoothing matters only when an n-gram order has no match at all);
  exact_match  the fraction of hypotheses equal to their reference string (outer blanks ignored).
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
  """`{'bleu', 'bleu_lc', 'exact_match'}` of detokenized hypotheses against references (module docstring)."""
  if len(hypotheses) != len(references):
    raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
  hyps, refs = list(hypotheses), [list(references)]
  bleu = sacrebleu.corpus_bleu(hyps, refs, tokenize="13a").score if hyps else 0.0
  bleu_lc = sacrebleu.corpus_bleu(hyps, refs, lowercase=True, tokenize="13a").score if hyps else 0.0
  exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(len(hypotheses), 1)
  return {"bleu": float(bleu), "bleu_lc": float(bleu_lc), "exact_match": float(exact)}
