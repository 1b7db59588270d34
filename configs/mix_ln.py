"""Mix-LN (Li et al. 2025, "Mix-LN: Unleashing the Power of Deeper Layers by Combining Pre-LN and Post-LN", §4;
docs/science.md §6): Post-LN in the first ⌊0.25·L⌋ layers of each stack, Pre-LN in the others, a final norm.

    python main.py --config=configs/mix_ln.py --config.model.num_encoder_layers=8 --config.model.num_decoder_layers=8
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "mix"
  config.model.mix_ln_ratio = 0.25  # the paper's α
  return config
