"""Tests for train/decode.py: BLEU against hand-computed values (Papineni et al. 2002) and an independent n-gram
count, and greedy decoding against a cache-free reference loop and closed-form cases."""

import collections
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sacrebleu

from models import get_model
from tests import tiny
from train.decode import EOS_ID, make_greedy_decode, translation_metrics

# ------------------------------------------------------------------------------------------------------------- BLEU


def _ngrams(words, n):
  return collections.Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def papineni_bleu(hypotheses, references, max_order=4):
  """Corpus BLEU (Papineni et al. 2002, Eq. 1-2) from scratch, in percent, for whitespace-tokenized text.

  p_n = Σ clipped n-gram matches / Σ hypothesis n-grams over the corpus; BP = 1 if c > r else exp(1 − r/c) with c, r
  the total hypothesis and reference lengths; BLEU = BP · exp(Σ_n log(p_n) / N), N = 4 uniform weights. No
  smoothing: callers keep every p_n > 0 (sacreBLEU smooths only zero counts) or expect 0.
  """
  matches, totals = [0] * max_order, [0] * max_order
  c = r = 0
  for hyp, ref in zip(hypotheses, references):
    h, rf = hyp.split(), ref.split()
    c, r = c + len(h), r + len(rf)
    for n in range(1, max_order + 1):
      hyp_counts, ref_counts = _ngrams(h, n), _ngrams(rf, n)
      matches[n - 1] += sum(min(k, ref_counts[g]) for g, k in hyp_counts.items())
      totals[n - 1] += sum(hyp_counts.values())
  if min(matches) == 0:
    return 0.0
  log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_order
  bp = 1.0 if c > r else math.exp(1.0 - r / c)
  return 100.0 * bp * math.exp(log_precision)


# Hand computation for HAND_HYPS/HAND_REFS, sentence 1 ("the cat sat on the mat" vs "the cat sat on a mat"):
# unigrams 5/6 ("the" clipped to 1), bigrams 3/5, trigrams 2/4, 4-grams 1/3; sentence 2 ("a dog runs" vs
# "a dog runs in the park"): 3/3, 2/2, 1/1, 0/0. Corpus: p = 8/9, 5/7, 3/5, 1/3; c = 9 < r = 12, BP = exp(1 − 12/9).
HAND_HYPS = ["the cat sat on the mat", "a dog runs"]
HAND_REFS = ["the cat sat on a mat", "a dog runs in the park"]
# BLEU = 100·e^(−1/3)·(8/63)^(1/4) ≈ 42.773.
HAND_BLEU = 100.0 * math.exp(-1.0 / 3.0) * (8 / 9 * 5 / 7 * 3 / 5 * 1 / 3) ** 0.25


@pytest.mark.parametrize(
    "hyps,refs,bleu,exact",
    [
        # One sentence, c = r so BP = 1: (5/6 · 3/5 · 2/4 · 1/3)^(1/4) = (1/12)^(1/4).
        (HAND_HYPS[:1], HAND_REFS[:1], 100.0 * (1 / 12) ** 0.25, 0.0),
        (HAND_HYPS, HAND_REFS, HAND_BLEU, 0.0),
        (HAND_REFS, HAND_REFS, 100.0, 1.0),  # identical
        (["  a dog runs in the park "], ["a dog runs in the park"], 100.0, 1.0),  # exact match ignores outer blanks
        (["blue green red yellow"], ["a dog runs in the park"], 0.0, 0.0),  # disjoint
        (["a dog runs in the park", "x y z w"], ["a dog runs in the park", "p q r s"], None, 0.5),
    ],
)
def test_bleu_and_exact_match_equal_hand_values(hyps, refs, bleu, exact):
  out = translation_metrics(hyps, refs)
  expected = papineni_bleu(hyps, refs) if bleu is None else bleu
  assert out["bleu"] == pytest.approx(expected, rel=1e-9, abs=1e-9)
  assert papineni_bleu(hyps, refs) == pytest.approx(expected, rel=1e-12, abs=1e-12)  # the reference agrees
  assert out["exact_match"] == exact


def test_bleu_on_a_random_corpus_equals_independent_counts_and_sacrebleu():
  """200 sentences of a 12-word vocabulary, the hypotheses a noisy copy of the references (some words replaced,
  some dropped): every p_n > 0, so smoothing plays no part and the from-scratch count must agree to rounding."""
  rng = np.random.default_rng(0)
  words = "a dog cat runs jumps in the park over meadow red ball".split()
  refs, hyps = [], []
  for _ in range(200):
    ref = list(rng.choice(words, size=rng.integers(4, 12)))
    hyp = [w if rng.random() > 0.2 else str(rng.choice(words)) for w in ref if rng.random() > 0.1]
    refs.append(" ".join(ref))
    hyps.append(" ".join(hyp))
  ours = translation_metrics(hyps, refs)["bleu"]
  expected = papineni_bleu(hyps, refs)
  assert 10.0 < expected < 90.0, expected  # an informative case, neither 0 nor 100
  assert ours == pytest.approx(expected, rel=1e-9)
  assert ours == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a").score, rel=1e-12)


def test_translation_metrics_errors_and_empty():
  with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
    translation_metrics(["a", "b"], ["a"])
  assert translation_metrics([], []) == {"bleu": 0.0, "bleu_lc": 0.0, "exact_match": 0.0}


# "A Dog runs in the park" vs "a dog runs in the park": case-sensitive, 4/6 unigrams, 3/5 bigrams, 2/4 trigrams, 1/3
# 4-grams match and c = r = 6 (BP = 1), so BLEU = 100·(1/15)^(1/4) ≈ 50.81; lowercased, every n-gram matches: 100.
CASE_HYPS = ["A Dog runs in the park", "The man wears a red Hat .", "two women sit on a bench"]
CASE_REFS = ["a dog runs in the park", "A man wears a red hat .", "Two women sit on a wooden bench"]


def test_lowercased_bleu_forgives_case_only():
  one = translation_metrics(CASE_HYPS[:1], CASE_REFS[:1])
  assert one["bleu"] == pytest.approx(100.0 * (1 / 15) ** 0.25, rel=1e-9)
  assert one["bleu_lc"] == pytest.approx(100.0, rel=1e-12)
  assert one["bleu"] == pytest.approx(papineni_bleu(CASE_HYPS[:1], CASE_REFS[:1]), rel=1e-9)
  assert one["bleu_lc"] == pytest.approx(
      papineni_bleu([h.lower() for h in CASE_HYPS[:1]], [r.lower() for r in CASE_REFS[:1]]), rel=1e-9
  )


def test_lowercased_bleu_equals_sacrebleu_called_independently():
  """The corpus where case matters in every sentence, against sacreBLEU's BLEU object with lowercase=True (the
  metric class, not the corpus_bleu shortcut translation_metrics calls) and against lowercasing by hand."""
  out = translation_metrics(CASE_HYPS, CASE_REFS)
  lowercased = sacrebleu.metrics.BLEU(lowercase=True, tokenize="13a").corpus_score(CASE_HYPS, [CASE_REFS]).score
  by_hand = sacrebleu.metrics.BLEU(tokenize="13a").corpus_score(
      [h.lower() for h in CASE_HYPS], [[r.lower() for r in CASE_REFS]]
  )
  cased = sacrebleu.metrics.BLEU(tokenize="13a").corpus_score(CASE_HYPS, [CASE_REFS]).score
  assert out["bleu_lc"] == pytest.approx(lowercased, rel=1e-12)
  assert out["bleu_lc"] == pytest.approx(by_hand.score, rel=1e-12)
  assert out["bleu"] == pytest.approx(cased, rel=1e-12)
  assert out["bleu_lc"] > out["bleu"] + 10.0  # case matters here: the two metrics are not the same number


# ------------------------------------------------------------------------------------------------- greedy decoding

VOCAB = 11
MAX_LENGTH = 7


def _sources(rows=12, length=7, seed=0):
  """Source ids in [3, VOCAB) with trailing padding (every row keeps ≥ 2 tokens)."""
  rng = np.random.default_rng(seed)
  src = rng.integers(3, VOCAB, (rows, length)).astype(np.int32)
  lengths = rng.integers(2, length + 1, rows)
  src[np.arange(length)[None, :] >= lengths[:, None]] = 0
  return src


@pytest.fixture(scope="module")
def decoder():
  """(model, variables, decode_fn): a tiny random encoder-decoder and its compiled greedy decoder (shared by the
  tests, so the decoder compiles once)."""
  # Untied readout: with tied embeddings a random model mostly repeats its last input token; an untied head gives
  # rows that stop with EOS at different steps and rows that never do, so the reference exercises both.
  config = tiny.model_config(
      vocab_size=VOCAB, num_decoder_layers=2, d_model=16, d_ff=32, tie_embeddings=False, scale_embeddings=True
  )
  model = get_model(config)
  src = jnp.asarray(_sources())
  return model, model.init(jax.random.key(0), {"inputs": src, "targets": src}), make_greedy_decode(model, MAX_LENGTH)


def reference_greedy(model, variables, sources_BxS, max_length):
  """Greedy decoding without a target buffer or cache: the sources are encoded, then at each step the decoder runs
  from scratch on the prefix decoded so far, shifted right behind BOS = 0 (a prefix that grows by one column per
  step, all of it valid), and the argmax of its last position is appended. Each row is then cut after its first
  EOS and padded with 0."""
  sources = jnp.asarray(sources_BxS)
  encoded = jax.jit(lambda v, src: model.apply(v, src, method=model.encode))(variables, sources)  # source only
  forward = jax.jit(
      lambda v, dec: model.apply(
          v, dec, jnp.ones(dec.shape, bool), encoded_BxSxD=encoded, inputs_BxS=sources, method=model.decode
      )
  )
  prefix_BxL = np.zeros((sources.shape[0], 0), np.int32)
  for _ in range(max_length):
    decoder_in = np.concatenate([np.zeros((len(prefix_BxL), 1), np.int32), prefix_BxL], axis=1)  # BOS + prefix
    logits_BxLxV = np.asarray(forward(variables, jnp.asarray(decoder_in)))
    prefix_BxL = np.concatenate([prefix_BxL, logits_BxLxV[:, -1].argmax(-1)[:, None].astype(np.int32)], axis=1)
  out = []
  for row in prefix_BxL.tolist():
    row = row[: row.index(EOS_ID) + 1] if EOS_ID in row else row
    out.append(row + [0] * (max_length - len(row)))
  return np.asarray(out)


@pytest.mark.slow
def test_greedy_decode_equals_a_cache_free_reference_token_for_token(decoder):
  model, variables, decode = decoder
  src = _sources()
  ours = np.asarray(decode(variables, jnp.asarray(src)))
  expected = reference_greedy(model, variables, src, MAX_LENGTH)
  assert ours.dtype == np.int32 and ours.shape == (len(src), MAX_LENGTH)
  np.testing.assert_array_equal(ours, expected)
  # The case exercises both endings: rows that emit EOS before the buffer is full (then only padding) and rows that
  # never emit it.
  stopped = [EOS_ID in row[:-1] for row in expected.tolist()]
  assert 0 < sum(stopped) < len(expected), expected


@pytest.mark.parametrize("favoured,expected", [(EOS_ID, [EOS_ID] + [0] * (MAX_LENGTH - 1)), (5, [5] * MAX_LENGTH)])
def test_greedy_decode_closed_form_constant_logits(decoder, favoured, expected):
  """A zero readout kernel and a readout bias peaked on one token make every position's logits equal to the bias:
  greedy decoding must emit that token at every step, or EOS once followed by padding."""
  _, variables, decode = decoder
  params = dict(variables["params"])
  params["head"] = {
      "kernel": jnp.zeros_like(params["head"]["kernel"]),
      "bias": jnp.zeros(VOCAB).at[favoured].set(1.0),
  }
  out = np.asarray(decode({"params": params}, jnp.asarray(_sources())))
  np.testing.assert_array_equal(out, np.asarray([expected] * len(out)))
