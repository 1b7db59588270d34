"""A modern decoder-only language model, LLaMA's recipe (Touvron et al. 2023, "LLaMA", §2.2 "Architecture" and
§2.3 "Optimizer"; docs/science.md §4-6) at a size that trains on 2 CPU cores in minutes: Pre-RMSNorm
(Zhang & Sennrich 2019) with a final norm, rotary positions (Su et al. 2021, Eq. 34), SwiGLU MLPs (Shazeer 2020,
Eq. 6) of width 8/3·d rounded up to a multiple of 64, no biases, untied input and output embeddings, grouped-query
attention (Ainslie et al. 2023, §2.2; LLaMA 2's 34B/70B) with 2 key/value heads for 4 query heads; AdamW β = (0.9,
0.95), ε 1e-5, weight decay 0.1, clip 1.0, a cosine decay to 10% of the peak lr after a linear warmup.

    python main.py --config=configs/llama_style.py --workdir=runs/llama_style              # embedded data, offline
    python main.py --config=configs/llama_style.py --config.data.name=multi30k \
        --config.data.dir=../shared/data/multi30k --workdir=runs/llama_style_m30k          # English side of Multi30k

The data: a language model on the target side of the translation source (`data.lm_side='target'`): English for
Multi30k De→En (its 29,000 training captions), the synthetic SOV language for 'embedded'. Sentences are packed into
rows of 64 tokens. Validation perplexity is exp(eval/loss). Where this differs from LLaMA, and why: init 'megatron'
(N(0, 0.02²), output projections ÷ √(2L): Megatron-LM's, which LLaMA's paper does not state); every parameter
decays (`optim.weight_decay_on='all'`: the paper does not say which; 'weights' leaves the norms out); Adam's ε 1e-5 is LLaMA 2's (Touvron et al. 2023b, §2.2); LLaMA rounds d_ff
to a multiple of 256, which at width 128 would give 4·d; the sizes are shrunk to 4 layers of width 128, d_k 32.
"""

from configs import default


def get_config():
  config = default.get_config()
  m = config.model
  m.arch = "decoder"
  m.num_decoder_layers, m.d_model, m.num_heads = 4, 128, 4  # d_k = 32
  m.num_kv_heads = 2  # GQA: 2 query heads share each key/value head (Ainslie et al. 2023)
  m.norm_type, m.norm_position = "rmsnorm", "pre"  # Pre-RMSNorm + final norm (LLaMA §2.2)
  m.norm_epsilon = 1e-5  # LLaMA's rms_norm_eps
  m.position = "rope"
  m.rope_base = 10000.0  # Su et al. 2021; LLaMA 1 and 2
  m.mlp = "swiglu"
  m.mlp_multiple_of = 64  # d_ff = 8/3·d rounded up to a multiple of 64: 384 (LLaMA's 256 would give 4·d)
  m.use_bias = False
  m.tie_embeddings = False
  m.scale_embeddings = False  # LLaMA feeds the token embedding as is
  config.init.scheme = "megatron"
  config.init.std = 0.02
  o = config.optim
  o.name = "adamw"
  o.learning_rate = 1e-3
  o.b1, o.b2, o.eps = 0.9, 0.95, 1e-5  # LLaMA §2.3; ε: LLaMA 2 §2.2
  o.weight_decay = 0.1
  o.grad_clip_norm = 1.0
  o.schedule = "warmup_cosine"
  o.warmup_steps = 100
  o.min_lr_ratio = 0.1  # LLaMA: the final lr is 10% of the peak
  d = config.data
  d.lm_side = "target"
  d.batch_size = 32
  d.eval_batch_size = 64
  d.max_target_length = 64  # LM rows; the source length is unused
  d.pack = True
  t = config.train
  t.num_steps = 600  # its time and validation perplexity on 2 CPU cores: reports/llama_style.md
  t.log_every = 50
  t.eval_every = 200
  t.checkpoint_every = 200
  t.keep_checkpoints = 2
  t.num_decode_examples = 0  # a language model: no translation to decode
  return config
