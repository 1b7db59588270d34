"""The `embedded` task: a synthetic translation pair with real syntactic structure, generated offline.

Source language (English words, SVO). A probabilistic grammar, sampled top-down:

    S      -> Clause (Conj Clause){0,2}          P(another clause) = 0.25
    Clause -> NP V_intr PP? | NP V_trans NP PP?  P(transitive) = 0.6, P(clause PP) = 0.3
    NP     -> Det Adj{0,2} Noun PP?              P(#adj = 0, 1, 2) = (0.5, 0.35, 0.15), P(PP) = 0.25 (depth <= 2)
    PP     -> Prep NP

Sentences are resampled until they have MIN_WORDS..MAX_WORDS (5..30) words. Target language (invented words from a
seeded syllable generator, SOV): the same tree linearised by different rules:

    Clause -> NP_subj NP_obj? PP? V      the verb moves to the END of its clause (so a sentence ends in a verb)
    NP     -> Det[g] Noun Adj[g]* PP?    adjectives FOLLOW the noun, in source order
    PP     -> Prep NP

Every noun has a fixed gender g in {0, 1, 2} (seeded, balanced) that its determiner and adjectives agree with; all other
words map one-to-one. The translation is a *function of the source string* (no hidden tree): a PP after a transitive
object lands in the same target position whether it hangs off the object NP or the clause, and adjectives sit right
before their noun (`tests/test_data_grammar.py` checks it with an independent string-level translator).
Determinism: the lexicon (invented words, genders) depends only on `seed`; the split streams come from Python's
`random.Random` seeded with (seed, stream) (scalar, sequential sampling; stable across Python versions for integer
seeds). Validation and test sentences seen earlier are skipped, so the splits are disjoint as strings.
"""

import dataclasses
import random

MIN_WORDS = 5
MAX_WORDS = 30
NUM_GENDERS = 3

DETERMINERS = ("the", "a", "every", "this")
NOUNS = (
    "dog",
    "cat",
    "bird",
    "horse",
    "fish",
    "child",
    "teacher",
    "farmer",
    "doctor",
    "king",
    "queen",
    "girl",
    "boy",
    "woman",
    "man",
    "student",
    "garden",
    "house",
    "river",
    "forest",
    "table",
    "chair",
    "window",
    "door",
    "car",
    "boat",
    "city",
    "village",
    "mountain",
    "road",
    "tree",
    "flower",
    "book",
    "letter",
    "song",
    "apple",
    "bread",
    "bridge",
    "castle",
    "lamp",
)
ADJECTIVES = (
    "big",
    "small",
    "old",
    "young",
    "red",
    "blue",
    "green",
    "happy",
    "sad",
    "quiet",
    "loud",
    "fast",
    "slow",
    "tall",
    "short",
    "bright",
    "dark",
    "warm",
    "cold",
    "heavy",
    "clever",
    "brave",
    "strange",
    "gentle",
    "angry",
    "hungry",
    "tired",
    "rich",
    "poor",
    "proud",
)
INTRANSITIVE_VERBS = (
    "sleeps",
    "runs",
    "sings",
    "waits",
    "laughs",
    "falls",
    "swims",
    "dances",
    "cries",
    "smiles",
    "jumps",
    "works",
    "rests",
    "shines",
    "grows",
)
TRANSITIVE_VERBS = (
    "sees",
    "likes",
    "finds",
    "takes",
    "carries",
    "follows",
    "watches",
    "helps",
    "calls",
    "paints",
    "builds",
    "opens",
    "holds",
    "pushes",
    "knows",
    "visits",
    "feeds",
    "catches",
    "draws",
    "remembers",
)
PREPOSITIONS = ("in", "on", "near", "under", "behind", "with", "without", "beside")
CONJUNCTIONS = ("and", "but")

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
# Gender endings of inflected target words (determiners, adjectives).
_GENDER_SUFFIXES = ("o", "a", "u")

_STREAMS = {"train": 0, "validation": 1, "test": 2}


@dataclasses.dataclass(frozen=True)
class Lexicon:
  """Word tables of the pair. Inflected entries are tuples indexed by gender.

  Attributes:
    noun: source noun -> target noun.
    gender: source noun -> its gender in {0, 1, 2}.
    adjective: source adjective -> (target form for gender 0, 1, 2).
    determiner: source determiner -> (target form for gender 0, 1, 2).
    verb: source verb (transitive or intransitive) -> target verb.
    preposition: source preposition -> target preposition.
    conjunction: source conjunction -> target conjunction.
  """

  noun: dict[str, str]
  gender: dict[str, int]
  adjective: dict[str, tuple[str, ...]]
  determiner: dict[str, tuple[str, ...]]
  verb: dict[str, str]
  preposition: dict[str, str]
  conjunction: dict[str, str]

  def source_words(self) -> list[str]:
    """All source-language words, sorted."""
    return sorted([*self.noun, *self.adjective, *self.determiner, *self.verb, *self.preposition, *self.conjunction])

  def target_words(self) -> list[str]:
    """All target-language word forms, sorted."""
    words = [*self.noun.values(), *self.verb.values(), *self.preposition.values(), *self.conjunction.values()]
    for forms in [*self.adjective.values(), *self.determiner.values()]:
      words.extend(forms)
    return sorted(words)


def make_lexicon(seed: int) -> Lexicon:
  """Invents the target vocabulary and the noun genders.

  Args:
    seed: language seed; the same seed always gives the same lexicon.

  Returns:
    The Lexicon. Target words are pairwise distinct and disjoint from the source words.
  """
  rng = random.Random(seed * 16 + 15)
  taken = set(NOUNS + ADJECTIVES + DETERMINERS + INTRANSITIVE_VERBS + TRANSITIVE_VERBS + PREPOSITIONS + CONJUNCTIONS)

  def fresh(num_syllables: int, final_consonant: bool) -> str:
    while True:
      word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(num_syllables))
      if final_consonant:
        word += rng.choice(_CONSONANTS)
      # Inflected stems end in a consonant, so stem+suffix never equals another stem+suffix by accident;
      # all forms are reserved at once.
      forms = [word + s for s in _GENDER_SUFFIXES] if final_consonant else [word]
      if not taken.intersection(forms):
        taken.update(forms)
        return word

  def inflect(stem: str) -> tuple[str, ...]:
    return tuple(stem + s for s in _GENDER_SUFFIXES)

  noun = {n: fresh(rng.choice((2, 3)), False) for n in NOUNS}
  # Balanced genders: a seeded permutation of (0, 1, 2, 0, 1, 2, ...).
  genders = [i % NUM_GENDERS for i in range(len(NOUNS))]
  rng.shuffle(genders)
  adjective = {a: inflect(fresh(2, True)) for a in ADJECTIVES}
  determiner = {d: inflect(fresh(1, True)) for d in DETERMINERS}
  verb = {v: fresh(rng.choice((2, 3)), False) for v in INTRANSITIVE_VERBS + TRANSITIVE_VERBS}
  preposition = {p: fresh(1, False) for p in PREPOSITIONS}
  conjunction = {c: fresh(1, False) for c in CONJUNCTIONS}
  return Lexicon(
      noun=noun,
      gender=dict(zip(NOUNS, genders)),
      adjective=adjective,
      determiner=determiner,
      verb=verb,
      preposition=preposition,
      conjunction=conjunction,
  )


# A parse tree is nested tuples: NP = ("np", det, adjs, noun, pp | None); PP = ("pp", prep, NP);
# Clause = ("clause", subj NP, verb, obj NP | None, pp | None); S = list of (conj | None, Clause).


def _sample_np(rng: random.Random, depth: int):
  num_adj = rng.choices((0, 1, 2), weights=(0.5, 0.35, 0.15))[0]
  adjs = tuple(rng.sample(ADJECTIVES, num_adj))
  pp = _sample_pp(rng, depth + 1) if depth < 2 and rng.random() < 0.25 else None
  return ("np", rng.choice(DETERMINERS), adjs, rng.choice(NOUNS), pp)


def _sample_pp(rng: random.Random, depth: int):
  return ("pp", rng.choice(PREPOSITIONS), _sample_np(rng, depth))


def _sample_clause(rng: random.Random):
  subj = _sample_np(rng, 0)
  if rng.random() < 0.6:
    verb, obj = rng.choice(TRANSITIVE_VERBS), _sample_np(rng, 0)
  else:
    verb, obj = rng.choice(INTRANSITIVE_VERBS), None
  pp = _sample_pp(rng, 1) if rng.random() < 0.3 else None
  return ("clause", subj, verb, obj, pp)


def _sample_sentence(rng: random.Random):
  clauses = [(None, _sample_clause(rng))]
  while len(clauses) < 3 and rng.random() < 0.25:
    clauses.append((rng.choice(CONJUNCTIONS), _sample_clause(rng)))
  return clauses


def _source_np(np_) -> list[str]:
  _, det, adjs, noun, pp = np_
  return [det, *adjs, noun, *(_source_pp(pp) if pp else [])]


def _source_pp(pp) -> list[str]:
  return [pp[1], *_source_np(pp[2])]


def _target_np(np_, lex: Lexicon) -> list[str]:
  _, det, adjs, noun, pp = np_
  g = lex.gender[noun]
  return [
      lex.determiner[det][g],
      lex.noun[noun],
      *(lex.adjective[a][g] for a in adjs),
      *(_target_pp(pp, lex) if pp else []),
  ]


def _target_pp(pp, lex: Lexicon) -> list[str]:
  return [lex.preposition[pp[1]], *_target_np(pp[2], lex)]


def _linearize(sentence, lex: Lexicon) -> tuple[list[str], list[str]]:
  source, target = [], []
  for conj, (_, subj, verb, obj, pp) in sentence:
    if conj is not None:
      source.append(conj)
      target.append(lex.conjunction[conj])
    source += _source_np(subj) + [verb] + (_source_np(obj) if obj else []) + (_source_pp(pp) if pp else [])
    # SOV: subject, object, clause PP, then the verb last.
    target += (
        _target_np(subj, lex)
        + (_target_np(obj, lex) if obj else [])
        + (_target_pp(pp, lex) if pp else [])
        + [lex.verb[verb]]
    )
  return source, target


def sample_pair(rng: random.Random, lex: Lexicon) -> tuple[str, str]:
  """Samples one (source, target) sentence pair with MIN_WORDS..MAX_WORDS source words."""
  while True:
    source, target = _linearize(_sample_sentence(rng), lex)
    if MIN_WORDS <= len(source) <= MAX_WORDS:
      return " ".join(source), " ".join(target)


def generate_splits(seed: int, num_train: int, num_eval: int) -> dict[str, list[tuple[str, str]]]:
  """Generates the train, validation and test pairs of the embedded task.

  Args:
    seed: language and sampling seed.
    num_train: number of training pairs (duplicates allowed, as in natural data).
    num_eval: number of validation pairs, and of test pairs; all distinct and absent from train.

  Returns:
    {"train": [...], "validation": [...], "test": [...]} lists of (source, target) strings.
  """
  lex = make_lexicon(seed)
  rng = random.Random(seed * 16 + _STREAMS["train"])
  splits = {"train": [sample_pair(rng, lex) for _ in range(num_train)]}
  seen = {source for source, _ in splits["train"]}
  for split in ("validation", "test"):
    rng = random.Random(seed * 16 + _STREAMS[split])
    pairs = []
    for _ in range(1000 * num_eval):  # Bounded: the grammar has ~1e20 sentences, collisions are rare.
      if len(pairs) == num_eval:
        break
      source, target = sample_pair(rng, lex)
      if source not in seen:
        seen.add(source)
        pairs.append((source, target))
    splits[split] = pairs
  return splits
