"""TFDS sources ('tfds:<name>') read through `tfds.data_source`, i.e. ArrayRecord files, without TensorFlow.

The dataset must already be prepared in `config.data.tfds_data_dir` in the ArrayRecord (or Parquet) format;
nothing is downloaded here (`download=False`): without TensorFlow, TFDS cannot build most datasets, and the
project has no network besides package registries. The error for an unprepared dataset says how to prepare it.

Task detection from the features: if `source_lang` and `target_lang` are keys of the example dict (the
`tfds.features.Translation` of wmt*_translate, ...) it is translation; else if `lm_text_field` is a key (lm1b's
"text") it is language modelling with {"targets"} batches. Text arrives as bytes and is decoded as UTF-8.

Tokenizer: a SentencePiece model trained on the first `spm_max_corpus_chars` characters of the training
split (both languages interleaved for translation), cached in `<workdir>/tokenizer/` under a key hashing the
dataset's dataset_info.json (it records split sizes and shard lengths), the fields, vocab size and cap.
"""

import os

import grain
import ml_collections
import tensorflow_datasets as tfds

from train.data import tokenizers
from train.data.corpus import Corpus

_HOW_TO_PREPARE = (
    "Prepare it on a machine with TensorFlow: `tfds build {name} --data_dir={data_dir} "
    "--file_format=array_record`, then copy the folder {data_dir}/{base}/ here; or set "
    "config.data.tfds_data_dir to where it is prepared."
)


def _prepared_builder(name: str, data_dir: str | None):
  """The read-only builder of an already prepared dataset, or a FileNotFoundError saying how to prepare it."""
  shown_dir = data_dir or "~/tensorflow_datasets"
  try:
    builder = tfds.core.read_only_builder.builder_from_files(name, data_dir=data_dir)
  except tfds.core.registered.DatasetNotFoundError as e:
    raise FileNotFoundError(
        f"config.data.name='tfds:{name}' is not prepared in config.data.tfds_data_dir={shown_dir!r}. "
        + _HOW_TO_PREPARE.format(name=name, data_dir=shown_dir, base=name.split("/")[0])
    ) from e
  file_format = str(builder.info.file_format).lower()
  if "array_record" not in file_format and "parquet" not in file_format:
    raise ValueError(
        f"config.data.name='tfds:{name}' in {shown_dir!r} is stored as {file_format}, which has no random "
        "access. " + _HOW_TO_PREPARE.format(name=name, data_dir=shown_dir, base=name.split("/")[0])
    )
  return builder


def _check_split(builder, key: str, spec: str, name: str) -> None:
  base = spec.split("[")[0]
  if base not in builder.info.splits:
    raise ValueError(f"config.data.{key}={spec!r}: tfds:{name} has splits {sorted(builder.info.splits)}.")


def load(config: ml_collections.ConfigDict, workdir: str, name: str) -> Corpus:
  """Reads `tfds:<name>` as a Corpus.

  Args:
    config: the data config.
    workdir: the run's folder; the SentencePiece model is cached in workdir/tokenizer/.
    name: TFDS name, e.g. 'wmt14_translate/de-en' or 'lm1b'.

  Returns:
    The Corpus (lazy: examples are read from ArrayRecord when the pipeline asks for them).
  """
  data_dir = config.tfds_data_dir or None
  builder = _prepared_builder(name, data_dir)
  _check_split(builder, "train_split", config.train_split, name)
  _check_split(builder, "eval_split", config.eval_split, name)
  keys = set(builder.info.features.keys())
  if {config.source_lang, config.target_lang} <= keys:
    task, fields = "translation", (config.source_lang, config.target_lang)
  elif config.lm_text_field in keys:
    task, fields = "lm", (config.lm_text_field,)
  else:
    raise ValueError(
        f"tfds:{name} has features {sorted(keys)}: neither config.data.source_lang/target_lang="
        f"{config.source_lang!r}/{config.target_lang!r} nor config.data.lm_text_field="
        f"{config.lm_text_field!r}."
    )
  kwargs = {} if ":" in name else {"builder_kwargs": {"version": str(builder.version)}}

  def source(split):
    # version= makes tfds load from the prepared files rather than from dataset code (which may need TF).
    return tfds.data_source(name, split=split, data_dir=data_dir, download=False, **kwargs)

  def text(record) -> dict[str, str]:
    values = [record[f] for f in fields]
    values = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
    return dict(zip(("source", "target"), values)) if task == "translation" else {"target": values[0]}

  train_source = source(config.train_split)
  with open(os.path.join(builder.data_dir, "dataset_info.json"), "rb") as f:
    info_bytes = f.read()
  key = tokenizers.corpus_key(
      "tfds", name, info_bytes, config.train_split, fields, config.vocab_size, config.spm_max_corpus_chars
  )

  def texts():
    for i in range(len(train_source)):
      yield from text(train_source[i]).values()

  tokenizer, _ = tokenizers.load_or_train(
      texts,
      key=key,
      vocab_size=config.vocab_size,
      max_corpus_chars=config.spm_max_corpus_chars,
      cache_dirs=[*([config.tokenizer_dir] if config.tokenizer_dir else []), os.path.join(workdir, "tokenizer")],
  )
  return Corpus(
      task=task,
      tokenizer=tokenizer,
      train=grain.MapDataset.source(train_source).map(text),
      eval=grain.MapDataset.source(source(config.eval_split)).map(text),
  )
