"""`Corpus`: what every source hands to the pipeline (text splits, task, tokenizer).

Splits are lazy random-access grain MapDatasets of text examples: `{"source": str, "target": str}` for
translation and `{"target": str}` for language modelling. Everything after text (tokenizing, filtering,
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
