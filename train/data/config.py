"""The `config.data` subtree: every key the data layer reads, and its validation.

`validate()` runs in `build()` before anything is read or trained; each error names the key, the bad value
and the valid choices.
"""

import ml_collections

from models.config import contradiction, invalid

LENGTH_POLICIES = ("drop", "truncate")
MULTI30K_LANGS = ("de", "en")
EVAL_SPLITS_BUILTIN = ("validation", "test")


# Every key of `config.data` (declared with its default and comment in configs/default.py); `embedded` is a subtree.
DATA_KEYS = (
    "name",
    "dir",
    "tfds_data_dir",
    "source_lang",
    "target_lang",
    "lm_text_field",
    "train_split",
    "eval_split",
    "vocab_size",
    "spm_max_corpus_chars",
    "batch_size",
    "eval_batch_size",
    "max_source_length",
    "max_target_length",
    "length_policy",
    "pack",
    "shuffle_seed",
    "read_threads",
    "num_eval_examples",
    "max_eval_loss_examples",
    "embedded",
)
EMBEDDED_KEYS = ("seed", "num_train", "num_eval")


def _positive(config, key: str, minimum: int = 1):
  value = config
  for part in key.split("."):
    value = value[part]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise invalid(f"data.{key}", value, f"an integer >= {minimum}")


def validate(config: ml_collections.ConfigDict, process_count: int, valid_names: str) -> None:
  """Raises ValueError naming the key, value and choices if `config` is not usable.

  Args:
    config: the data config.
    process_count: number of JAX processes the global batches are split over.
    valid_names: a printable list of valid `name` values, for the error message.
  """
  for keys, prefix, given in (
      (DATA_KEYS, "data.", config),
      (EMBEDDED_KEYS, "data.embedded.", config.get("embedded", {})),
  ):
    unknown = sorted(set(given.keys()) - set(keys))
    if unknown:
      raise invalid(prefix + unknown[0], given[unknown[0]], f"a key of {sorted(keys)}", "unknown key")
    missing = [k for k in keys if k not in given.keys()]
    if missing:
      raise invalid(prefix + missing[0], None, "a value: the key is missing (start from configs/default.py)")
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
  if config.length_policy not in LENGTH_POLICIES:
    raise invalid("data.length_policy", config.length_policy, list(LENGTH_POLICIES))
  for key in ("batch_size", "eval_batch_size"):
    if config[key] % process_count:
      raise invalid(
          f"data.{key}",
          config[key],
          f"a multiple of process_count={process_count}",
          "the GLOBAL batch is split evenly over the processes",
      )
  name = config.name
  if not isinstance(name, str) or not (
      name in ("embedded", "multi30k") or (name.startswith("tfds:") and len(name) > 5)
  ):
    raise invalid("data.name", name, valid_names)
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
