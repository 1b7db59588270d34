"""The atlas's training-length probe: how many steps Post-LN with warmup needs to come within 0.2 nats of Pre-LN.

Issue 15 asks the atlas to train long enough that its best Post-LN + Xavier run with warmup ends within
`CLOSE_NATS` = 0.2 nats of its best Pre-LN run, and to state the step count that needed. The grid's runs are short
(train.num_steps; 200 at cpu, what 240 runs allow on 2 CPU cores in the 3-hour budget), so the count is measured by
a probe instead: the two methods, each at `PROBE_LR` = 1e-3 (Adam's usual peak for models of this size, and Post-LN's
best lr in the grid's first cells), Post-LN with the atlas's warmup and Pre-LN without, trained `PROBE_STEPS` steps
with the validation loss every `PROBE_EVERY` steps. gap(t) = loss_PostLN+warmup(t) − loss_PreLN(t) at each
evaluated step t; the steps needed are the first evaluated t from which the gap stays ≤ `CLOSE_NATS` through the
probe's end (None: never within the probe). One seed: the probe measures a horizon, not a difference between methods.

Contract: `probe_config(config)` is the probe's sweep config (the atlas config with a two-product grid, PROBE_STEPS
steps, no analysis); `gap_curve(post, pre)` and `steps_needed(curve)` are pure; `measure(workdir)` reads the probe's
runs (`<workdir>/length/`, its results.jsonl as experiments.study's `Results`) and returns {curve,
steps_needed, post_final, pre_final, steps, lr} or None before both runs have an evaluation.
"""

import os
from typing import Optional

import ml_collections

from experiments import grid as grid_lib
from experiments import study
from experiments.atlas import cells as cells_lib
from experiments.report import log_loss_axis, plt, redrawn_on_change, save_figure, suptitle

CLOSE_NATS = 0.2  # the "within 0.2 nats"
PROBE_LR = 1e-3
PROBE_STEPS = {"tiny": 6, "cpu": 2000, "paper": 100_000}
PROBE_EVERY = {"tiny": 3, "cpu": 100, "paper": 5000}
FOLDER = "length"


def probe_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """The probe's sweep: Post-LN + Xavier with the atlas's warmup and Pre-LN without, at PROBE_LR, one seed."""
  scale = config.claim.scale
  warmup = max(int(v) for v in _warmups(config))
  out = cells_lib.base_config(config)  # without the axis parts' group, which no run reads
  out.sweep.grid = (
      f"Post-LN + Xavier (warmup {warmup}): model.norm_position=post;init.scheme=xavier;optim.warmup_steps={warmup} | "
      "Pre-LN (warmup 0): model.norm_position=pre;init.scheme=xavier;optim.warmup_steps=0"
  )
  out.sweep.seeds = 1
  out.sweep.analysis_at_init = False
  out.sweep.analysis_steps = ()
  out.optim.learning_rate = PROBE_LR
  out.train.num_steps = PROBE_STEPS[scale]
  out.train.eval_every = out.train.log_every = PROBE_EVERY[scale]
  out.train.checkpoint_every = max(PROBE_EVERY[scale], PROBE_STEPS[scale] // 4)
  return out


def _warmups(config: ml_collections.ConfigDict) -> list:
  return [
      v for k, values in grid_lib.parse_grid(config.sweep.grid, config) if k == "optim.warmup_steps" for v in values
  ]


def gap_curve(post: dict[int, float], pre: dict[int, float]) -> list[tuple[int, float]]:
  """[(t, post(t) − pre(t))] at the steps both runs evaluated, in step order."""
  return [(t, post[t] - pre[t]) for t in sorted(set(post) & set(pre))]


def steps_needed(curve: list[tuple[int, float]], close: float = CLOSE_NATS) -> Optional[int]:
  """The first evaluated step from which the gap stays ≤ `close` to the end of the curve (None: never)."""
  needed = None
  for t, gap in curve:
    if gap <= close:
      needed = t if needed is None else needed
    else:
      needed = None
  return needed


def _eval_losses(run: Optional[study.Run]) -> dict[int, float]:
  return {r["step"]: r["loss"] for r in run.metrics(split="eval") if "loss" in r} if run else {}


def measure(config: ml_collections.ConfigDict, workdir: str) -> Optional[dict]:
  """The probe's curve and step count (module docstring); None before both runs have evaluated."""
  probe = probe_config(config)
  runs = study.Results.load(os.path.join(workdir, FOLDER)).by_run()
  post_cell, pre_cell = grid_lib.cells(probe)
  post, pre = _eval_losses(runs.get((post_cell.name, 0))), _eval_losses(runs.get((pre_cell.name, 0)))
  curve = gap_curve(post, pre)
  if not curve:
    return None
  return dict(
      curve=curve,
      steps_needed=steps_needed(curve),
      post=sorted(post.items()),
      pre=sorted(pre.items()),
      steps=probe.train.num_steps,
      lr=PROBE_LR,
      warmup=max(int(v) for v in _warmups(config)),
      close=CLOSE_NATS,
  )


@redrawn_on_change("length_probe.png")
def figure(m: dict, out_dir: str, *, path: str) -> str:
  """length_probe.png: both runs' validation loss against the step (left) and the gap with the 0.2-nat line (right)."""
  fig, (ax, gx) = plt.subplots(1, 2, figsize=(10, 4))
  ax.plot(*zip(*m["post"]), "o-", ms=3, label=f"Post-LN + Xavier, warmup {m['warmup']}")
  ax.plot(*zip(*m["pre"]), "o-", ms=3, label="Pre-LN, no warmup")
  ax.set(xlabel="step", ylabel="validation loss (nats)", title=f"lr {m['lr']:g}, one seed")
  log_loss_axis(ax, [v for _, v in m["post"]] + [v for _, v in m["pre"]])
  ax.legend(fontsize=8)
  gx.plot(*zip(*m["curve"]), "o-", ms=3, color="k")
  gx.axhline(m["close"], ls="--", color="tab:green", label=f"{m['close']} nats")
  if m["steps_needed"] is not None:
    gx.axvline(m["steps_needed"], ls=":", color="tab:green", label=f"within from step {m['steps_needed']}")
  gx.set(xlabel="step", ylabel="gap (nats): Post-LN + warmup − Pre-LN", title="training-length probe")
  suptitle(fig, f"{m['steps']} steps at the atlas's cpu model: Post-LN + Xavier with warmup vs Pre-LN without")
  gx.legend(fontsize=8)
  return save_figure(fig, path)


def markdown(m: Optional[dict], grid_steps: int) -> str:
  """The report's paragraph on the training length (module docstring)."""
  if m is None:
    return "Training-length probe: not run yet (`--config.atlas.parts=length`)."
  last_t, last_gap = m["curve"][-1]
  done = f"{last_t} of {m['steps']} steps evaluated" + ("" if last_t >= m["steps"] else " (running)")
  at_grid = [g for t, g in m["curve"] if t == grid_steps]
  if m["steps_needed"] is None:
    verdict = f"the gap never stayed within {m['close']} nats (last: {last_gap:+.3f} at step {last_t})"
  else:
    verdict = f"the gap stays within {m['close']} nats from step {m['steps_needed']} (last: {last_gap:+.3f})"
  grid = f"; at the grid's {grid_steps} steps it is {at_grid[0]:+.3f} nats" if at_grid else ""
  return (
      f"Training-length probe (experiments/atlas/length.py; Post-LN + Xavier with warmup {m['warmup']} vs Pre-LN "
      f"without, lr {m['lr']:g}, one seed; {done}): {verdict}{grid}."
  )
