"""Claim 6 (Xiong et al. 2020): Post-LN needs a learning-rate warmup, Pre-LN does not. Decided per learning rate.

    python main.py --config=configs/claims/warmup.py:cpu --config.data.dir=<Multi30k folder> \\
        --workdir=runs/claims/warmup
    python main.py --config=configs/claims/warmup.py:tiny   # seconds, on the synthetic task (the tests)

The design (issue 24; measure and verdict: experiments/claims/warmup.py):
  arms      Post-LN + Xavier with each warmup length of `WARMUPS[scale]` (0 and the literature's: 2/(1−β₂) = 100
            steps at β₂ = 0.98, Ma & Yarats 2021, the untuned rule; 400 at cpu, a tenth of the horizon as Vaswani et
            al. 2017 warm up for 4000 steps; 4000 at paper, Vaswani et al. 2017 and Xiong et al. 2020), and Pre-LN
            without warmup;
  lrs       a factor-2 grid (`LRS[scale]`) from where Post-LN without warmup starts to fail upwards; at cpu the
            fresh-seed confirmation runs the rescued η alone (below);
  schedule  `warmup_rsqrt` for every arm, η·min(1, t/T_w)·min(1, √(T_d/t)) with T_d = the longest warmup: every arm
            decays alike from step T_d on (the arms differ in the first T_d steps only; warmup 0 is a constant lr
            until T_d, not a constant lr for the whole run);
  horizon   `train.num_steps` (`HORIZON[scale]`), evaluated every 10% of the run: the failing arm must stay on the
            unigram plateau through its second half (experiments/claims/warmup.py);
  seeds     3 (the decision cells are boundaries; fresh ones, 3–5, at cpu: `FIRST_SEED`); every run evaluated at step 0
            (`train.eval_at_init`) so its outcome
            class (analysis/outcomes.py) is read against its loss at init and the unigram reference.
Scales: tiny (tests: 1+1 layers of the tiny preset, 10 steps, lrs {1e-3, 3e-2}, warmup {0, 2}, 1 seed); cpu (the
atlas's model: 6+6 layers, d = 32, 2 heads, d_ff 128, SentencePiece vocabulary 2000, batch 32, validation loss on 256
pairs, no decoding; 4 arms × 1 lr × 3 fresh seeds = 12 runs of `HORIZON['cpu']` steps, ≈ 86 min on 2 cores); paper (the papers' recipe,
configs/claims/_training.py's RECIPE, warmup {0, 100, 4000}, 5 lrs, 3 seeds: an accelerator).

Why the cpu design is what it is (the rules in experiments/claims/warmup.py did not change). Its first run (1000
steps, lrs {1, 2, 4, 8}e-3, warmup {0, 100}; 36 runs at 1113f91, 4706 s on 2 cores) was inconclusive, and its record
named the changes that decide it: Post-LN without warmup trained at 1e-3 and 2e-3, was mixed at 4e-3 (one of 3 seeds
collapsed) and collapsed at 8e-3, where warmup 100 was mixed too (2 of 3 collapsed); and the best Pre-LN and
Post-LN-with-warmup cells still improved by 4–5% over the last 200 steps. So this design moves the grid up one
factor of 2 ({4, 8, 16}e-3: the boundary cell 4e-3 and two above it), adds the longer warmup 400 and lengthens the
horizon to 3000 steps (~3.3 epochs of Multi30k at batch 32; 36 runs ≈ 3.8 h on 2 cores at the ~8 steps/s the first
run measured). The horizon was fixed before any of these runs, from the first run's curves (the slowest
still-improving cell changed by 4–5% per 200 steps at 1000 under a decaying lr) and the cost, not from the new runs.
On the H200 this model trains at 28.7 steps/s alone after ~50 s of start-up and compile (one run of 300 steps,
2026-11-26), so the accelerator does not make these 36 small runs cheap: they run on the CPU.
What the 3000-step record says of a longer horizon (2026-11-27, read off its curves, no new runs): fitting
L(t) = a + b·t^(−c) to each deciding run's validation curve from step 900 on, the best Pre-LN cell (8e-3) would meet
the 2% rule by 6,000–9,000 steps, but Post-LN with warmup 400 declines log-linearly (fitted c → 0 at 4e-3: the rule
is not met within 100,000 steps; 27,500 for one seed at 8e-3). No cpu horizon within the budget decides the rule as
stated; the `paper` config on an accelerator, or a rule stated anew before new runs, would.
The rule was stated anew (issue 40: about the failing arm) after that record (36 runs, seeds 0–2, lrs {4, 8, 16}e-3,
its commit in the record's trained_at; its re-reading by the new rule is the record's until the confirmation lands), so the cpu config
now confirms it on fresh seeds 3–5 at the η that record rescued, 8e-3, with every arm: their verdict is the one
reported.
"""

from configs.claims._base import check_scale, set_keys
from configs.claims._training import training_config

WARMUPS = {"tiny": (0, 2), "cpu": (0, 100, 400), "paper": (0, 100, 4000)}
LRS = {"tiny": (1e-3, 3e-2), "cpu": (8e-3,), "paper": (2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3)}  # cpu: the confirmation's η
SEEDS = {"tiny": 1, "cpu": 3, "paper": 3}
FIRST_SEED = {"tiny": 0, "cpu": 3, "paper": 0}  # cpu: fresh seeds (the rule changed after seeds 0–2: docstring)
HORIZON = {"cpu": 3000}  # steps (the module docstring says how it was chosen); tiny and paper keep their presets'
CPU = {  # the atlas's cpu model and data (configs/atlas.py)
    "model.d_model": 32,
    "model.num_heads": 2,
    "model.d_ff": 128,
    "data.vocab_size": 2000,
    "data.max_eval_loss_examples": 256,
    "train.num_decode_examples": 0,
    "train.num_steps": HORIZON["cpu"],
    "train.log_every": 100,
    "train.eval_every": HORIZON["cpu"] // 10,
    "train.checkpoint_every": HORIZON["cpu"],
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
  config.sweep.first_seed = FIRST_SEED[scale]
  return config
