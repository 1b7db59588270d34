"""Data layer: text sources -> tokenized, sharded, fixed-shape int32 batches (Flax wmt / lm1b format).

Public API: `train.data.build(data_config, *, workdir, process_index=None, process_count=None) -> Data` of the
`config.data` subtree, and `DATA_KEYS`, its keys (declared in configs/default.py). `Data` (frozen dataclass) has:
  tokenizer          encode(str) -> list[int] WITHOUT EOS (the pipeline appends it); decode(ids) -> str,
                     stopping at the first EOS and skipping padding; vocab_size; pad_id = 0; eos_id = 1.
  task               'translation' or 'lm'.
  train_iter()       a fresh grain DatasetIterator over this process's infinite training batches,
                     numpy int32 dicts of shape [batch_size / process_count, L]; get_state() / set_state()
                     with a JSON-serializable state resume on the exact next batch.
  eval_batches()     a finite, deterministic, unshuffled pass over this process's shard of the eval split;
                     the last batch is filled with all-padding rows (targets == 0, no loss weight).
  eval_examples()    list of (source_text, reference_text), the first `num_eval_examples` of the eval split.
  max_source_length, max_target_length   padded lengths of "inputs" (0 for 'lm') and "targets".

Batches: {"inputs": int32[B, L_src], "targets": int32[B, L_tgt]} for translation, {"targets": int32[B, L]}
for language modelling. Ids: 0 = padding, 1 = EOS (ends every sequence), 2 = unknown; no BOS (the model
shifts right itself). With pack=True also `inputs_segmentation`, `inputs_position`, `targets_segmentation`,
`targets_position` as in Flax wmt (segment ids from 1, 0 = padding; positions restart at 0 per segment).

Sources (`name`): 'embedded' (synthetic grammar pair, grammar.py), 'multi30k' (multi30k.py),
'tfds:<name>' (ArrayRecord via tfds.data_source, no TensorFlow; tfds_source.py); `lm_side` ('source' | 'target')
makes a translation source the language-modelling corpus of that side (corpus.one_side). Pipeline: pipeline.py.
"""

from train.data.build import Data, build
from train.data.config import DATA_KEYS

__all__ = ["DATA_KEYS", "Data", "build"]
