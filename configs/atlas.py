"""The atlas's cells: its methods, model, data and training setup at every scale, and the method × warmup × lr
grid they span, as one plain sweep run with no analysis.

    python main.py --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas
    python main.py --config=configs/atlas.py:tiny --workdir=/tmp/atlas                  # seconds, synthetic task

Grid: every method (`ARMS`, labelled `NAMES[method]`, the name every report uses) × `optim.warmup_steps` ∈ {0, T_w}
× `optim.learning_rate` ∈ LRS[scale] × sweep.seeds. Studies 11, 12 and 13 (configs/claims/edge.py, width.py,
depth.py) and claims 8, 9 and 10 (configs/claims/_atlas_cells.py, `--config.sweep.cells_dir=<this workdir>`) read
these cells. Methods: Post-LN + Xavier (Vaswani et al. 2017), Post-LN + BERT's N(0, 0.02), Pre-LN (Xiong et al.
2020), T-Fixup (Huang et al. 2020), ReZero (Bachlechner et al. 2020; SkipInit, De & Smith 2020, at α = 0 is the same
model, counted once), scheduled α (Su 2021a §6), DeepNorm (Wang et al. 2022), Admin (Liu et al. 2020), DS-Init
(Zhang, Titov & Sennrich 2019); the rules of 2024-26 as their configs set them (configs/<name>.py, docs/science.md):
DyT (Zhu et al. 2025), Derf, Peri-LN (Kim et al. 2025), HybridNorm (Zhuo et al. 2025), Mix-LN (Li et al. 2025),
LayerNorm scaling (Sun et al. 2025), LayerScale (Touvron et al. 2021), QK-norm and z-loss (Wortsman et al. 2023),
CompleteP (Dey et al. 2025); `ADDED` after the committed cpu records: Megatron (Shoeybi et al. 2019), Mitchell
(Groeneveld et al. 2024) and small init (Nguyen & Salazar 2019) on Pre-LN, OLMo 2's reordered norm and init (OLMo
Team 2025), soft-caps (Gemma Team 2024), gated attention (Qiu et al. 2025), QK-clip (Kimi Team 2025).
Training: configs/claims/_training.py's setup (Adam, `linear_warmup`, warmup 0 = a constant lr, one data order); at
paper its RECIPE (dropout 0.3, label smoothing 0.1, inverse-√ decay from step 4000, 4096-token batches). Scales:
  tiny   tests: 1+1 layers, 6 steps of batch 8 on the synthetic task, 2 methods, 3 lrs, 1 seed;
  cpu    6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece 2000, 200 steps of batch 32 (T_w = 20), Multi30k De→En
         (validation loss on 256 pairs), 19 methods × 2 warmups × 6 lrs × 2 seeds (why d = 32: docs/design_log.md);
  paper  an accelerator: claim 6's paper model and recipe, T_w = 4000, 7 lrs, 3 seeds, 20k steps.
"""

import ml_collections

from configs.claims._base import check_scale, claim_config, set_keys
from configs.claims._training import _TRAIN, RECIPE

NO_NORM = (("model.norm_type", "none"), ("model.norm_position", "none"))
BERT = (
    ("model.norm_position", "post"),
    ("model.scale_embeddings", False),
    ("model.position", "learned"),
    ("model.embedding_norm", True),
)
PRE = (("model.norm_position", "pre"),)
XAVIER = (("init.scheme", "xavier"),)
ALPHA_STEP = "per scale"  # model.alpha_step of scheduled α: 3/STEPS[scale] (`arm_keys`), α = 1 after a third of the run
ARMS = {  # method -> the (key, value) pairs of its product (the union grid's parts), in the grid's key order
    "postln_xavier": (("model.norm_position", "post"), *XAVIER),
    "postln_bert": (*BERT, ("init.scheme", "bert")),
    "preln": (*PRE, *XAVIER),
    "tfixup": (*NO_NORM, ("init.scheme", "tfixup")),
    "rezero": (*NO_NORM, ("model.residual", "rezero"), ("init.scheme", "rezero")),
    "scheduled": (*NO_NORM, ("model.residual", "scheduled"), ("model.alpha_step", ALPHA_STEP), *XAVIER),
    "deepnorm": (("model.norm_position", "post"), ("model.residual", "deepnorm"), ("init.scheme", "deepnet")),
    "admin": (("model.norm_position", "post"), ("model.residual", "admin"), ("init.scheme", "admin")),
    "dsinit": (("model.norm_position", "post"), ("init.scheme", "dsinit")),
    # The norm and residual rules of 2024-26, as their own configs set them (configs/<name>.py), Xavier weights:
    "dyt": (*PRE, ("model.norm_type", "dyt"), ("model.norm_alpha_init", 0.5), *XAVIER),
    "derf": (*PRE, ("model.norm_type", "derf"), ("model.norm_alpha_init", 0.5), *XAVIER),
    "peri_ln": (("model.norm_position", "peri"), *XAVIER),
    "hybrid_norm": (("model.norm_position", "hybrid"), *XAVIER),
    "mix_ln": (("model.norm_position", "mix"), ("model.mix_ln_ratio", 0.25), *XAVIER),
    "ln_scaling": (*PRE, ("model.layer_norm_scaling", True), *XAVIER),
    "layerscale": (*PRE, ("model.residual", "layerscale"), *XAVIER),
    "qk_norm": (*PRE, ("model.qk_norm", True), *XAVIER),
    "z_loss": (*PRE, ("train.z_loss", 0.0001), *XAVIER),
    "completep": (*PRE, ("model.residual", "completep"), ("model.depth_alpha", 1.0), ("model.depth_base", 2), *XAVIER),
    # Added after the committed cpu records (`ADDED`): the init schemes of 2024-26 on Pre-LN (each drawing its own
    # embeddings), OLMo 2's reordered norm alone (Xavier) and with its init, and the stabilizers at Adam.
    "megatron": (*PRE, ("init.scheme", "megatron"), ("init.std", 0.02)),
    "mitchell": (*PRE, ("model.scale_embeddings", False), ("init.scheme", "mitchell")),
    "small_init": (*PRE, ("model.scale_embeddings", False), ("init.scheme", "small_init")),
    "reordered": (("model.norm_position", "reordered"), *XAVIER),
    "olmo2": (
        ("model.norm_position", "reordered"),
        ("model.scale_embeddings", False),
        ("init.scheme", "olmo2"),
        ("init.std", 0.02),
    ),
    "softcap": (*PRE, ("model.attn_logit_softcap", 50.0), ("model.final_logit_softcap", 30.0), *XAVIER),
    "gated_attention": (*PRE, ("model.attention_gate", True), *XAVIER),
    "qk_clip": (*PRE, ("optim.qk_clip", 100.0), *XAVIER),
}
NAMES = {  # method -> its name in the reports: the label of its grid products (experiments/grid.py), recorded per run
    "postln_xavier": "Post-LN + Xavier",
    "postln_bert": "Post-LN + BERT 0.02",
    "preln": "Pre-LN",
    "tfixup": "T-Fixup",
    "rezero": "ReZero",
    "scheduled": "scheduled α",
    "deepnorm": "DeepNorm",
    "admin": "Admin",
    "dsinit": "DS-Init",
    "dyt": "DyT",
    "derf": "Derf",
    "peri_ln": "Peri-LN",
    "hybrid_norm": "HybridNorm",
    "mix_ln": "Mix-LN",
    "ln_scaling": "LayerNorm scaling",
    "layerscale": "LayerScale",
    "qk_norm": "Pre-LN + QK-norm",
    "z_loss": "Pre-LN + z-loss",
    "completep": "CompleteP",
    "megatron": "Pre-LN + Megatron init",
    "mitchell": "Pre-LN + Mitchell init",
    "small_init": "Pre-LN + small init",
    "reordered": "reordered norm",
    "olmo2": "OLMo 2 (reordered + init)",
    "softcap": "Pre-LN + soft-caps",
    "gated_attention": "Pre-LN + gated attention",
    "qk_clip": "Pre-LN + QK-clip",
}
# The registry's methods added after the committed cpu records (reports/reproduction/edge, edge_boundary): `cpu` keeps
# the 19 those studies trained, so a rerun of `:cpu` trains and decides what they did; `:cpu+added` (configs/claims/
# edge.py) appends these; `paper`, with no committed record, runs every method.
ADDED = ("megatron", "mitchell", "small_init", "reordered", "olmo2", "softcap", "gated_attention", "qk_clip")
METHODS = {
    "tiny": ("postln_xavier", "preln"),
    "cpu": tuple(m for m in ARMS if m not in ADDED),
    "paper": tuple(ARMS),
}
LRS = {  # peak learning rates, log-spaced (factor √10 at cpu, 2.5 decades bracketing every method's failure)
    "tiny": (1e-3, 1e-2, 1e-1),
    "cpu": (1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2, 3.16e-2),
    "paper": (3.16e-5, 1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2, 3.16e-2),
}
STEPS = {"tiny": 6, "cpu": 200, "paper": 20_000}
WARMUP = {"tiny": 2, "cpu": 20, "paper": 4000}  # T_w: 10% of the steps at cpu (docs/science.md §8)
SEEDS = {"tiny": 1, "cpu": 2, "paper": 3}
SIZES = {
    "tiny": {"model.preset": "tiny", "model.num_encoder_layers": 1, "model.num_decoder_layers": 1},
    "cpu": {
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.d_model": 32,
        "model.num_heads": 2,
        "model.d_ff": 128,
        "data.vocab_size": 2000,
    },
    "paper": {  # claim 6's paper model (configs/claims/_training.py SIZES['paper']: fairseq's transformer_iwslt_de_en)
        "model.preset": "base",
        "model.num_encoder_layers": 6,
        "model.num_decoder_layers": 6,
        "model.num_heads": 4,
        "model.d_ff": 1024,
        "data.max_source_length": 128,
        "data.max_target_length": 128,
    },
}
RUN = {
    "tiny": {
        "data.batch_size": 8,
        "data.eval_batch_size": 16,
        "data.max_eval_loss_examples": 32,
        "train.eval_every": 6,
    },
    "cpu": {"data.batch_size": 32, "data.max_eval_loss_examples": 256, "train.eval_every": 200},
    "paper": {  # 4096-token batches as the claims' paper scale (fairseq's --max-tokens 4096)
        "data.pack": True,
        "data.batch_size": 32,
        "data.max_eval_loss_examples": -1,
        "train.eval_every": 5000,
    },
}


def arm_keys(method: str, scale: str) -> tuple:
  """The (key, value) pairs of `method` (`ARMS`) at `scale`: `ALPHA_STEP` filled (scheduled α reaches 1 after a third
  of the run, as claim 10)."""
  return tuple((k, 3.0 / STEPS[scale] if v == ALPHA_STEP else v) for k, v in ARMS[method])


def products(scale: str) -> tuple:
  """The union grid (`sweep.products`): one product per method, × warmup {0, T_w} × the scale's learning rates."""
  return tuple(
      (
          ("arm", NAMES[m]),
          *arm_keys(m, scale),
          ("optim.warmup_steps", (0, WARMUP[scale])),
          ("optim.learning_rate", LRS[scale]),
      )
      for m in METHODS[scale]
  )


def get_config(scale: str = "tiny") -> ml_collections.ConfigDict:
  """The atlas at `scale` (module docstring); the default `tiny` needs no data folder."""
  check_scale(scale)
  config = claim_config("atlas", scale, SIZES)
  config.mode = "sweep"  # the atlas's cells as a plain sweep; its studies: configs/claims/edge.py and width.py
  config.claim.name = ""  # not a claim: the claim group stays at its default
  set_keys(config, _TRAIN)
  set_keys(config, RECIPE[scale])  # the papers' regularization and schedule at paper; nothing at tiny and cpu
  set_keys(config, RUN[scale])
  set_keys(
      config,
      {
          "train.num_steps": STEPS[scale],
          "train.log_every": max(1, STEPS[scale] // 20),
          "train.checkpoint_every": STEPS[scale],
          "train.num_decode_examples": 0,  # the atlas reads the validation loss; no BLEU decoding
      },
  )
  config.model.alpha_init, config.model.alpha_final = 0.0, 1.0  # scheduled α: from 0 up to 1
  config.sweep.products = products(scale)
  config.sweep.seeds = SEEDS[scale]
  config.sweep.metric = "eval/loss"
  return config
