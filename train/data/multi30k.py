"""Multi30k task 1 (Elliott et al. 2016) from its raw gzipped files, and its joint SentencePiece model.

Files in `config.data.dir`: `{train,val,test_2016_flickr}.{de,en}.gz`, one sentence per line, line i of
`.de` translating line i of `.en` (29,000 / 1,014 / 1,000 pairs). `eval_split` 'validation' reads `val`,
'test' reads `test_2016_flickr`. Direction is `source_lang -> target_lang` (De->En by default).

The tokenizer is one SentencePiece model over both languages of the train split (so it does not depend on
the direction), cached as `spm_<key>.model` in `data.tokenizer_dir` when set, else in `config.data.dir` if that folder
is writable, else in `<workdir>/tokenizer/`. The key hashes the bytes of the two train files, `vocab_size` and
`spm_max_corpus_chars`, so edited data or another vocab never reuse a stale model.
"""

import gzip
import hashlib
import os

import ml_collections

from train.data import tokenizers
from train.data.corpus import Corpus, translation_examples

SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


class MissingData(FileNotFoundError, ValueError):
  """A data folder or split file that is not there: a bad input (main.py: one line, exit 2), and a
  FileNotFoundError."""


def _path(data_dir: str, split: str, lang: str) -> str:
  if not os.path.isdir(data_dir):
    raise MissingData(
        f"config.data.dir={data_dir!r}: no such directory (multi30k needs "
        "{train,val,test_2016_flickr}.{de,en}.gz there)."
    )
  path = os.path.join(data_dir, f"{SPLIT_FILES[split]}.{lang}.gz")
  if not os.path.isfile(path):
    raise MissingData(
        f"config.data.dir={data_dir!r}: split file {path!r} is missing " f"(split {split!r}, language {lang!r})."
    )
  return path


def _read_lines(path: str) -> list[str]:
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def read_split(data_dir: str, split: str, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
  """Reads one split as (source, target) pairs in file order.

  Args:
    data_dir: `config.data.dir`.
    split: 'train', 'validation' or 'test'.
    source_lang: 'de' or 'en'.
    target_lang: the other one.

  Returns:
    The list of (source sentence, target sentence).

  Raises:
    FileNotFoundError: the directory or a split file is missing (naming config.data.dir and the path).
    ValueError: the two files of the split have different line counts.
  """
  source_path, target_path = _path(data_dir, split, source_lang), _path(data_dir, split, target_lang)
  source, target = _read_lines(source_path), _read_lines(target_path)
  for path, lines in ((source_path, source), (target_path, target)):
    if not lines:
      raise ValueError(f"config.data.dir={data_dir!r}: {path} has 0 lines; the split {split!r} needs its sentences")
  if len(source) != len(target):
    raise ValueError(
        f"config.data.dir={data_dir!r}: {source_path} has {len(source)} lines but "
        f"{target_path} has {len(target)}; the files of a split must be line-aligned."
    )
  return list(zip(source, target))


def check(data_dir: str, source_lang: str, target_lang: str) -> None:
  """Every split of the folder is there, non-empty and line-aligned (ValueError naming the file and its line count
  otherwise): what main.py checks before any compute."""
  for split in SPLIT_FILES:
    read_split(data_dir, split, source_lang, target_lang)


def tokenizer(config: ml_collections.ConfigDict, workdir: str) -> tuple[tokenizers.SentencePieceTokenizer, str]:
  """Loads or trains the joint SentencePiece model (see the module docstring for the cache).

  Returns:
    (tokenizer, path of the cached model).
  """
  langs = sorted((config.source_lang, config.target_lang))
  digest = hashlib.sha256()
  for lang in langs:
    with open(_path(config.dir, "train", lang), "rb") as f:
      digest.update(f.read())
  key = tokenizers.corpus_key("multi30k", digest.hexdigest(), config.vocab_size, config.spm_max_corpus_chars)

  def texts():
    # Interleave the languages so a corpus cap keeps both of them.
    for pair in read_split(config.dir, "train", langs[0], langs[1]):
      yield from pair

  return tokenizers.load_or_train(
      texts,
      key=key,
      vocab_size=config.vocab_size,
      max_corpus_chars=config.spm_max_corpus_chars,
      cache_dirs=[
          *([config.tokenizer_dir] if config.tokenizer_dir else []),
          config.dir,
          os.path.join(workdir, "tokenizer"),
      ],
  )


def load(config: ml_collections.ConfigDict, workdir: str) -> Corpus:
  """The Multi30k corpus for `config.data` (splits read eagerly: they are small)."""
  train = read_split(config.dir, "train", config.source_lang, config.target_lang)
  eval_pairs = read_split(config.dir, config.eval_split, config.source_lang, config.target_lang)
  tok, _ = tokenizer(config, workdir)
  return Corpus(
      task="translation", tokenizer=tok, train=translation_examples(train), eval=translation_examples(eval_pairs)
  )
