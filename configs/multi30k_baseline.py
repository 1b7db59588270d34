"""A known-good baseline (issue 24, item 8): the small Transformer that widely used tutorials train on Multi30k De→En.

    python main.py --config=configs/multi30k_baseline.py --config.data.dir=<Multi30k folder> \
        --workdir=runs/multi30k_baseline        # train, then test-2016 BLEU -> runs/multi30k_baseline/result.json
    cp runs/multi30k_baseline/result.json reports/baseline/result.json   # the record the report reads

The recipe of two tutorials:
  * Ben Trevett, pytorch-seq2seq, notebook 6 "Attention is All You Need" (github.com/bentrevett/pytorch-seq2seq):
    3+3 layers, d_model (HID_DIM) 256, 8 heads, d_ff (PF_DIM) 512, dropout 0.1, Adam lr 5e-4 (constant, no warmup,
    no label smoothing), batch 128, gradient clip 1, 10 epochs, Xavier-uniform init, learned positions, Post-LN; it
    reports test BLEU 36.09 (35-36 across the notebook's versions) with torchtext's `bleu_score` on lowercased spaCy
    tokens of greedy translations (at most 50 tokens);
  * the PyTorch tutorial "Language Translation with nn.Transformer and torchtext" (pytorch.org/tutorials/beginner/
    translation_transformer.html): 3+3 layers of nn.Transformer, d_ff 512, 8 heads, batch 128, Adam (β 0.9, 0.98,
    ε 1e-9) at a constant lr, sinusoidal positions, embeddings scaled by √d; it reports no BLEU.
Where this config differs, and why: Pre-LN with a final norm (Xiong et al. 2020; Trevett's layers are Post-LN) so that
no warmup is needed at lr 5e-4; one joint SentencePiece vocabulary of 8000 pieces with tied embeddings (the tutorials:
spaCy words, min frequency 2, separate embeddings); sinusoidal positions (the PyTorch tutorial's; Trevett learns
them); Adam's β2 0.98, ε 1e-9 (the PyTorch tutorial's, Vaswani et al. 2017 §5.3; Trevett keeps PyTorch's 0.999, 1e-8);
a batch is 35 rows of 64 tokens into which pairs are packed, 129 pairs on average (the tutorials: 128 padded pairs).
Training evaluates on the validation split each epoch; `mode` baseline (main.py, experiments/baseline.py) then scores
test-2016 (1,000 pairs) from the final checkpoint as sacreBLEU (the headline) and as lowercased BLEU (`bleu_lc`,
train/decode.py), which the tutorials' torchtext `bleu_score` on lowercased spaCy tokens approximates.
"""

from configs import default

EPOCHS = 10
TRAIN_PAIRS = 29_000  # Multi30k task 1 train (Elliott et al. 2016); no pair is longer than the limits below
# Pairs are packed (first fit) into rows of 64 tokens: padding every pair to 64 would cost 3.7× the compute. 35 rows
# hold 129.2 pairs on average (115-139; measured over the first 450 batches), the tutorials' batch of 128 sentences.
ROWS = 35
STEPS_PER_EPOCH = 225  # 29,000 / 129.2 = 224.4


def get_config():
  config = default.get_config()
  config.mode = "baseline"  # train as 'train', then the test split's record (experiments/baseline.py)
  m = config.model
  m.preset = "small"
  m.num_encoder_layers, m.num_decoder_layers = 3, 3
  m.d_model, m.num_heads, m.d_ff = 256, 8, 512
  m.norm_position = "pre"
  m.dropout_rate = 0.1
  m.attention_dropout_rate = 0.1  # Trevett drops attention probabilities too
  config.init.scheme = "xavier"
  o = config.optim
  o.name = "adam"
  o.learning_rate = 5e-4
  o.schedule = "constant"  # both tutorials: a constant lr, no warmup
  o.warmup_steps = 0
  o.grad_clip_norm = 1.0
  d = config.data
  d.name = "multi30k"
  d.dir = ""  # the user's folder: --config.data.dir
  d.batch_size = ROWS
  d.pack = True
  d.eval_batch_size = 64  # evaluation is not packed: pairs padded to 64
  # The longest Multi30k pair is 56 SentencePiece tokens with EOS (train; test 44): every pair is kept.
  d.max_source_length = 64
  d.max_target_length = 64
  d.eval_split = "validation"
  d.num_eval_examples = 1014  # every validation pair
  t = config.train
  t.num_steps = EPOCHS * STEPS_PER_EPOCH
  t.label_smoothing = 0.0  # neither tutorial smooths
  t.log_every = 50
  t.eval_every = STEPS_PER_EPOCH  # once per epoch, as the tutorials report validation loss
  t.checkpoint_every = STEPS_PER_EPOCH
  t.keep_checkpoints = 2
  t.num_decode_examples = 64  # validation BLEU on a subset during training; the test BLEU decodes all 1,000
  # Decoding re-runs the decoder at every position (train/decode.py), O(T²): 48 tokens, above the longest test
  # reference (37) and validation reference (44), instead of 64.
  t.decode_max_length = 48
  return config
