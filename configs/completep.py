"""CompleteP (Dey et al. 2025, "Don't be lazy: CompleteP enables compute-efficient deep transformers", Table 1;
docs/science.md §3): Pre-LN with every residual branch multiplied by (L/L_base)^{−1}, the learning rates inside the
layers × (L/L_base)^0 = 1, the init unchanged with depth, so the learning rate tuned at L_base = 2 layers transfers to
deeper stacks. `--config.model.depth_alpha=0.5` is Depth-µP (Bordelon et al. 2024): branches × (L/L_base)^{−1/2},
in-layer learning rates × (L/L_base)^{−1/2}.

    python main.py --config=configs/completep.py --config.model.num_encoder_layers=16 --config.model.num_decoder_layers=16
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.model.residual = "completep"
  config.model.depth_alpha = 1.0  # CompleteP; 0.5: Depth-µP
  config.model.depth_base = 2  # the tuned base depth (the 'mini' preset's)
  return config
