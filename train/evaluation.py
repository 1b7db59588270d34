"""Evaluation of an `Experiment` on its eval split: validation loss, token accuracy and perplexity, plus greedy-decoding
BLEU and exact match for translation (`decode_examples` splits the examples across processes and gathers them).
Every process returns the same numbers.
"""

import math

import jax
import numpy as np
from jax.experimental import multihost_utils

from train import decode as decode_lib
from train import step as step_lib
from train.experiment import Experiment


def _process_rows(mesh, num_rows: int) -> slice:
  """The rows of a global batch of `num_rows` that this process's devices hold: where `step.global_batch` puts this
  process's local rows (a contiguous block of the mesh's `data` axis)."""
  index = step_lib.batch_sharding(mesh).addressable_devices_indices_map((num_rows,))
  bounds = [i[0].indices(num_rows)[:2] for i in index.values()]
  return slice(min(b[0] for b in bounds), max(b[1] for b in bounds))


def decode_examples(exp: Experiment, decode_fn, variables, examples: list[tuple[str, str]]) -> list[str]:
  """Greedy translations of the sources of `examples`, in their order, on every process.

  The examples go through in global batches of `data.eval_batch_size`; each process encodes only its rows of a batch
  (`_process_rows`), the jitted decode runs over the global batch, and the decoded rows are gathered
  (`process_allgather`), so every process gets the hypotheses one process alone would.
  """
  size, length = exp.config.data.eval_batch_size, exp.data.max_source_length
  rows = _process_rows(exp.mesh, size)
  hyps = []
  for start in range(0, len(examples), size):
    chunk = examples[start : start + size]
    ids = np.zeros((rows.stop - rows.start, length), np.int32)
    for j, (src, _) in enumerate(chunk[rows]):
      toks = exp.data.tokenizer.encode(src)[: length - 1] + [exp.data.eos_id]
      ids[j, : len(toks)] = toks
    out = decode_fn(variables, step_lib.global_batch({"inputs": ids}, exp.mesh)["inputs"])
    out = multihost_utils.process_allgather(out, tiled=True)
    hyps += [exp.data.tokenizer.decode(row.tolist()) for row in np.asarray(out)[: len(chunk)]]
  return hyps


def evaluate(exp: Experiment, eval_step, decode_fn, variables) -> dict:
  """Validation loss / accuracy / perplexity, plus BLEU and exact match for translation.

  Several processes: each feeds its shard of the eval split (`data.eval_batches()`, as many batches on every
  process) into a global batch, and the jitted step sums over the global batch, so every process gets the sums of
  the whole split; decoding is split and gathered by `decode_examples`. Every process returns the same numbers.
  """
  sums = {"loss_sum": 0.0, "tokens": 0.0, "correct": 0.0}
  key = jax.random.key(exp.config.train.seed + 1)
  for i, batch in enumerate(exp.data.eval_batches()):
    out = eval_step(variables, step_lib.global_batch(batch, exp.mesh), jax.random.fold_in(key, i))
    sums = {k: sums[k] + float(out[k]) for k in sums}
  loss = sums["loss_sum"] / max(sums["tokens"], 1.0)
  result = {
      "loss": loss,
      "accuracy": sums["correct"] / max(sums["tokens"], 1.0),
      "perplexity": math.exp(min(loss, 50.0)),
  }
  if decode_fn is not None:
    examples = exp.data.eval_examples()[: exp.config.train.num_decode_examples]
    hyps = decode_examples(exp, decode_fn, variables, examples)
    result.update(decode_lib.translation_metrics(hyps, [ref for _, ref in examples]))
  return result
