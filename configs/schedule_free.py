"""Schedule-free AdamW (Defazio et al. 2024): no decay schedule, a linear warmup γ_t = η·min(1, t/T_w) read at the
same step t by the z update and the averaging weight c_{t+1} = γ_t²/Σγ_i²; training steps at y, evaluation at x, the
γ²-weighted average of the z's (train/schedule_free.py, docs/science.md §8). Pre-LN.

    python main.py --config=configs/schedule_free.py
    python main.py --config=configs/schedule_free.py --config.optim.warmup_steps=0 --config.optim.schedule=constant
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model.norm_position = "pre"
  config.optim.name = "schedule_free_adamw"
  config.optim.schedule = "linear_warmup"
  config.optim.b1 = 0.9  # the interpolation β of y = (1 − β)·z + β·x
  return config
