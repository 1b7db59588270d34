"""Shared part of the training claims' configs (6 warmup, 8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup); not a
launchable config itself.

Every arm of these claims trains the same way, so that one claim's arm is another's (claim 6's Post-LN without warmup
is claim 8's): Adam (β1 0.9, β2 0.98, ε 1e-9; Vaswani et al. 2017 §5.3) at lr 1e-3, schedule `linear_warmup` with
`optim.warmup_steps = 0` (a constant lr: "no warmup") unless an arm sets a warmup, Xavier init unless an arm sets
another scheme, no dropout, no label smoothing, the same data order (data.shuffle_seed) for every run; the seed
(0 .. sweep.seeds-1) changes the init. Sizes (claim 10 deepens `paper` itself):
  tiny   the tests: 1+1 layers of the tiny preset, 10 steps of batch 8 on the synthetic `embedded` task, 1 seed;
  cpu    the committed report, as the earlier reproduction (analysis/reproduce/training.py (retired; git commit
         35e9f30)'s SCALES['cpu']): 6+6 layers, d = 128, 4 heads, d_ff 512, 300 steps of batch 32, Multi30k De→En
         (validation loss on 512 pairs, BLEU on 64 greedy decodes), 2 seeds;
  paper  the papers' sizes, for an accelerator (GPU/TPU; far too slow on a CPU): the Transformer base (6+6, d = 512,
         8 heads, d_ff 2048), IWSLT-like lengths (up to 128 tokens), 20k steps of batch 128, the whole validation
         split, 3 seeds.
`WARMUP[scale]` is claim 6's warmup T_w: 10% of the steps at cpu (Su 2021b's rule of thumb, docs/science.md §8), the
4000 steps of Vaswani et al. 2017 and Xiong et al. 2020 at paper, 2 of the 10 at tiny. Imports only ml_collections.
"""

import ml_collections

from configs.claims._base import claim_config, set_keys

_TRAIN = {
    "init.scheme": "xavier",  # spelled out (not 'auto'): the figures' titles name it; arms with another scheme set it
    "optim.name": "adam",
    "optim.learning_rate": 1e-3,
    "optim.schedule": "linear_warmup",
    "optim.warmup_steps": 0,
    "model.dropout_rate": 0.0,
    "model.attention_dropout_rate": 0.0,
    "train.label_smoothing": 0.0,
    "train.keep_checkpoints": 1,
}
SIZES = {
    "tiny": {
        "model.preset": "tiny",
        "model.num_encoder_layers": 1,
        "model.num_decoder_layers": 1,
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.num_steps": 10,
        "train.log_every": 1,
        "train.eval_every": 5,
        "train.checkpoint_every": 10,
        "train.num_decode_examples": 4,
    },
    "cpu": {
        "model.preset": "mini",
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 128,
        "model.num_heads": 4,
        "model.d_ff": 512,
        "data.batch_size": 32,
        "data.max_eval_loss_examples": 512,
        "train.num_steps": 300,
        "train.log_every": 10,
        "train.eval_every": 100,
        "train.checkpoint_every": 300,
        "train.num_decode_examples": 64,
    },
    "paper": {
        "model.preset": "base",
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 512,
        "model.num_heads": 8,
        "model.d_ff": 2048,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
        "data.batch_size": 128,
        "data.max_eval_loss_examples": -1,
        "train.num_steps": 20_000,
        "train.log_every": 100,
        "train.eval_every": 1000,
        "train.checkpoint_every": 5000,
        "train.num_decode_examples": 1000,
    },
}
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}
WARMUP = {"tiny": 2, "cpu": 30, "paper": 4000}


def training_config(name: str, scale: str, grid: str) -> ml_collections.ConfigDict:
  """The claim `name` at `scale`: the shared training setup and sizes above, the sweep `grid`, metric eval/loss."""
  config = claim_config(name, scale, SIZES)
  set_keys(config, _TRAIN)
  config.sweep.grid = grid
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
