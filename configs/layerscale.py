"""LayerScale (Touvron et al. 2021, "Going deeper with Image Transformers" (CaiT), §2.2, Eq. 4; docs/science.md §6):
Pre-LN with x + λ ⊙ F(Norm(x)), λ a learnable vector per branch starting at ε = 0.1 in every channel (the paper's ε
for depths up to 18; 1e-5 at 24, 1e-6 deeper, `models.residual.layerscale_epsilon`).

    python main.py --config=configs/layerscale.py
    python main.py --config=configs/layerscale.py --config.model.num_decoder_layers=24   # ε = 1e-5 by depth
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"  # CaiT's blocks are Pre-LN
  config.model.residual = "layerscale"  # ε from the depth (model.layerscale_init=None)
  return config
