"""The embedded synthetic pair: grammar properties, an independent string-level translator, determinism."""

import collections
import random

import numpy as np
import pytest

from train.data import grammar, tokenizers

SEED = 0
SPLITS = grammar.generate_splits(SEED, num_train=3000, num_eval=300)
LEX = grammar.make_lexicon(SEED)

# Inverse tables of the target language: word -> (category, gender or None).
TARGET_CATEGORY = {}
for _src, _tgt in LEX.noun.items():
  TARGET_CATEGORY[_tgt] = ("noun", LEX.gender[_src])
for _table, _cat in ((LEX.adjective, "adj"), (LEX.determiner, "det")):
  for _forms in _table.values():
    for _g, _form in enumerate(_forms):
      TARGET_CATEGORY[_form] = (_cat, _g)
for _table, _cat in ((LEX.verb, "verb"), (LEX.preposition, "prep"), (LEX.conjunction, "conj")):
  for _tgt in _table.values():
    TARGET_CATEGORY[_tgt] = (_cat, None)

ALL_PAIRS = SPLITS["train"] + SPLITS["validation"] + SPLITS["test"]


def _clauses(words, conj_words):
  clause, out = [], []
  for w in words:
    if w in conj_words:
      out.append(clause)
      clause = []
    else:
      clause.append(w)
  return out + [clause]


def reference_translation(source: str) -> str:
  """Independent string-level translator: per clause move the verb to the end; per noun phrase put the
  adjectives after the noun and inflect determiner and adjectives by the noun's gender."""
  out = []
  conjunctions = [w for w in source.split() if w in grammar.CONJUNCTIONS]
  for i, clause in enumerate(_clauses(source.split(), set(grammar.CONJUNCTIONS))):
    if i:
      out.append(LEX.conjunction[conjunctions[i - 1]])
    verbs = [w for w in clause if w in LEX.verb]
    assert len(verbs) == 1, clause
    rest = [w for w in clause if w not in LEX.verb]
    words, j = [], 0
    while j < len(rest):
      w = rest[j]
      if w in LEX.preposition:
        words.append(LEX.preposition[w])
        j += 1
        continue
      det, j = w, j + 1
      adjs = []
      while rest[j] in LEX.adjective:
        adjs.append(rest[j])
        j += 1
      noun, j = rest[j], j + 1
      g = LEX.gender[noun]
      words += [LEX.determiner[det][g], LEX.noun[noun]] + [LEX.adjective[a][g] for a in adjs]
    out += words + [LEX.verb[verbs[0]]]
  return " ".join(out)


def test_translation_equals_independent_string_rules():
  mismatches = [(s, t) for s, t in ALL_PAIRS if reference_translation(s) != t]
  assert not mismatches, mismatches[:3]


def test_source_lengths_within_5_to_30_words_and_target_same_length():
  lengths = np.array([len(s.split()) for s, _ in ALL_PAIRS])
  assert lengths.min() >= grammar.MIN_WORDS == 5
  assert lengths.max() <= grammar.MAX_WORDS == 30
  # The range is actually used, not just a narrow band.
  assert lengths.min() <= 6 and lengths.max() >= 25
  assert all(len(s.split()) == len(t.split()) for s, t in ALL_PAIRS)


def test_every_clause_ends_in_its_only_verb():
  for _, target in ALL_PAIRS:
    words = target.split()
    assert TARGET_CATEGORY[words[-1]][0] == "verb"
    for clause in _clauses(words, set(LEX.conjunction.values())):
      cats = [TARGET_CATEGORY[w][0] for w in clause]
      assert cats[-1] == "verb" and cats.count("verb") == 1, clause


def test_adjectives_follow_nouns_and_agree_in_gender():
  num_adjectives = 0
  for _, target in ALL_PAIRS:
    words = target.split()
    for i, w in enumerate(words):
      cat, g = TARGET_CATEGORY[w]
      if cat == "noun":
        # Determiner right before the noun, in the noun's gender.
        assert TARGET_CATEGORY[words[i - 1]] == ("det", g), (target, w)
        j = i + 1
        while j < len(words) and TARGET_CATEGORY[words[j]][0] == "adj":
          assert TARGET_CATEGORY[words[j]][1] == g, (target, words[j])
          j += 1
          num_adjectives += 1
      elif cat == "adj":
        # An adjective is always preceded by its noun or a preceding adjective of the same phrase.
        assert TARGET_CATEGORY[words[i - 1]][0] in ("noun", "adj"), target
      elif cat == "det":
        assert TARGET_CATEGORY[words[i + 1]][0] == "noun", target
  assert num_adjectives > 1000  # The property was exercised.


def test_source_adjectives_precede_nouns():
  for source, _ in ALL_PAIRS:
    words = source.split()
    for i, w in enumerate(words):
      if w in LEX.adjective:
        assert words[i + 1] in LEX.adjective or words[i + 1] in LEX.noun


def test_genders_balanced_and_seeded():
  counts = collections.Counter(LEX.gender.values())
  assert sorted(counts.values()) == [13, 13, 14]  # 40 nouns over 3 genders.
  other = grammar.make_lexicon(SEED + 1)
  assert other.gender != LEX.gender and other.noun != LEX.noun
  assert grammar.make_lexicon(SEED) == LEX


def test_vocabulary_sizes_and_disjointness():
  source, target = LEX.source_words(), LEX.target_words()
  assert len(source) == len(set(source)) == 4 + 40 + 30 + 15 + 20 + 8 + 2
  # Inflected: 30 adjectives and 4 determiners have 3 forms each.
  assert len(target) == len(set(target)) == 40 + 35 + 8 + 2 + 3 * 30 + 3 * 4
  assert not set(source) & set(target)
  tok = tokenizers.WordTokenizer(source + target)
  assert tok.vocab_size == 3 + 119 + 187


def test_deterministic_per_seed():
  again = grammar.generate_splits(SEED, num_train=3000, num_eval=300)
  assert again == SPLITS
  other = grammar.generate_splits(SEED + 1, num_train=50, num_eval=10)
  assert other["train"] != SPLITS["train"][:50]


def test_eval_splits_disjoint_from_train_and_each_other():
  train = {s for s, _ in SPLITS["train"]}
  val = [s for s, _ in SPLITS["validation"]]
  test = [s for s, _ in SPLITS["test"]]
  assert len(val) == len(set(val)) == 300 and len(test) == len(set(test)) == 300
  assert not train & set(val) and not train & set(test) and not set(val) & set(test)


def test_sampler_rates_match_specification():
  # Before the 5..30 length filter: P(transitive) = 0.6, P(clause PP) = 0.3, P(>= 2 clauses) = 0.25,
  # P(#adj = 0, 1, 2) = (0.5, 0.35, 0.15). n = 6000 draws: 4 standard errors are <= 0.026.
  rng = random.Random(123)
  n = 6000
  clauses = [grammar._sample_clause(rng) for _ in range(n)]
  assert np.mean([c[3] is not None for c in clauses]) == pytest.approx(0.6, abs=0.026)
  assert np.mean([c[4] is not None for c in clauses]) == pytest.approx(0.3, abs=0.026)
  num_adj = np.array([len(c[1][2]) for c in clauses])
  assert [np.mean(num_adj == k) for k in range(3)] == pytest.approx([0.5, 0.35, 0.15], abs=0.026)
  sentences = [grammar._sample_sentence(rng) for _ in range(n)]
  assert np.mean([len(s) >= 2 for s in sentences]) == pytest.approx(0.25, abs=0.026)
  assert max(len(s) for s in sentences) == 3


def test_word_tokenizer_round_trip_and_reserved_ids():
  tok = tokenizers.WordTokenizer(LEX.source_words() + LEX.target_words())
  for source, target in SPLITS["validation"][:50]:
    for text in (source, target):
      ids = tok.encode(text)
      assert min(ids) >= 3 and tokenizers.EOS_ID not in ids
      assert tok.decode(ids + [tokenizers.EOS_ID, 5, 6, 0]) == text  # Stops at EOS.
      assert tok.decode([0] + ids + [0, 0]) == text  # Skips padding.
  assert tok.encode("the zzz dog") == [tok.encode("the")[0], tokenizers.UNK_ID, tok.encode("dog")[0]]
