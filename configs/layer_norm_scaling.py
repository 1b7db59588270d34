"""LayerNorm scaling (Sun et al. 2025, "The Curse of Depth in Large Language Models", §4, Eq. 8; docs/science.md §6):
Pre-LN with the output of each sublayer's input norm at layer l multiplied by 1/√l.

    python main.py --config=configs/layer_norm_scaling.py --config.model.num_decoder_layers=12
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.model.layer_norm_scaling = True
  return config
