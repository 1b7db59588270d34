"""Every config key, declared once: its type (by its default), default and a one-line comment.

    python main.py --config=configs/default.py --workdir=runs/default
    python main.py --config=configs/t5_init.py --config.model.num_decoder_layers=6 --config.model.d_model=256

Experiment configs import this file and override; the command line overrides any key (`--config.<group>.<key>=`).
Groups mirror the folders: `model` (models/), `init` (init/), `optim`, `data` and `train` (train/), `analysis`
(analysis/), `sweep` (experiments/), `distributed` (train/distributed.py: the start-up of a multi-process run),
`mesh` (train/step.py: the device mesh and how parameters are sharded on it), `metrics` (train/trackers.py: where a
run's scalars go). This file imports only ml_collections:
loading a config imports none of the library.

Size keys that default to "from the preset" are typed placeholders (`placeholder(int)`): None until set, and the
command line can set them. Keys whose default is 'auto' are derived from others when the config is resolved
(`train.config.resolve`, before any compute): `model.attention_logit_scale` from `model.parameterization`,
`init.scheme` from `model.parameterization` and `model.residual`. Setting them explicitly to a value that
contradicts the keys they follow from is an error naming both keys.
"""

import ml_collections
from ml_collections import config_dict


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # 'train' (resumes the workdir if it has a checkpoint), 'analyze' (analysis only), 'sweep' (the `sweep` group's
  # grid × seeds, each run trained as in 'train' under <workdir>/cells/; experiments/) or 'claim' (a claim's sweep,
  # then its measurement, verdict and figures: configs/claims/, experiments/claims/) or 'baseline' (trains as 'train',
  # then the known-good baseline's test-split record <workdir>/result.json: configs/multi30k_baseline.py).
  config.mode = "train"

  m = config.model = ml_collections.ConfigDict()
  m.preset = "mini"  # Sizes from models.config.PRESETS: 'base' 6+6×512, 'small' 3+3×256, 'mini' 2+2×128, 'tiny'.
  m.arch = "encoder_decoder"  # 'encoder_decoder' (translation), 'decoder' (causal LM), 'encoder' (BERT-style MLM).
  m.num_encoder_layers = config_dict.placeholder(int)  # Encoder layers (None: from preset).
  m.num_decoder_layers = config_dict.placeholder(int)  # Decoder layers (None: from preset).
  m.d_model = config_dict.placeholder(int)  # Residual width d (None: from preset).
  m.num_heads = config_dict.placeholder(int)  # Attention heads (None: from preset).
  m.d_ff = config_dict.placeholder(int)  # MLP hidden width (None: from preset).
  m.head_dim = config_dict.placeholder(int)  # Per-head width d_k (None: d_model // num_heads).
  m.max_len = 256  # Longest position for learned position embeddings.
  m.norm_type = "layernorm"  # 'layernorm' | 'rmsnorm' | 'dyt' | 'derf' (point-wise, no statistics) | 'none' (§5).
  # 'post' | 'pre' (+ final norm) | 'sandwich' | 'peri' (= sandwich, Kim et al. 2025) | 'mix' (Mix-LN) | 'hybrid'
  # (HybridNorm: QKV-norm + Post-LN MLP) | 'reordered' (OLMo 2: x + Norm(F(x)), + final norm) | 'none'
  # (docs/science.md §6; models/placement.py).
  m.norm_position = "post"
  m.mix_ln_ratio = 0.25  # Mix-LN: the first ⌊ratio·L⌋ layers are Post-LN, the rest Pre-LN (Li et al. 2025: 0.25).
  m.layer_norm_scaling = False  # Scale each sublayer's input norm at layer l by 1/√l (Sun et al. 2025, Eq. 8).
  m.norm_epsilon = 1e-6  # ε inside the norm's square root.
  m.norm_alpha_init = 0.5  # DyT / Derf: α₀ of the learnable α (Zhu et al. 2025 §7: 0.5; smaller for wide LLMs).
  m.norm_alpha_init_attention = config_dict.placeholder(float)  # DyT / Derf: α₀ of attention's norms (None: as above).
  m.derf_shift_init = 0.0  # Derf: s₀ of the learnable shift s in erf(α·x + s) (Chen et al. 2025).
  # 'plain' | 'rezero' | 'skipinit' | 'scheduled' | 'deepnorm' | 'admin' | 'layerscale' | 'completep' (§6, §3).
  m.residual = "plain"
  m.skipinit_alpha = 0.0  # SkipInit's α at init.
  m.alpha_init = 0.0  # Scheduled α: value at step 0.
  m.alpha_step = 1e-3  # Scheduled α: increment per update.
  m.alpha_final = 1.0  # Scheduled α: value it stops at.
  m.layerscale_init = config_dict.placeholder(float)  # LayerScale: ε of λ at init (None: CaiT's 0.1 / 1e-5 / 1e-6).
  # 'auto' (µP: 'dk', else 'sqrt_dk') | 'sqrt_dk' (Vaswani) | 'none' (T5) | 'dk' (µP) (docs/science.md §4).
  m.attention_logit_scale = "auto"
  m.qk_norm = False  # QK-norm: model.norm_type on queries and keys per head before the logits (docs/science.md §4).
  m.num_kv_heads = config_dict.placeholder(int)  # GQA's key/value heads (Ainslie et al. 2023); None: num_heads; 1: MQA.
  m.attention_gate = False  # σ(X·W_θ) ⊙ every head's attention output before W_o (Qiu et al. 2025 §2.2).
  m.attn_logit_softcap = 0.0  # c·tanh(z/c) on the attention logits (Gemma Team 2024 §2: 50); 0 = off.
  m.final_logit_softcap = 0.0  # c·tanh(z/c) on the output logits (Gemma Team 2024 §2: 30); 0 = off.
  m.use_bias = True  # Biases in every dense layer and LayerNorm (T5: False).
  m.tie_embeddings = True  # Output logits through the (shared) input embedding.
  m.tied_readout_scale = "none"  # 'none' | 'rsqrt_d': multiply tied logits by d^{-1/2} (T5/t5x).
  # Multiply token embeddings by √d (Vaswani et al. 2017 §3.4; pairs with std d^-1/2 inits).
  m.scale_embeddings = True
  m.position = "sinusoidal"  # 'sinusoidal' | 'learned' | 'rope' (rotary, on queries and keys: Su et al. 2021, Eq. 34).
  m.rope_base = 10000.0  # RoPE's base θ in θ_i = θ^(-2(i-1)/d_k) (Su et al. 2021: 10000).
  m.embedding_norm = False  # LayerNorm on token + position embeddings before the stack (BERT, Devlin et al. 2019 §3).
  m.activation = "relu"  # 'relu' | 'gelu' | 'selu' | 'normalized_relu' | 'normalized_gelu' | 'identity'.
  # 'plain' (act(x·W₁)·W₂) | 'swiglu' | 'geglu' ((Swish(x·W) or GELU(x·W)) ⊙ x·V)·W₂, Shazeer 2020 Eq. 6; no
  # model.activation): the gated MLPs' third matrix W has the role 'mlp_gate' (models/mlp.py).
  m.mlp = "plain"
  m.mlp_multiple_of = 8  # Gated MLP with d_ff unset: d_ff = 8/3·d_model rounded up to a multiple of this (LLaMA: 256).
  m.parameterization = "standard"  # 'standard' | 'ntk' | 'mup' (docs/science.md §3).
  m.mup_base_width = 32  # µP: d_model at which µP equals SP (width_ratio = d_model / this).
  # 'auto' (the parameterization's rule) | 'width': SP with µP's embedding lr, ×d_model/mup_base_width on the token
  # and position embeddings only (Kalra & Barkeshli 2026, arXiv 2605.21486, abstract); needs untied embeddings.
  m.embedding_lr_scale = "auto"
  # completep: branches × (L/depth_base)^-α, in-layer lrs × (L/depth_base)^(α-1); 1 CompleteP, 0.5 Depth-µP.
  m.depth_alpha = 1.0
  m.depth_base = 2  # completep: the depth L_base at which the rule equals the plain residual.
  m.dropout_rate = 0.0  # Dropout on embeddings, branch outputs and the MLP hidden layer.
  m.attention_dropout_rate = 0.0  # Dropout on attention probabilities.
  m.dtype = "float32"  # Compute dtype: 'float32' | 'bfloat16'.
  m.param_dtype = "float32"  # Parameter storage dtype.

  i = config.init = ml_collections.ConfigDict()
  # 'auto' (from model.parameterization / model.residual: mup→mup, ntk→ntk, deepnorm→deepnet, admin→admin,
  # rezero→rezero, else xavier) | xavier | bert | t5 | gpt2 | megatron (= gpt2) | tfixup | dsinit | deepnet | admin |
  # fixup | rezero | ntk | mup | mitchell (OLMo 1) | olmo2 | small_init (init/schemes.py).
  i.scheme = "auto"
  # bert: truncated_normal_tf std before truncation (realized 0.0176); gpt2 / megatron: base normal std; olmo2: std
  # before the ±3σ truncation (realized 0.019732).
  i.std = 0.02
  i.dsinit_alpha = 1.0  # dsinit: the α in (0, 1] of U(±γα/√l) (Zhang, Titov & Sennrich 2019).
  i.mup_readout_zero = True  # mup: untied readout starts at 0 (Yang et al. 2021, App. D.2); False: N(0, 1/fan_in).
  i.mup_query_zero = True  # mup: W_q starts at 0 (Yang et al. 2021, App. D.2); False: N(0, 1/fan_in).

  o = config.optim = ml_collections.ConfigDict()
  o.name = "adam"  # adam | adamw | sgd | adafactor | radam | muon | schedule_free_adamw (train.optimizers.OPTIMIZERS).
  o.learning_rate = 1e-3  # Peak lr η (Noam's factor η_0 when schedule='rsqrt' and rsqrt_d_model > 0).
  o.schedule = "linear_warmup"  # constant | linear_warmup | rsqrt | warmup_rsqrt | warmup_cosine | warmup_linear_decay.
  o.warmup_steps = 1000  # T_w; 0 = no warmup.
  o.untuned_warmup = False  # T_w = 2/(1 − b2) (Ma & Yarats 2021): warmup_steps derived (set it 0 or to that value).
  o.rsqrt_d_model = 0  # d in Noam's d^{-1/2}; 0 = normalise so the peak lr is η at t = T_w.
  o.decay_start = 0  # warmup_rsqrt: step T_d after which lr = η·√(T_d/t); 0 = optim.warmup_steps.
  o.decay_steps = 0  # Horizon of warmup_cosine / warmup_linear_decay, warmup included; 0 = train.num_steps.
  o.min_lr_ratio = 0.0  # End lr of cosine / linear decay, as a fraction of the peak lr.
  o.b1 = 0.9  # Adam/RAdam β1 (Vaswani et al. 2017 §5.3); schedule_free_adamw: the y interpolation β.
  o.b2 = 0.98  # Adam/RAdam β2 (Vaswani et al. 2017 §5.3).
  o.eps = 1e-9  # Adam/RAdam ε (Vaswani et al. 2017 §5.3).
  o.second_moment_init = "zero"  # Adam's ν₀: 'zero' | 'gradient' (ν₀ = g₀², GI-Adam, Kalra & Barkeshli 2024).
  o.weight_decay = 0.0  # Decoupled decay λ (adamw, sgd, adafactor, radam); 0 = off.
  # What decays: 'all' (every parameter) | 'weights' (not norms' gains and shifts, biases or residual scales: BERT's
  # released optimizer excludes LayerNorm and bias; train/optim.py `decay_mask`).
  o.weight_decay_on = "all"
  o.momentum = 0.9  # SGD momentum; 0 = plain SGD.
  o.nesterov = False  # SGD: Nesterov instead of heavy-ball momentum.
  o.grad_clip_norm = 0.0  # Clip the global gradient norm to this; 0 = off.
  o.adafactor_param_scale = True  # Adafactor relative step: lr × max(1e-3, RMS(θ)) (T5).
  o.adafactor_decay_rate = 0.8  # Adafactor second-moment decay exponent (T5).
  o.adafactor_clipping_threshold = 1.0  # Adafactor update-RMS clip (T5); 0 = off.
  o.adafactor_min_dim_size_to_factor = 128  # Adafactor factors matrices with both dims >= this.
  o.muon_beta = 0.95  # muon: Nesterov momentum β of the hidden matrices (Jordan et al. 2024); the rest use b1, b2.
  o.muon_ns_steps = 5  # muon: Newton–Schulz steps orthogonalizing the momentum (Jordan et al. 2024).
  o.muon_consistent_rms = 0.2  # muon: update RMS r, scale r·√max(m, n) (Liu et al. 2025); 0 = √max(1, n/m).
  o.qk_clip = 0.0  # QK-clip τ: rescale W_q, W_k of a head whose max logit > τ (Kimi Team 2025, 100); 0 = off.

  d = config.data = ml_collections.ConfigDict()
  d.name = "embedded"  # Source: 'embedded' (synthetic, offline), 'multi30k', or 'tfds:<name>' e.g. 'tfds:lm1b'.
  d.dir = ""  # multi30k: folder holding {train,val,test_2016_flickr}.{de,en}.gz (read only is fine).
  d.tfds_data_dir = ""  # tfds: data_dir with the dataset prepared as ArrayRecord ('' = tfds default).
  d.source_lang = "de"  # Translation source language (multi30k: 'de'|'en'; tfds: a key of the feature dict).
  d.target_lang = "en"  # Translation target language (ignored by 'embedded', whose direction is fixed).
  d.lm_text_field = "text"  # tfds LM datasets (e.g. lm1b): the text feature; gives {"targets"} batches.
  # '' (the source's task) | 'source' | 'target': a language model on that side of a translation source, {"targets"}
  # batches of its sentences alone (multi30k de→en's 'target' is English; embedded's 'source' is English).
  d.lm_side = ""
  d.train_split = "train"  # tfds split spec for training (e.g. 'train[:10%]'); others must use 'train'.
  d.eval_split = "validation"  # Eval split: 'validation'|'test' (multi30k: val|test_2016_flickr); tfds: any.
  d.vocab_size = 8000  # SentencePiece vocab (joint over both languages); 'embedded' uses its word lexicon.
  d.spm_max_corpus_chars = 10_000_000  # Characters of training text fed to SentencePiece (flax wmt's cap).
  # Folder tried first for the SentencePiece model (read, or written when trained); '' = none (multi30k: next to the
  # data when writable, else <workdir>/tokenizer/). A sweep sets <sweep workdir>/tokenizer/ so its runs share one.
  d.tokenizer_dir = ""
  d.batch_size = 64  # GLOBAL training batch; each of process_count processes gets batch_size/process_count.
  d.eval_batch_size = 64  # GLOBAL eval batch, split across processes like batch_size.
  d.max_source_length = 32  # Source tokens incl. EOS; batches are padded to exactly this (static shapes).
  d.max_target_length = 32  # Target tokens incl. EOS (LM: the sequence length).
  d.length_policy = "drop"  # Longer examples: 'drop' them, or 'truncate' to the limit (keeping a final EOS).
  d.pack = False  # Pack several examples per row (grain first-fit) with *_segmentation / *_position keys.
  d.shuffle_seed = 0  # Seed of the per-epoch shuffle of the training stream.
  d.read_threads = 0  # grain reader threads; 0 = read in the main thread (data sit in memory).
  d.num_eval_examples = 256  # Text pairs returned by eval_examples() for BLEU / exact match.
  d.max_eval_loss_examples = -1  # Cap on validation examples in eval_batches() (-1 = the whole split).
  d.embedded = ml_collections.ConfigDict()
  d.embedded.seed = 0  # Language (lexicon, genders) and sampling seed of the synthetic pair.
  d.embedded.num_train = 50_000  # Synthetic training pairs.
  d.embedded.num_eval = 1_000  # Synthetic validation pairs (and test pairs), disjoint from train.

  a = config.analysis = ml_collections.ConfigDict()
  a.at_init = False  # Train mode: also analyze the model once at step 0 before training.
  a.checkpoint_step = -1  # Analyze mode: checkpoint step to analyze (-1: latest, or init if none; 0: init).
  # 'auto' (float64 on CPU/GPU, float32 on TPU, which has no native float64) | 'float64' (x64 on for the analysis
  # only; model and variables cast) | 'float32'.
  a.dtype = "auto"
  # Lanczos/SLQ progress lines: 'auto' (on from 5M parameters, where a routine runs for minutes; off below, so JAX's
  # persistent compilation cache can store the programs: a host callback keeps a program out of it) | 'on' | 'off'.
  # A sweep's runs never print them.
  a.progress = "auto"
  a.operator = "hessian"  # 'hessian' (exact, indefinite) or 'gauss_newton' (PSD GGN of the cross-entropy).
  a.num_batches = 1  # Batches whose token-weighted average Hessian is analyzed (the first ones given).
  a.batch_size = 16  # Sequences per analysis batch (checked against the batches given).
  a.linearize = True  # Linearize each batch's gradient once (fast, stores residuals) or a jvp per product.
  a.lanczos_steps = 80  # Lanczos steps (matvecs) for the extreme eigenvalues and per SLQ probe.
  a.reorthogonalize = "full"  # 'full' (CGS every step), 'partial' (Simon's PRO: only when needed) or 'none'.
  a.top_k = 5  # Number of largest eigenvalues reported (0: none; no operator is built if no curvature is asked).
  a.bottom_k = 3  # Number of smallest (most negative) eigenvalues reported; 0 skips the bottom run.
  a.spectrum = True  # Compute the SLQ spectral density.
  a.num_probes = 8  # SLQ probes (>= 2: the band is a bootstrap over probes).
  a.probe_batch = 0  # SLQ / trace probes in lockstep (vmapped, memory × this); 0: the backend's measured default.
  a.sigma = 0.0  # SLQ Gaussian smoothing width; 0 means 1% of the range of the nodes.
  a.log_density = True  # Plot the density with a log y axis.
  a.trace_probes = 30  # Matvecs for the trace estimate; 0 skips it.
  a.trace_method = "hutch++"  # 'hutchinson' or 'hutch++'.
  a.blocks = True  # Top eigenvalue of every per-layer block (Q, K, V, O, MLP in/out, norms, embeddings).
  a.block_lanczos_steps = 30  # Lanczos steps per block (capped by the block's size).
  a.block_filter = ""  # Regex: only blocks whose name matches (re.search), e.g. 'encoder/'; '' = every block.
  a.grad_norms = True  # Per-parameter gradient-norm profile.
  a.grad_norm_seeds = 1  # Init seeds for the gradient profile (> 1 needs the caller's init_fn).
  a.signal = True  # Forward signal-propagation profile from the model's intermediates.
  a.param_stats = False  # Realized mean / std / max / kurtosis of every parameter with its role (params.json).
  a.mlp_depth = 0  # > 0: E[x_l²] through this many layers of a LeCun MLP with model.activation (mlp_moments.json).
  a.mlp_width = 512  # Width of that MLP.
  a.mlp_rows = 128  # Gaussian inputs x_0 ~ N(0, I) fed through it.
  a.mlp_draws = 8  # Independent weight draws (keys split from analysis.seed), vmapped.
  # > 0: top eigenvalues of Adam's step-1 preconditioned Hessian P^{-1/2}HP^{-1/2}, P = |g| + optim.eps, and the
  # predicted max stable lr (2 + 2·optim.b1)/((1 − optim.b1)·λ_max) (stability.json; docs/science.md §9); 0: off.
  a.preconditioned_top_k = 0
  a.update_sharpness = False  # Sharpness uᵀHu/‖u‖² along Adam's first update u (stability.json).
  # The Gauss–Newton's λ_max and the batch sharpness over the analysis batches (Andreyev & Beneventano 2024), each
  # with threshold c = 2 on η·λ (stability.json; experiments/claims/shared/edge_rules.py's 'ggn' and 'batch' predictors).
  a.edge_predictors = False
  # train.curvature_every's records: 0 runs a cold Lanczos of lanczos_steps from the same random start at every record;
  # > 0 (e.g. 1e-3) starts each record from the previous record's top Ritz vector (plus a random tenth) and stops as
  # soon as the residual bound is ≤ tracking_tol·|λ| (curvature/lanczos_steps records the matvecs it took).
  a.tracking_tol = 0.0
  # The random part of a warm start, relative to the previous Ritz vector (curvax.warm_start's mix): 0.1 keeps today's
  # records; = tracking_tol makes its residual no larger than the bound asked, so a record needs fewer products.
  a.tracking_mix = 0.1
  a.seed = 0  # PRNG seed of the Lanczos start vectors, SLQ and trace probes, and the MLP moments' weight draws.
  a.max_basis_bytes = 4 * 2**30  # Fail before computing if a Lanczos basis needs more bytes than this.

  t = config.train = ml_collections.ConfigDict()
  t.num_steps = 1500  # Optimizer updates in total (a rerun resumes towards this; 0: init only, e.g. for analyses).
  t.log_every = 50  # Steps between train-metric records and progress lines.
  t.eval_every = 500  # Steps between evaluations (and at the end).
  t.checkpoint_every = 500  # Steps between checkpoints (and at the end).
  t.keep_checkpoints = 3  # Checkpoints kept (oldest deleted).
  t.seed = 0  # Seed of init, dropout and MLM masking keys (data order has data.shuffle_seed).
  t.label_smoothing = 0.0  # Label smoothing of the training loss (eval loss never smoothed).
  t.z_loss = 0.0  # z-loss coefficient: training loss + this·mean log²Z of the output logits (1e-4: PaLM); 0 = off.
  t.mlm_mask_rate = 0.15  # Encoder (MLM) only: fraction of tokens to predict (BERT).
  t.num_decode_examples = 256  # Translation: validation sentences greedily decoded for BLEU / exact match.
  t.decode_max_length = 0  # Longest decoded output (0: data.max_target_length).
  t.grad_norms_every = 0  # Steps between per-parameter gradient-norm records (0: never; computed in-step).
  # Steps between λ_max records of the training-loss Hessian on the analysis batches (0: never; experiments/hooks.py).
  t.curvature_every = 0
  # Evaluate once before the first update (eval record at step 0: the loss at init) and write data_stats.json (the
  # eval targets' unigram entropy): what analysis/outcomes.py classifies a run against (diverged/collapsed/trained).
  t.eval_at_init = False

  # Where each run's scalars go (train/metrics.py, train/trackers.py); files and trackers on process 0 only.
  r = config.metrics = ml_collections.ConfigDict()
  # Any of 'jsonl' (metrics.jsonl: required), 'tensorboard', 'wandb', 'trackio' (pip install it: not a dependency).
  r.writers = ("jsonl", "tensorboard")
  r.project = "transformer-init"  # The W&B / Trackio project of the runs.
  r.group = ""  # The W&B / Trackio group of the run; '' = none (a sweep groups its runs by its workdir's name).

  # Sweep mode (experiments/): the product of the grid's values × seeds, each run trained like mode='train'.
  w = config.sweep = ml_collections.ConfigDict()
  w.grid = ""  # 'key=v1,v2;key2=a,b' over any config keys, e.g. 'optim.warmup_steps=0,400'; '' = base config only.
  # The grid as data, for a config file (a claim): a tuple of products, each a tuple of (key, values) pairs in grid
  # order (values a tuple, or one value, of the key's type), the pair ("arm", label) naming it; the same cells, order
  # and folder names as the same grid written as `grid`, which, when set (the command line's form), takes its place.
  w.products = ()
  w.seeds = 1  # Runs per cell, with train.seed = first_seed .. first_seed + seeds - 1.
  w.first_seed = 0  # The first seed: fresh seeds for a confirmation run (e.g. 3 after a study of seeds 0-2).
  w.analysis_at_init = False  # Also run the `analysis` group's analysis at step 0 of every run (analysis/step_0/).
  # Also analyze these checkpoint steps (> 0) of every run after it trains (analysis/step_<k>/); each must be saved
  # (a multiple of train.checkpoint_every, or train.num_steps) and among the train.keep_checkpoints latest.
  w.analysis_steps = ()
  w.metric = "eval/loss"  # '<split>/<name>' of metrics.jsonl whose final value results.md and the figures show.
  # Where the runs' folders live (cells/<cell>/seed_<s>/, tokenizer/); '' = the sweep's workdir. A study that reads
  # another study's runs (a claim decided on the atlas's cells) sets that sweep's folder: the runs are shared (a
  # finished one is skipped, a missing one trained there) while its results.jsonl, report and claim.json stay its own.
  w.cells_dir = ""
  # JAX's persistent compilation cache for main.py's sweep and claim modes: 'auto' = <runs folder>/jax_cache
  # (the runs of a sweep compile the same programs: an at-init analysis's seeds, the eval steps of its cells), a
  # folder, or '' (off). The claims and studies set 'auto' at cpu and paper scale.
  w.compilation_cache = ""
  # A job array's share of the runs (experiments/shard.py): 'i/N' = the runs whose index ≡ i mod N; 'auto' = from
  # TRANSFORMER_INIT_SHARD=i/N, else a SLURM array's task, else a Kubernetes indexed Job's JOB_COMPLETION_INDEX with
  # sweep.num_shards, else the whole sweep. Every shard shares the workdir; each run is claimed before it trains.
  w.shard = "auto"
  w.num_shards = 0  # a Kubernetes indexed Job's completions (it exports the index, not the count); 0 = not one.
  # 'run' (train this shard's runs; the shard that finds every run done gathers), 'prepare' (validate every cell and
  # build the shared tokenizer once, before an array starts), 'gather' (only write results.jsonl, results.md and
  # the figures from every finished run's record).
  w.stage = "run"
  # Runs at once on this machine: main.py starts this many processes of itself, each a shard of this invocation's
  # runs on its own device(s) (GPUs split between them; not on TPU); 1 = one run at a time in this process.
  w.parallel = 1
  w.claim_timeout_s = 600.0  # a run's claim with no heartbeat for this long is stale (its owner died): taken over.

  # Claim mode (experiments/claims/): set by the configs in configs/claims/, scale by the config string
  # (`--config=configs/claims/<name>.py:tiny`).
  c = config.claim = ml_collections.ConfigDict()
  c.name = ""  # The claim (experiments.registry.CLAIM_NAMES).
  c.scale = "cpu"  # 'tiny' (tests, seconds) | 'cpu' (the committed report, 2 cores) | 'paper' (the papers' sizes).
  # False: run (this shard of) the claim's sweep and stop, with no extension round and no claim.json. The processes
  # of `sweep.parallel` get it: their parent runs an adaptive claim's rounds, each over all of them, and decides.
  c.decide = True
  # A claim.json whose step-0 predictors (measured: lam0, flagged) a study reads instead of measuring its own (study
  # 14 reads study 11's); a path relative to the repository, or absolute. '' = the study's own default.
  c.predictors_from = ""

  # Several processes (hosts) in one run: train/distributed.py; every process runs the same command.
  p = config.distributed = ml_collections.ConfigDict()
  # 'auto' (when a key below is set, JAX_COORDINATOR_ADDRESS is, or JAX detects a Cloud TPU / SLURM / Open MPI /
  # Kubernetes job of several processes) | 'true' (always; unset keys detected) | 'false' (one process).
  p.enabled = "auto"
  p.coordinator_address = ""  # 'host:port' of process 0's coordinator ('' = detect).
  p.num_processes = 0  # Processes in the run (0 = detect).
  p.process_id = -1  # This process's id in [0, num_processes) (-1 = detect).
  p.initialization_timeout = 300  # Seconds to wait for every process to reach the coordinator.

  # The device mesh (data, fsdp) of training (train/step.py); data = devices / fsdp, the batch split over both axes.
  s = config.mesh = ml_collections.ConfigDict()
  s.fsdp = 1  # Devices on the 'fsdp' axis that params and optimizer state are sharded over; 1 = data parallel.
  # (logical axis, mesh axis) pairs, in priority order: logical axes from models.LOGICAL_AXES (models/axes.py), mesh
  # axes 'data' | 'fsdp' | None; a dimension the mesh axis does not divide stays replicated.
  s.rules = (("embed", "fsdp"),)
  return config
