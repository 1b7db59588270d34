"""The `config.data` subtree as a typed, checked `DataConfig`: every key the data layer reads.

`train.config.resolve` builds it once (then `check_processes(config, process_count)`) before anything is read or
trained; `build()` trusts it (and types a ConfigDict at its door: `validate`). Each error names the key, the bad value and
the valid choices.
"""

import dataclasses

from configs.schema import Section, as_section, contradiction, invalid

LENGTH_POLICIES = ("drop", "truncate")
LM_SIDES = ("", "source", "target")  # '' = the source's own task; corpus.one_side keeps one side of a translation
MULTI30K_LANGS = ("de", "en")
EVAL_SPLITS_BUILTIN = ("validation", "test")


VALID_NAMES = "'embedded', 'multi30k', 'tfds:<name>' (e.g. 'tfds:wmt14_translate/de-en', 'tfds:lm1b')"


@dataclasses.dataclass(frozen=True)
class EmbeddedConfig(Section):
  """`config.data.embedded`: the synthetic translation pair (train.data.grammar)."""

  KEY = "data.embedded"
  seed: int
  num_train: int
  num_eval: int


@dataclasses.dataclass(frozen=True)
class DataConfig(Section):
  """The `config.data` subtree, typed and checked (each key's meaning: configs/default.py). How the global batches
  split over processes is checked by `validate(config, process_count)`, which knows the count."""

  KEY = "data"
  name: str
  dir: str
  tfds_data_dir: str
  source_lang: str
  target_lang: str
  lm_text_field: str
  lm_side: str
  train_split: str
  eval_split: str
  vocab_size: int
  spm_max_corpus_chars: int
  tokenizer_dir: str
  batch_size: int
  eval_batch_size: int
  max_source_length: int
  max_target_length: int
  length_policy: str
  pack: bool
  shuffle_seed: int
  read_threads: int
  num_eval_examples: int
  max_eval_loss_examples: int
  embedded: EmbeddedConfig

  def __post_init__(self):
    _check_values(self)


# Every key of `config.data` (declared with its default and comment in configs/default.py); `embedded` is a subtree.
DATA_KEYS = tuple(f.name for f in dataclasses.fields(DataConfig))
EMBEDDED_KEYS = tuple(f.name for f in dataclasses.fields(EmbeddedConfig))


def _positive(config, key: str, minimum: int = 1):
  value = config
  for part in key.split("."):
    value = value[part]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise invalid(f"data.{key}", value, f"an integer >= {minimum}")


def validate(config, process_count: int = 1) -> DataConfig:
  """The typed `config.data` at `build`'s door: a `DataConfig` as it is (trusted), its ConfigDict or a mapping typed
  (`configs.schema.as_section`); then `check_processes`."""
  config = as_section(DataConfig, config)
  check_processes(config, process_count)
  return config


def check_processes(config: DataConfig, process_count: int = 1) -> None:
  """Raises ValueError naming the key, the value and the choices if the GLOBAL batches do not split evenly over
  `process_count` processes."""
  for key in ("batch_size", "eval_batch_size"):
    if config[key] % process_count:
      raise invalid(
          f"data.{key}",
          config[key],
          f"a multiple of process_count={process_count}",
          "the GLOBAL batch is split evenly over the processes",
      )


def _check_values(config: DataConfig) -> None:
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
    raise invalid("data.max_eval_loss_examples", config.max_eval_loss_examples, "-1 (all) or a positive integer")
  if config.lm_side not in LM_SIDES:
    raise invalid("data.lm_side", config.lm_side, list(LM_SIDES))
  if config.length_policy not in LENGTH_POLICIES:
    raise invalid("data.length_policy", config.length_policy, list(LENGTH_POLICIES))
  name = config.name
  if not isinstance(name, str) or not (
      name in ("embedded", "multi30k") or (name.startswith("tfds:") and len(name) > 5)
  ):
    raise invalid("data.name", name, VALID_NAMES)
  if not name.startswith("tfds:"):
    if config.train_split != "train":
      raise invalid("data.train_split", config.train_split, "'train'", f"split specs are for tfds sources, not {name}")
    if config.eval_split not in EVAL_SPLITS_BUILTIN:
      raise invalid("data.eval_split", config.eval_split, list(EVAL_SPLITS_BUILTIN), f"data.name={name!r}")
  if name == "multi30k":
    for key in ("source_lang", "target_lang"):
      if config[key] not in MULTI30K_LANGS:
        raise invalid(f"data.{key}", config[key], list(MULTI30K_LANGS), "data.name='multi30k'")
    if config.source_lang == config.target_lang:
      raise contradiction(
          "data.source_lang",
          config.source_lang,
          "data.target_lang",
          config.target_lang,
          "a translation needs two different languages",
      )
    if not config.dir:
      raise invalid("data.dir", config.dir, "the folder with Multi30k's .gz files", "data.name='multi30k'")
