"""Shared training setup of claim 6's config (warmup) and of the atlas (configs/atlas.py: `_TRAIN`, `RECIPE`), whose
cells claims 8, 9 and 10 read (configs/claims/_atlas_cells.py); not a launchable config itself.

Every arm trains the same way, so that one study's arm is another's: Adam (β1 0.9, β2 0.98, ε 1e-9; Vaswani et al.
2017 §5.3) at lr 1e-3, Xavier init unless an arm sets another scheme, the same data order (data.shuffle_seed) for
every run; the seed (0 .. sweep.seeds-1) changes the init. At tiny and cpu: schedule `linear_warmup` with
`optim.warmup_steps = 0` (a constant lr: "no warmup") unless an arm sets a warmup, no dropout, no label smoothing. At
paper, the recipe of the papers these claims reproduce on IWSLT14 De→En, Xiong et al. 2020 (Fig. 2, claim 6) and Liu
et al. 2020 (Admin, claim 10), as Liu et al.'s released recipe and fairseq's IWSLT14 example set it (`RECIPE`; the
values and their sources next to each key): the `transformer_iwslt_de_en` model, dropout 0.3, label smoothing 0.1,
batches of 4096 tokens, and after the warmup an inverse-square-root decay (`warmup_rsqrt`). An arm without warmup
keeps the same decay from step T_d = 4000 on (`optim.decay_start`): it differs from its warmup twin in the first 4000
steps only, not by an lr 63× lower at step 4000 as with fairseq's `inverse_sqrt` and 1 warmup update.
Sizes (claim 6 sets its cpu model over these: configs/claims/warmup.py):
  tiny   the tests: 1+1 layers of the tiny preset, 10 steps of batch 8 on the synthetic `embedded` task, 1 seed;
  cpu    the committed report (docs/design_log.md): 6+6 layers, d = 128, 4 heads, d_ff 512, 300 steps of batch 32,
         Multi30k De→En (validation loss on 512 pairs, BLEU on 64 greedy decodes), 2 seeds;
  paper  the papers' recipe for an accelerator (GPU/TPU; far too slow on a CPU), on Multi30k De→En (IWSLT14 is not
         read by this project): 6+6 layers, d = 512, 4 heads, d_ff 1024, up to 128 tokens, 100k updates of 4096
         tokens (32 packed rows of 128), the whole validation split, 3 seeds. 100k updates are ~90 epochs of IWSLT14's
         160k pairs but ~800 of Multi30k's 29k: the papers' step count, not their epochs.
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
    # An eval record at step 0 (the loss at init) and data_stats.json (the unigram reference): what each run's outcome
    # class is read against (analysis/outcomes.py; the sweep records it, the atlas's claims read it).
    "train.eval_at_init": True,
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
    "paper": {  # fairseq's `transformer_iwslt_de_en`, the model of Liu et al.'s IWSLT14 recipe (note under RECIPE)
        "model.preset": "base",
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 512,
        "model.num_heads": 4,
        "model.d_ff": 1024,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
        # fairseq's --max-tokens 4096 (Liu et al.'s recipe; fairseq's IWSLT14 example): 32 rows of 128 tokens into
        # which pairs are packed (Multi30k's pairs are ~16 tokens a side, so unpacked rows would be mostly padding)
        "data.pack": True,
        "data.batch_size": 32,
        "data.max_eval_loss_examples": -1,
        "train.num_steps": 100_000,  # Liu et al.'s recipe: --max-update 100000 ("90 epochs" of IWSLT14)
        "train.log_every": 100,
        "train.eval_every": 5000,
        "train.checkpoint_every": 5000,
        "train.num_decode_examples": 1000,
    },
}
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}
WARMUP = {"tiny": 2, "cpu": 30, "paper": 4000}
# The papers' regularization and schedule, applied after `_TRAIN` at paper only. Sources: Liu et al. 2020's released
# IWSLT14 De-En recipe (github.com/LiyuanLucasLiu/Transformer-Clinic, nmt-experiments/iwslt14_de-en.md):
# `transformer_iwslt_de_en` (6+6, d 512, 4 heads, FFN 1024), --dropout 0.3 --attention-dropout 0.1 --relu-dropout
# 0.1 --label-smoothing 0.1, --lr-scheduler inverse_sqrt (6000 warmup updates with RAdam), --max-tokens 4096,
# --max-update 100000; fairseq's IWSLT14 De-En example (examples/translation/README.md): the same model, --dropout
# 0.3 --label-smoothing 0.1, Adam (0.9, 0.98), lr 5e-4, --lr-scheduler inverse_sqrt --warmup-updates 4000,
# --max-tokens 4096. Xiong et al. 2020 §3.2 and Fig. 2 (IWSLT14 De-En): Adam with lr_max in {5e-4, 1e-3} (1e-3 kept
# here: `_TRAIN`), T_warmup 4000, then inverse-square-root decay. Not reproduced: weight decay 1e-4 (decoupled in
# fairseq's Adam) and the MLP hidden layer's 0.1 dropout (`model.dropout_rate` drops there too, at 0.3).
RECIPE = {
    "tiny": {},
    "cpu": {},
    "paper": {
        "model.dropout_rate": 0.3,  # Liu et al. recipe --dropout 0.3; fairseq IWSLT14 example --dropout 0.3
        "model.attention_dropout_rate": 0.1,  # Liu et al. recipe --attention-dropout 0.1
        "train.label_smoothing": 0.1,  # Liu et al. recipe and fairseq's example: --label-smoothing 0.1
        # η·min(1, t/T_w)·min(1, √(T_d/t)): fairseq's inverse_sqrt when T_d = T_w (Xiong et al. 2020 §3.2; Vaswani
        # et al. 2017 Eq. 3)
        "optim.schedule": "warmup_rsqrt",
        "optim.decay_start": WARMUP["paper"],  # T_d = the warmup arms' T_w: the no-warmup arms decay alike
    },
}


def training_config(name: str, scale: str, products: tuple) -> ml_collections.ConfigDict:
  """The claim `name` at `scale`: the shared training setup, sizes and recipe above, the sweep `products`, metric
  eval/loss."""
  config = claim_config(name, scale, SIZES)
  set_keys(config, _TRAIN)
  set_keys(config, RECIPE[scale])
  config.sweep.products = products
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
