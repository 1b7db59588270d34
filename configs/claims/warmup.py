"""Claim 6 (Xiong et al. 2020): Post-LN needs a learning-rate warmup, Pre-LN does not. Decided per learning rate.

    python main.py --config=configs/claims/warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/warmup
    python main.py --config=configs/claims/warmup.py:tiny   # seconds, on the synthetic task (the tests)

The design (issue 24; measure and verdict: experiments/claims/warmup.py):
  arms      Post-LN + Xavier with each warmup length of `WARMUPS[scale]` (0 and the literature's: 2/(1−β₂) = 100
            steps at β₂ = 0.98, Ma & Yarats 2021, the untuned rule; 4000 at paper, Vaswani et al. 2017 and Xiong et
            al. 2020), and Pre-LN without warmup;
  lrs       a factor-2 grid (`LRS[scale]`) around where Post-LN without warmup fails (the cpu atlas saw it collapse
            from 3.16e-3 and train at 1e-3, configs/atlas.py:cpu at d = 32);
  schedule  `warmup_rsqrt` for every arm, η·min(1, t/T_w)·min(1, √(T_d/t)) with T_d = the longest warmup: every arm
            decays alike from step T_d on (the arms differ in the first T_d steps only; warmup 0 is a constant lr
            until T_d, not a constant lr for the whole run);
  horizon   `train.num_steps` (cpu: 1000), evaluated every 10% of the run; the verdict requires Pre-LN's best cell
            and Post-LN-with-warmup's best cell to be near convergence at it (experiments/claims/warmup.py: the
            validation loss changes by less than 2% over the last 20% of the steps), else it is inconclusive;
  seeds     3 (the decision cells are boundaries); every run evaluated at step 0 (`train.eval_at_init`) so its outcome
            class (analysis/outcomes.py) is read against its loss at init and the unigram reference.
Scales: tiny (tests: 1+1 layers of the tiny preset, 10 steps, lrs {1e-3, 3e-2}, warmup {0, 2}, 1 seed); cpu (the
atlas's model: 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece vocabulary 2000, batch 32, 1000 steps, validation
loss on 256 pairs, no decoding; 3 arms × 4 lrs × 3 seeds = 36 runs, estimated from the atlas's calibration of this
model (~5 steps/s alone, ~20 s of per-run overhead) at ~36 × 220 s ≈ 2.2 h on 2 cores); paper (the papers' recipe,
configs/claims/_training.py's RECIPE, warmup {0, 100, 4000}, 5 lrs, 3 seeds: an accelerator).
Until this design has run at cpu scale, claim 6's record is decided from the atlas (experiments/claims/reproduce.py,
`ATLAS_DECIDED`); the session that runs it removes 'warmup' from that tuple.
"""

from configs.claims._base import check_scale, set_keys
from configs.claims._training import training_config

WARMUPS = {"tiny": (0, 2), "cpu": (0, 100), "paper": (0, 100, 4000)}
LRS = {"tiny": (1e-3, 3e-2), "cpu": (1e-3, 2e-3, 4e-3, 8e-3), "paper": (2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3)}
SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
CPU = {  # the atlas's cpu model and data (configs/atlas.py), run 1000 steps
    "model.d_model": 32,
    "model.num_heads": 2,
    "model.d_ff": 128,
    "data.vocab_size": 2000,
    "data.max_eval_loss_examples": 256,
    "train.num_decode_examples": 0,
    "train.num_steps": 1000,
    "train.log_every": 50,
    "train.eval_every": 100,
    "train.checkpoint_every": 1000,
}


def _values(xs) -> str:
  return ",".join(format(x, "g") for x in xs)


def get_config(scale: str = "cpu"):
  check_scale(scale)
  lrs = _values(LRS[scale])
  grid = (
      f"model.norm_position=post;optim.warmup_steps={_values(WARMUPS[scale])};optim.learning_rate={lrs} | "
      f"model.norm_position=pre;optim.warmup_steps=0;optim.learning_rate={lrs}"
  )
  config = training_config("warmup", scale, grid)
  if scale == "cpu":
    set_keys(config, CPU)
  set_keys(config, {"optim.schedule": "warmup_rsqrt", "optim.decay_start": max(WARMUPS[scale])})
  config.sweep.seeds = SEEDS[scale]
  return config
