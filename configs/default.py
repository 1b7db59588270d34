"""Every config key, with its default and a one-line comment; experiment configs import this and override.

    python main.py --config=configs/default.py --workdir=runs/default

Groups mirror the folders: `model` (models/), `init` (init/), `optim` and `data` and `train` (train/), `analysis`
(analysis/); each subsystem receives only its own subtree. The `data`, `optim`, `init` and `analysis` subtrees are
declared, each key with its comment, next to the code that validates them (`train.data.default_data_config`,
`train.optim.default_optim_config`, `init.default_init_config`, `analysis.run.default_analysis_config`), so the
keys and their validation cannot drift apart; `model` and `train` are declared here.
"""

import ml_collections

from analysis.run import default_analysis_config
from init import default_init_config
from train.data import default_data_config
from train.optim import default_optim_config


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.mode = "train"  # 'train' (resumes the workdir if it has a checkpoint) or 'analyze' (analysis only).

  m = config.model = ml_collections.ConfigDict()
  m.preset = "mini"  # Sizes from models.config.PRESETS: 'base' 6+6×512, 'small' 3+3×256, 'mini' 2+2×128, 'tiny'.
  m.arch = "encoder_decoder"  # 'encoder_decoder' (translation), 'decoder' (causal LM), 'encoder' (BERT-style MLM).
  m.num_encoder_layers = None  # Encoder layers (None: from preset).
  m.num_decoder_layers = None  # Decoder layers (None: from preset).
  m.d_model = None  # Residual width d (None: from preset).
  m.num_heads = None  # Attention heads (None: from preset).
  m.d_ff = None  # MLP hidden width (None: from preset).
  m.head_dim = None  # Per-head width d_k (None: d_model // num_heads).
  m.max_len = 256  # Longest position for learned position embeddings.
  m.norm_type = "layernorm"  # 'layernorm' | 'rmsnorm' | 'none' (SCIENCE §5).
  m.norm_position = "post"  # 'post' | 'pre' (+ final norm) | 'sandwich' | 'none' (SCIENCE §6).
  m.norm_epsilon = 1e-6  # ε inside the norm's square root.
  m.residual = "plain"  # 'plain' | 'rezero' | 'skipinit' | 'scheduled' | 'deepnorm' | 'admin' (SCIENCE §6).
  m.skipinit_alpha = 0.0  # SkipInit's α at init.
  m.alpha_init = 0.0  # Scheduled α: value at step 0.
  m.alpha_step = 1e-3  # Scheduled α: increment per update.
  m.alpha_final = 1.0  # Scheduled α: value it stops at.
  m.attention_logit_scale = "sqrt_dk"  # 'sqrt_dk' (Vaswani) | 'none' (T5) | 'dk' (µP) (SCIENCE §4).
  m.use_bias = True  # Biases in every dense layer and LayerNorm (T5: False).
  m.tie_embeddings = True  # Output logits through the (shared) input embedding.
  m.tied_readout_scale = "none"  # 'none' | 'rsqrt_d': multiply tied logits by d^{-1/2} (T5/t5x).
  m.scale_embeddings = True  # Multiply token embeddings by √d (Vaswani et al. 2017 §3.4; pairs with std d^-1/2 inits).
  m.position = "sinusoidal"  # 'sinusoidal' | 'learned'.
  m.embedding_norm = False  # LayerNorm on token + position embeddings before the stack (BERT, Devlin et al. 2019 §3).
  m.activation = "relu"  # 'relu' | 'gelu' | 'selu' | 'normalized_relu' | 'normalized_gelu' | 'identity'.
  m.parameterization = "standard"  # 'standard' | 'ntk' | 'mup' (SCIENCE §3).
  m.mup_base_width = 32  # µP: d_model at which µP equals SP (width_ratio = d_model / this).
  m.dropout_rate = 0.0  # Dropout on embeddings, branch outputs and the MLP hidden layer.
  m.attention_dropout_rate = 0.0  # Dropout on attention probabilities.
  m.dtype = "float32"  # Compute dtype: 'float32' | 'bfloat16'.
  m.param_dtype = "float32"  # Parameter storage dtype.

  config.init = default_init_config()
  config.optim = default_optim_config()
  config.data = default_data_config()
  config.analysis = default_analysis_config()

  t = config.train = ml_collections.ConfigDict()
  t.num_steps = 1500  # Optimizer updates in total (a rerun of the workdir resumes towards this).
  t.log_every = 50  # Steps between train-metric records and progress lines.
  t.eval_every = 500  # Steps between evaluations (and at the end).
  t.checkpoint_every = 500  # Steps between checkpoints (and at the end).
  t.keep_checkpoints = 3  # Checkpoints kept (oldest deleted).
  t.seed = 0  # Seed of init, dropout and MLM masking keys (data order has data.shuffle_seed).
  t.label_smoothing = 0.0  # Label smoothing of the training loss (eval loss never smoothed).
  t.mlm_mask_rate = 0.15  # Encoder (MLM) only: fraction of tokens to predict (BERT).
  t.num_decode_examples = 256  # Translation: validation sentences greedily decoded for BLEU / exact match.
  t.decode_max_length = 0  # Longest decoded output (0: data.max_target_length).
  t.grad_norms_every = 0  # Steps between per-parameter gradient-norm records (0: never; computed in-step).
  return config
