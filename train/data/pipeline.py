"""grain pipelines from text examples to fixed-shape int32 batches (the Flax wmt / lm1b batch format).

Training (`train_dataset`), in this order, so every step is index-based and the iterator state is a few ints:
  shuffle   MapDataset.shuffle(seed) then .repeat() over the whole split: a fresh permutation every epoch (grain
            mixes the epoch into the seed), never mixing two epochs;
  tokenize  ids + EOS for "inputs" (source) and "targets"; LM examples only have "targets";
  length    length_policy 'drop' filters examples longer than the limit (EOS included), 'truncate' cuts the
            tokens to limit-1 and keeps the EOS, so every sequence still ends in EOS;
  pad/pack  pad each sequence to its limit with 0, or (pack=True) first-fit pack several examples into a row
            with grain.experimental.FirstFitPackIterDataset, renaming its keys to Flax wmt's:
            `<f>_segmentation` (segment ids 1, 2, ... per row, 0 = padding) and `<f>_position` (0, 1, ... restarting
            in each segment, 0 on padding); an example's inputs and targets share one segment id;
  batch     the GLOBAL batch (process_count × per-process rows, packing bins included), drop_remainder=True;
  slice     process p keeps rows [p·b, (p+1)·b) of it: the static shape [per_process_batch, L].
Every process walks the same global stream, so the global batch of step t (the processes' rows stacked in process order,
as `train.step.global_batch` assembles it) does not depend on the number of processes: a run on 2 hosts sees the batches
a run on 1 host sees, and a run can resume on another process count. The price: each process tokenizes and pads the
whole global batch (small next to a Transformer step on text of this size). The resulting grain DatasetIterator supports
get_state() / set_state(); the state is JSON-serializable and resuming continues on the exact next batch.

Evaluation (`eval_batches`): the eval split in file order, tokenized with the same length policy, sharded
like training, padded, batched; the last partial batch is filled with all-padding rows, and a process whose
shard is shorter gets all-padding batches so that every process yields the same number of batches (needed by
collective ops in a multi-process eval step). Padding rows have targets == 0 and so carry no loss weight.
"""

import math
from collections.abc import Callable, Iterator, Sequence

import grain
import grain.experimental as grain_exp
import numpy as np

from train.data.tokenizers import EOS_ID, PAD_ID

# grain's packed-feature suffixes -> Flax wmt's.
_PACK_SUFFIXES = {"_segment_ids": "_segmentation", "_positions": "_position"}


def feature_lengths(task: str, max_source_length: int, max_target_length: int) -> dict[str, int]:
  """Padded length of each token feature of a batch."""
  if task == "lm":
    return {"targets": max_target_length}
  return {"inputs": max_source_length, "targets": max_target_length}


def tokenize_fn(tokenizer, task: str, lengths: dict[str, int], policy: str) -> Callable[[dict], dict]:
  """Text example -> {feature: int32 ids + EOS}, truncated to the limits if policy == 'truncate'."""
  fields = {"targets": "target"} if task == "lm" else {"inputs": "source", "targets": "target"}

  def tokenize(example: dict) -> dict[str, np.ndarray]:
    out = {}
    for feature, field in fields.items():
      ids = tokenizer.encode(example[field])
      if policy == "truncate":
        ids = ids[: lengths[feature] - 1]
      out[feature] = np.asarray(list(ids) + [EOS_ID], np.int32)
    return out

  return tokenize


def fits_fn(lengths: dict[str, int]) -> Callable[[dict], bool]:
  """Predicate: every feature (EOS included) is within its limit."""
  return lambda ex: all(len(ex[k]) <= n for k, n in lengths.items())


def pad_fn(lengths: dict[str, int]) -> Callable[[dict], dict]:
  """Pads each feature with PAD_ID to its limit."""
  return lambda ex: {k: np.pad(ex[k], (0, n - len(ex[k])), constant_values=PAD_ID) for k, n in lengths.items()}


def _rename_packed(example: dict) -> dict[str, np.ndarray]:
  out = {}
  for key, value in example.items():
    for old, new in _PACK_SUFFIXES.items():
      if key.endswith(old):
        key = key[: -len(old)] + new
    out[key] = np.asarray(value, np.int32)
  return out


def _read_options(read_threads: int) -> grain.ReadOptions:
  return grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=128 if read_threads else 0)


def train_dataset(
    examples: grain.MapDataset,
    tokenize: Callable[[dict], dict],
    *,
    lengths: dict[str, int],
    policy: str,
    batch_size: int,
    seed: int,
    pack: bool,
    process_index: int,
    process_count: int,
    read_threads: int = 0,
) -> grain.IterDataset:
  """The infinite training stream of this process's rows of the global batches (see the module docstring).

  Args:
    examples: MapDataset of text examples (the whole training split).
    tokenize: from tokenize_fn().
    lengths: from feature_lengths().
    policy: 'drop' or 'truncate'.
    batch_size: per-process batch size.
    seed: shuffle seed.
    pack: pack examples into rows (adds *_segmentation and *_position).
    process_index: this process, in [0, process_count).
    process_count: number of processes sharing the data.
    read_threads: grain reader threads (0 = main thread).

  Returns:
    An IterDataset whose iterators yield dicts of int32 arrays [batch_size, lengths[k]].
  """
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index={process_index} must be in [0, process_count={process_count})")
  ds = examples.shuffle(seed).repeat().map(tokenize)
  if policy == "drop":
    # Fail now rather than spin forever in the filter if the limits admit (almost) no example.
    fits = fits_fn(lengths)
    if not any(fits(ds[i]) for i in range(256)):
      raise ValueError(
          f"length_policy='drop' with lengths {lengths} (config.data.max_source_length / "
          "max_target_length, EOS included) drops all of 256 sampled training examples."
      )
    ds = ds.filter(fits)
  it = ds.to_iter_dataset(_read_options(read_threads))
  global_batch = batch_size * process_count
  if pack:
    # Bins = rows of one global batch; shuffle_bins=False because the examples are already shuffled.
    it = grain_exp.FirstFitPackIterDataset(
        it, length_struct=dict(lengths), num_packing_bins=global_batch, shuffle_bins=False
    ).map(_rename_packed)
  else:
    it = it.map(pad_fn(lengths))
  rows = slice(process_index * batch_size, (process_index + 1) * batch_size)
  return it.batch(global_batch, drop_remainder=True).map(lambda b: {k: v[rows] for k, v in b.items()})


def tokenized_eval_examples(
    examples: grain.MapDataset,
    tokenize: Callable[[dict], dict],
    *,
    lengths: dict[str, int],
    policy: str,
    max_examples: int,
    read_threads: int = 0,
) -> list[dict[str, np.ndarray]]:
  """All kept eval examples (global, in file order), tokenized; the first max_examples if max_examples > 0."""
  if max_examples > 0:
    examples = examples[:max_examples]
  ds = examples.map(tokenize)
  if policy == "drop":
    ds = ds.filter(fits_fn(lengths))
  return list(ds.to_iter_dataset(_read_options(read_threads)))


def eval_batches(
    tokenized: Sequence[dict[str, np.ndarray]],
    *,
    lengths: dict[str, int],
    batch_size: int,
    process_index: int,
    process_count: int,
) -> Iterator[dict[str, np.ndarray]]:
  """This process's eval batches over `tokenized` (see the module docstring).

  Args:
    tokenized: from tokenized_eval_examples().
    lengths: from feature_lengths().
    batch_size: per-process eval batch size.
    process_index: this process.
    process_count: number of processes.

  Yields:
    Dicts of int32 arrays [batch_size, lengths[k]]; the same number of batches on every process.
  """
  num_batches = math.ceil(math.ceil(len(tokenized) / process_count) / batch_size)
  shard = grain.MapDataset.source(list(tokenized[process_index::process_count])).map(pad_fn(lengths))
  batches = iter(shard.batch(batch_size, drop_remainder=False)) if len(shard) else iter(())
  for _ in range(num_batches):
    batch = next(batches, None)
    rows = 0 if batch is None else len(batch["targets"])
    yield {
        k: np.concatenate(
            [
                batch[k] if batch is not None else np.zeros((0, n), np.int32),
                np.full((batch_size - rows, n), PAD_ID, np.int32),
            ]
        ).astype(np.int32)
        for k, n in lengths.items()
    }
