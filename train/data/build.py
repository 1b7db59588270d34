"""`build(data_config, workdir=...) -> Data`: the one boundary between the data config and the trainer."""

import dataclasses
import functools
from collections.abc import Callable, Iterator

import grain
import ml_collections
import numpy as np

from train.data import config as config_lib
from train.data import corpus as corpus_lib
from train.data import pipeline, sources
from train.data.tokenizers import EOS_ID, PAD_ID


@dataclasses.dataclass(frozen=True)
class Data:
  """A built data source for one process.

  Attributes:
    tokenizer: encode(str) -> ids WITHOUT EOS; decode(ids) -> str stopping at EOS, skipping padding;
      vocab_size; pad_id = 0; eos_id = 1.
    task: 'translation' ({"inputs", "targets"} batches) or 'lm' ({"targets"} batches).
    max_source_length: padded length of "inputs" (0 for 'lm').
    max_target_length: padded length of "targets".
    batch_size: per-process training batch (config batch_size / process_count).
    eval_batch_size: per-process eval batch.
    process_index: this process.
    process_count: number of processes.
  """

  tokenizer: object
  task: str
  max_source_length: int
  max_target_length: int
  batch_size: int
  eval_batch_size: int
  process_index: int
  process_count: int
  _train: grain.IterDataset = dataclasses.field(repr=False)
  _tokenized_eval: Callable[[], list[dict[str, np.ndarray]]] = dataclasses.field(repr=False)
  _tokenized_train: Callable[[], list[dict[str, np.ndarray]]] = dataclasses.field(repr=False)
  _eval_text: grain.MapDataset = dataclasses.field(repr=False)
  _config: ml_collections.ConfigDict = dataclasses.field(repr=False)

  @property
  def pad_id(self) -> int:
    return PAD_ID

  @property
  def eos_id(self) -> int:
    return EOS_ID

  def train_iter(self) -> grain.DatasetIterator:
    """A fresh iterator over this process's infinite training batches (numpy int32 dicts).

    Supports get_state() / set_state(state) with a JSON-serializable state for exact resumption.
    """
    return iter(self._train)

  def eval_batches(self) -> Iterator[dict[str, np.ndarray]]:
    """A finite, deterministic pass over this process's shard of the eval split (see pipeline.py)."""
    lengths = pipeline.feature_lengths(self.task, self.max_source_length, self.max_target_length)
    return pipeline.eval_batches(
        self._tokenized_eval(),
        lengths=lengths,
        batch_size=self.eval_batch_size,
        process_index=self.process_index,
        process_count=self.process_count,
    )

  def target_unigram_entropy(self) -> dict:
    """The validation loss of the best input-free model: the cross-entropy, nats per token, of the unigram
    distribution of the training split's target tokens (add-one smoothed over the vocabulary, so a token unseen in
    training costs a finite ln) on the eval split's target tokens, padding excluded, EOS included (the tokens the
    validation loss averages over). A model that ignores its input and has learned the marginal token distribution
    scores this; analysis/outcomes.py calls a run that ends there `collapsed`. Every process computes the same.

    Returns {"target_unigram_entropy": that cross-entropy, "eval_self_entropy": the entropy of the eval targets' own
    frequencies (a lower bound of it), "tokens", "train_tokens", "vocab_size"}.
    """
    v = self.tokenizer.vocab_size

    def counts(examples) -> np.ndarray:
      c = np.zeros(v, np.int64)
      for example in examples:
        ids = np.asarray(example["targets"]).ravel()
        c += np.bincount(ids[ids != PAD_ID], minlength=v)[:v]
      return c

    ev, tr = counts(self._tokenized_eval()), counts(self._tokenized_train())
    if not ev.sum() or not tr.sum():
      raise ValueError("a split has no target tokens: the unigram reference is undefined")
    p = ev / ev.sum()
    q = (tr + 1) / (tr.sum() + v)
    seen = p > 0
    return {
        "target_unigram_entropy": float(-(p[seen] * np.log(q[seen])).sum()),
        "eval_self_entropy": float(-(p[seen] * np.log(p[seen])).sum()),
        "tokens": int(ev.sum()),
        "train_tokens": int(tr.sum()),
        "vocab_size": int(v),
    }

  def eval_examples(self) -> list[tuple[str, str]]:
    """The first `num_eval_examples` (source, reference) text pairs of the eval split, for BLEU / exact match.

    Not sharded (every process gets the same list). Under length_policy='drop', pairs whose tokens exceed
    the length limits are skipped, as in eval_batches(). For 'lm' the source is ''.
    """
    lengths = pipeline.feature_lengths(self.task, self.max_source_length, self.max_target_length)
    tokenize = pipeline.tokenize_fn(self.tokenizer, self.task, lengths, "drop")
    fits = pipeline.fits_fn(lengths)
    out = []
    for i in range(len(self._eval_text)):
      if len(out) == self._config.num_eval_examples:
        break
      example = self._eval_text[i]
      if self._config.length_policy == "truncate" or fits(tokenize(example)):
        out.append((example.get("source", ""), example["target"]))
    return out


def build(
    data_config: ml_collections.ConfigDict,
    *,
    workdir: str,
    process_index: int | None = None,
    process_count: int | None = None,
) -> Data:
  """Builds the data of `data_config` for one process.

  Args:
    data_config: the `config.data` subtree (keys `DATA_KEYS`, declared in configs/default.py).
    workdir: the run's folder (SentencePiece models are cached in workdir/tokenizer/ when the data folder is
      read-only).
    process_index: this process; default jax.process_index().
    process_count: number of processes; default jax.process_count().

  Returns:
    The Data of this process.

  Raises:
    ValueError: a bad config value (naming the key, the value and the valid choices).
    FileNotFoundError: missing data (naming the config key and the path).
  """
  if process_index is None or process_count is None:
    import jax  # Only when not given, so tests can simulate processes without touching JAX.

    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index={process_index} must be in [0, process_count={process_count}).")
  data_config = config_lib.validate(data_config, process_count)  # typed once; a DataConfig passes through
  loader, dataset = sources.get_source(data_config.name)
  corpus = loader(data_config, workdir, dataset)
  if data_config.lm_side:
    corpus = corpus_lib.one_side(corpus, data_config.lm_side)
  max_source_length = 0 if corpus.task == "lm" else data_config.max_source_length
  lengths = pipeline.feature_lengths(corpus.task, data_config.max_source_length, data_config.max_target_length)
  tokenize = pipeline.tokenize_fn(corpus.tokenizer, corpus.task, lengths, data_config.length_policy)
  batch_size = data_config.batch_size // process_count
  train = pipeline.train_dataset(
      corpus.train,
      tokenize,
      lengths=lengths,
      policy=data_config.length_policy,
      batch_size=batch_size,
      seed=data_config.shuffle_seed,
      pack=data_config.pack,
      process_index=process_index,
      process_count=process_count,
      read_threads=data_config.read_threads,
  )
  tokenized_eval = functools.cache(
      functools.partial(
          pipeline.tokenized_eval_examples,
          corpus.eval,
          tokenize,
          lengths=lengths,
          policy=data_config.length_policy,
          max_examples=data_config.max_eval_loss_examples,
          read_threads=data_config.read_threads,
      )
  )
  tokenized_train = functools.partial(  # not cached: read once, by target_unigram_entropy
      pipeline.tokenized_eval_examples,
      corpus.train,
      tokenize,
      lengths=lengths,
      policy=data_config.length_policy,
      max_examples=0,  # all
      read_threads=data_config.read_threads,
  )
  return Data(
      tokenizer=corpus.tokenizer,
      task=corpus.task,
      max_source_length=max_source_length,
      max_target_length=data_config.max_target_length,
      batch_size=batch_size,
      eval_batch_size=data_config.eval_batch_size // process_count,
      process_index=process_index,
      process_count=process_count,
      _train=train,
      _tokenized_eval=tokenized_eval,
      _tokenized_train=tokenized_train,
      _eval_text=corpus.eval,
      _config=data_config,
  )
