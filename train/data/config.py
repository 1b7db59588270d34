"""The `config.data` subtree: every key the data layer reads, and its validation.

`validate()` runs in `build()` before anything is read or trained; each error names the key, the bad value
and the valid choices.
"""

import ml_collections

LENGTH_POLICIES = ("drop", "truncate")
MULTI30K_LANGS = ("de", "en")
EVAL_SPLITS_BUILTIN = ("validation", "test")


def default_data_config() -> ml_collections.ConfigDict:
  """Returns the data config with every key and its default."""
  c = ml_collections.ConfigDict()
  c.name = "embedded"  # Source: 'embedded' (synthetic, offline), 'multi30k', or 'tfds:<name>' e.g. 'tfds:lm1b'.
  c.dir = ""  # multi30k: folder holding {train,val,test_2016_flickr}.{de,en}.gz (read only is fine).
  c.tfds_data_dir = ""  # tfds: data_dir with the dataset prepared as ArrayRecord ('' = tfds default).
  c.source_lang = "de"  # Translation source language (multi30k: 'de'|'en'; tfds: a key of the feature dict).
  c.target_lang = "en"  # Translation target language (ignored by 'embedded', whose direction is fixed).
  c.lm_text_field = "text"  # tfds LM datasets (e.g. lm1b): the text feature; gives {"targets"} batches.
  c.train_split = "train"  # tfds split spec for training (e.g. 'train[:10%]'); others must use 'train'.
  c.eval_split = "validation"  # Eval split: 'validation'|'test' (multi30k: val|test_2016_flickr); tfds: any.
  c.vocab_size = 8000  # SentencePiece vocab (joint over both languages); 'embedded' uses its word lexicon.
  c.spm_max_corpus_chars = 10_000_000  # Characters of training text fed to SentencePiece (flax wmt's cap).
  c.batch_size = 64  # GLOBAL training batch; each of process_count processes gets batch_size/process_count.
  c.eval_batch_size = 64  # GLOBAL eval batch, split across processes like batch_size.
  c.max_source_length = 32  # Source tokens incl. EOS; batches are padded to exactly this (static shapes).
  c.max_target_length = 32  # Target tokens incl. EOS (LM: the sequence length).
  c.length_policy = "drop"  # Longer examples: 'drop' them, or 'truncate' to the limit (keeping a final EOS).
  c.pack = False  # Pack several examples per row (grain first-fit) with *_segmentation / *_position keys.
  c.shuffle_seed = 0  # Seed of the per-epoch shuffle of the training stream.
  c.read_threads = 0  # grain reader threads; 0 = read in the main thread (data sit in memory).
  c.num_eval_examples = 256  # Text pairs returned by eval_examples() for BLEU / exact match.
  c.max_eval_loss_examples = -1  # Cap on validation examples in eval_batches() (-1 = the whole split).
  c.embedded = ml_collections.ConfigDict()
  c.embedded.seed = 0  # Language (lexicon, genders) and sampling seed of the synthetic pair.
  c.embedded.num_train = 50_000  # Synthetic training pairs.
  c.embedded.num_eval = 1_000  # Synthetic validation pairs (and test pairs), disjoint from train.
  return c


def _positive(config, key: str, minimum: int = 1):
  value = config
  for part in key.split("."):
    value = value[part]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise ValueError(f"config.data.{key}={value!r} must be an integer >= {minimum}.")


def validate(config: ml_collections.ConfigDict, process_count: int, valid_names: str) -> None:
  """Raises ValueError naming the key, value and choices if `config` is not usable.

  Args:
    config: the data config.
    process_count: number of JAX processes the global batches are split over.
    valid_names: a printable list of valid `name` values, for the error message.
  """
  missing = set(default_data_config().keys()) - set(config.keys())
  if missing:
    raise ValueError(f"config.data lacks keys {sorted(missing)}; start from default_data_config().")
  for key in (
      "batch_size",
      "eval_batch_size",
      "vocab_size",
      "spm_max_corpus_chars",
      "embedded.num_train",
      "embedded.num_eval",
  ):
    _positive(config, key)
  for key in ("max_source_length", "max_target_length"):
    _positive(config, key, minimum=2)  # Room for at least one token and the EOS.
  for key in ("num_eval_examples", "read_threads", "embedded.seed", "shuffle_seed"):
    _positive(config, key, minimum=0)
  if (
      not isinstance(config.max_eval_loss_examples, int)
      or config.max_eval_loss_examples < -1
      or (config.max_eval_loss_examples == 0)
  ):
    raise ValueError(
        f"config.data.max_eval_loss_examples={config.max_eval_loss_examples!r} must be -1 (all) "
        "or a positive integer."
    )
  if config.length_policy not in LENGTH_POLICIES:
    raise ValueError(f"config.data.length_policy={config.length_policy!r}; valid: {LENGTH_POLICIES}.")
  for key in ("batch_size", "eval_batch_size"):
    if config[key] % process_count:
      raise ValueError(
          f"config.data.{key}={config[key]} is not divisible by process_count={process_count}; "
          "it is the GLOBAL batch size."
      )
  name = config.name
  if not isinstance(name, str) or not (
      name in ("embedded", "multi30k") or (name.startswith("tfds:") and len(name) > 5)
  ):
    raise ValueError(f"config.data.name={name!r}; valid: {valid_names}.")
  if not name.startswith("tfds:"):
    if config.train_split != "train":
      raise ValueError(
          f"config.data.train_split={config.train_split!r}; {name} only has 'train' "
          "(split specs are for tfds sources)."
      )
    if config.eval_split not in EVAL_SPLITS_BUILTIN:
      raise ValueError(f"config.data.eval_split={config.eval_split!r}; valid for {name}: " f"{EVAL_SPLITS_BUILTIN}.")
  if name == "multi30k":
    for key in ("source_lang", "target_lang"):
      if config[key] not in MULTI30K_LANGS:
        raise ValueError(f"config.data.{key}={config[key]!r}; valid for multi30k: {MULTI30K_LANGS}.")
    if config.source_lang == config.target_lang:
      raise ValueError(f"config.data.source_lang and target_lang are both {config.source_lang!r}.")
    if not config.dir:
      raise ValueError("config.data.dir is empty; multi30k needs the folder with its .gz files.")
