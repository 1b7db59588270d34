"""`Corpus`: what every source hands to the pipeline (text splits, task, tokenizer).

Splits are lazy random-access grain MapDatasets of text examples: `{"source": str, "target": str}` for
translation and `{"target": str}` for language modelling; `one_side` turns a translation corpus into the language
modelling corpus of one of its sides (`config.data.lm_side`). Everything after text (tokenizing, filtering,
shuffling, sharding, padding, packing, batching) is pipeline.py's job, the same for every source.
"""

import dataclasses
from collections.abc import Sequence

import grain

TASKS = ("translation", "lm")


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Text splits of one source.

  Attributes:
    task: 'translation' or 'lm'.
    tokenizer: a tokenizers.WordTokenizer or tokenizers.SentencePieceTokenizer.
    train: MapDataset of text examples of the training split.
    eval: MapDataset of text examples of the eval split (`config.eval_split`), in file order.
  """

  task: str
  tokenizer: object
  train: grain.MapDataset
  eval: grain.MapDataset


def translation_examples(pairs: Sequence[tuple[str, str]]) -> grain.MapDataset:
  """A MapDataset of {"source", "target"} dicts over in-memory (source, target) pairs."""
  return grain.MapDataset.source(pairs).map(lambda p: {"source": p[0], "target": p[1]})


LM_SIDES = ("source", "target")


def one_side(corpus: Corpus, side: str) -> Corpus:
  """The language-modelling corpus of one side of a translation corpus: `{"target": text}` examples of its `source`
  or `target` sentences, in the same order, with the same tokenizer (a joint one stays joint, so a cached
  SentencePiece model is reused). Lengths are then filtered and packing done on that side alone.

  Raises:
    ValueError: the corpus is not a translation corpus, or `side` is not one of LM_SIDES.
  """
  if side not in LM_SIDES:
    raise ValueError(f"config.data.lm_side={side!r} is invalid; valid: {['', *LM_SIDES]}")
  if corpus.task != "translation":
    raise ValueError(
        f"config.data.lm_side={side!r} is invalid (the source is a {corpus.task!r} corpus); valid: '' (it has no "
        "sides to choose from)"
    )
  pick = lambda example: {"target": example[side]}
  return dataclasses.replace(corpus, task="lm", train=corpus.train.map(pick), eval=corpus.eval.map(pick))
