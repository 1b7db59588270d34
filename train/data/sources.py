"""Registry of text sources, keyed by `config.data.name`.

A loader `(data_config, workdir, dataset) -> corpus.Corpus` reads one source. Names: 'embedded' (synthetic,
generated in memory), 'multi30k' (raw .gz files), and the family 'tfds:<name>' (any TFDS dataset prepared as
ArrayRecord; `dataset` is then the part after 'tfds:').
"""

from collections.abc import Callable

import ml_collections

from train.data import grammar, multi30k, tfds_source, tokenizers
from train.data.config import VALID_NAMES
from train.data.corpus import Corpus, translation_examples


def load_embedded(config: ml_collections.ConfigDict, workdir: str, dataset: str) -> Corpus:
  """The synthetic pair of grammar.py, generated in memory (no files, no download)."""
  del workdir, dataset
  splits = grammar.generate_splits(config.embedded.seed, config.embedded.num_train, config.embedded.num_eval)
  lex = grammar.make_lexicon(config.embedded.seed)
  tokenizer = tokenizers.WordTokenizer(lex.source_words() + lex.target_words())
  return Corpus(
      task="translation",
      tokenizer=tokenizer,
      train=translation_examples(splits["train"]),
      eval=translation_examples(splits[config.eval_split]),
  )


def load_multi30k(config: ml_collections.ConfigDict, workdir: str, dataset: str) -> Corpus:
  """Multi30k task 1 from raw .gz files, with a joint SentencePiece model cached beside them or in workdir."""
  del dataset
  return multi30k.load(config, workdir)


SOURCES: dict[str, Callable[[ml_collections.ConfigDict, str, str], Corpus]] = {
    "embedded": load_embedded,
    "multi30k": load_multi30k,
    "tfds": tfds_source.load,
}


def get_source(name: str) -> tuple[Callable[[ml_collections.ConfigDict, str, str], Corpus], str]:
  """Returns (loader, dataset argument for the loader) for `config.data.name`.

  Raises:
    ValueError: naming the bad name and the valid choices.
  """
  if isinstance(name, str) and name.startswith("tfds:") and len(name) > len("tfds:"):
    return SOURCES["tfds"], name[len("tfds:") :]
  if name in SOURCES and name != "tfds":
    return SOURCES[name], name
  raise ValueError(f"config.data.name={name!r}; valid: {VALID_NAMES}.")
