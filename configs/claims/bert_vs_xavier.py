"""Claim 9 (Su 2021b): in a Post-LN model BERT's 0.02 init trains without warmup where Xavier's does not; decided per
learning rate on the atlas's cells plus two ablation arms that separate the 0.02 scale from BERT's embedding setup.

    python main.py --config=configs/claims/bert_vs_xavier.py:cpu --config.data.dir=<Multi30k folder> \\
        --config.sweep.cells_dir=runs/atlas/train --workdir=runs/claims/bert_vs_xavier   # shares the atlas's runs
    python main.py --config=configs/claims/bert_vs_xavier.py:tiny   # seconds, on the synthetic task (the tests)

The atlas's BERT arm is BERT's recipe: the 0.02 init (init.scheme 'bert': every table and kernel N(0, 0.02²)
truncated at 2σ, Devlin et al. 2019) with BERT's embedding setup (learned positions, LayerNorm(token + position), no
√d scaling); against Post-LN + Xavier (√d-scaled tokens + sinusoids, no embedding norm) it changes two things at
once. The arms, a 2 × 2 of {this project's embeddings, BERT's} × {Xavier, 0.02}, all Post-LN without warmup:
  'Post-LN + Xavier', 'Post-LN + BERT 0.02'  the atlas's arms;
  'Post-LN + Xavier (BERT's embeddings)'  against 'Post-LN + BERT 0.02' it tests Su 2021b's statement itself, the
      0.02 scale with everything else BERT's: the embedding LayerNorm removes the tables' scale from x_0
      (LN(c·(t + p)) = LN(t + p) up to LayerNorm's ε and BERT's 2σ truncation), so what differs is the scale of the
      kernels and of the tables as parameters (the tied readout's, Adam's relative step). This pair decides; against
      'Post-LN + Xavier' it is the embedding setup's own effect (reported);
  'Post-LN + 0.02 (this project's embeddings)'  init.scheme 'bert' alone: against 'Post-LN + Xavier' it tests the
      0.02 scale in this project's input pipeline, where it also shrinks the √d-scaled tokens (0.0176·√d ≈ 0.1 at
      d = 32) against the sinusoids (mean square 1/2 per entry): reported, not deciding.
lrs, model, seeds: the atlas's (configs/claims/_atlas_cells.py; at cpu 6+6 layers, d = 32, 200 steps, lrs 1e-4 …
3.16e-2), 3 seeds at cpu and paper. Runs at cpu: 4 arms × 6 lrs × 3 seeds = 72, ≈ 45 min on 2 cores, less with
`--config.sweep.cells_dir` (docs/design_log.md). measure/verdict/figure: experiments/claims/bert_vs_xavier.py.
"""

from configs import atlas
from configs.claims._atlas_cells import atlas_claim_config, method_keys
from configs.claims._base import check_scale

XAVIER_BERT_EMBEDDINGS = (*atlas.BERT, *atlas.XAVIER)
BERT_PROJECT_EMBEDDINGS = (("model.norm_position", "post"), ("init.scheme", "bert"))


def get_config(scale: str = "cpu"):
  check_scale(scale)  # before the atlas's tables are read at it
  products = [
      (atlas.NAMES["postln_xavier"], method_keys("postln_xavier", scale)),
      (atlas.NAMES["postln_bert"], method_keys("postln_bert", scale)),
      ("Post-LN + Xavier (BERT's embeddings)", XAVIER_BERT_EMBEDDINGS),
      ("Post-LN + 0.02 (this project's embeddings)", BERT_PROJECT_EMBEDDINGS),
  ]
  return atlas_claim_config("bert_vs_xavier", scale, products)
