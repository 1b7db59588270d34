"""Claim 6 (Xiong et al. 2020): Post-LN needs a learning-rate warmup, Pre-LN does not; decided per learning rate.

The statement tested, quoted (Xiong et al. 2020, abstract): "for the original-designed Post-LN Transformer [...] the
expected gradients of the parameters near the output layer are large. Therefore, using a large learning rate on those
gradients makes the training unstable. The warm-up stage is practically helpful for avoiding this problem. [...]
Pre-LN Transformers without the warm-up stage can reach comparable results with baselines". Their Fig. 2 shows it on
IWSLT14 De→En: Post-LN without warmup ends far worse, Post-LN with warmup and Pre-LN without it train.

Measured (configs/claims/warmup.py: Post-LN + Xavier × warmup lengths and Pre-LN without warmup × a factor-2 lr grid
× ≥ 3 seeds): each run's outcome class (analysis/outcomes.py), final validation loss and validation curve. A cell
(arm, lr) *fails* when at least half its seeds collapsed or diverged, *trains* when more than half trained.

Rules (issue 40, stated before the fresh-seed runs; their history: docs/design_log.md):
  rescued η   Post-LN without warmup fails at η and Post-LN with a warmup length of the grid trains at η;
  the failing arm, at a rescued η: every collapsed seed of the cell without warmup stays within δ = 0.1 nat of the
              unigram entropy H through the second half of the run, and the cell ends ≥ 1 nat above the rescued
              cell (the Welch 95% interval of their mean final losses' difference; a diverged seed counts as above);
  reproduced  a rescued η whose failing arm holds, whose deciding cells have ≥ `MIN_SEEDS` = 3 seeds, and where
              Pre-LN without warmup trains;
  not reproduced  Post-LN with warmup trains at some η, Post-LN without warmup fails at some η, yet no η is rescued
              (or Pre-LN fails at every rescued η);
  inconclusive  otherwise, saying which change decides it: the failing arm (more seeds or steps), the grid (larger or
              smaller lrs), the seeds (fewer than 3, or mixed), a crashed run, or runs without a class.
*Near convergence* (the loss changed < `CONVERGED` = 2% over the last 20% of the steps) is reported, not judged.
"""

import math
from typing import Optional

import numpy as np
import scipy.stats

from analysis import outcomes
from experiments import plots, stats, study
from experiments.claims.shared.cells import FAILED, MARKERS, MIN_SEEDS, MIXED, Cells, cell_class

CONVERGED = 0.02  # relative change of the validation loss over the last 20% of the steps
THRESHOLDS = {
    "cells": "a cell fails when at least half its seeds collapsed or diverged and trains when more than half trained "
    f"(analysis/outcomes.py); a deciding cell needs ≥ {MIN_SEEDS} seeds",
    "rescued η": "Post-LN without warmup fails at η and Post-LN with a warmup of the grid trains at η",
    "the failing arm": "at a rescued η, every collapsed seed without warmup within 0.1 nat of the unigram entropy at "
    "every evaluation of the run's second half, and the cell's mean final loss ≥ 1 nat above the rescued cell's "
    "(Welch 95% interval)",
    "reproduced": "a rescued η where the failing arm holds and Pre-LN without warmup trains",
    "not reproduced": "Post-LN with warmup trains somewhere, without fails somewhere, and no η is rescued (or Pre-LN "
    "fails at every rescued η)",
}


def near_convergence(curve: list[tuple[int, float]], steps: int) -> Optional[bool]:
  """Whether the validation loss changed by < CONVERGED (relative) over the last 20% of `steps`; None without an
  evaluation at the end and one at or before 80% of the run, or with a non-finite loss."""
  end = [l for s, l in curve if s == steps]
  before = [l for s, l in curve if s <= 0.8 * steps]
  if not end or not before or not all(map(stats.finite, (end[0], before[-1]))):
    return None
  return abs(end[0] - before[-1]) < CONVERGED * abs(before[-1])


DELTA, GAP = outcomes.COLLAPSE_MARGIN, 1.0  # nats: the plateau's width and the failing arm's least gap


def plateau(curve: list, entropy: float, steps: int) -> bool:
  """Every evaluation of the second half of the run (step ≥ steps/2) within `DELTA` of the unigram entropy."""
  late = [loss for step, loss in curve if step >= steps / 2]
  return bool(late) and all(stats.finite(v) and abs(v - entropy) <= DELTA for v in late)


def gap_interval(failing: list[Optional[float]], rescued: list[float]) -> Optional[tuple[float, float, float]]:
  """(difference of mean final losses, Welch 95% interval) of the failing cell over the rescued cell; a diverged
  failing seed (None) is left out (it lies above any finite loss), (inf, inf, inf) when every one diverged; None
  with fewer than 2 finite values on a side."""
  f = [v for v in failing if v is not None]
  if not f and failing:
    return (math.inf, math.inf, math.inf)
  if len(f) < 2 or len(rescued) < 2:
    return None
  test = scipy.stats.ttest_ind(f, rescued, equal_var=False)
  ci = test.confidence_interval(0.95)
  return float(np.mean(f) - np.mean(rescued)), float(ci.low), float(ci.high)


def failing_arm(m: dict, lr: str) -> dict:
  """The failing-arm rule (module docstring) at `lr` (a cell key): {"ok", "plateau", "gap", "against", "text"}."""
  arms, steps, h = m["arms"], m["steps"], m.get("unigram_entropy")
  post = {a["warmup"]: a for a in arms.values() if a["norm"] == "post"}
  fail = post[0]["cells"][lr]
  rescued = {w: a["cells"][lr] for w, a in post.items() if w and lr in a["cells"] and cell_class(
      [r["cls"] for r in a["cells"][lr]]) == outcomes.TRAINED}  # fmt: skip
  if h is None or not rescued:
    return {"ok": False, "text": "no unigram entropy recorded" if h is None else "no rescued cell"}
  w = min(rescued, key=lambda k: np.mean([r["final_loss"] for r in rescued[k]]))
  stuck = [plateau(r["curve"], h, steps) for r in fail if r["cls"] == outcomes.COLLAPSED]
  gap = gap_interval([r["final_loss"] for r in fail], [r["final_loss"] for r in rescued[w]])
  ok = all(stuck) and gap is not None and gap[1] >= GAP
  text = (
      f"at η {lr}, without warmup {sum(stuck)} of {len(stuck)} collapsed seeds on the plateau (±{DELTA:g} nat of "
      f"H = {h:.4g}) through the second half; its final loss minus warmup {w}'s "
      + (f"{gap[0]:.3g} [{gap[1]:.3g}, {gap[2]:.3g}]" if gap else "without an interval")
      + f" (≥ {GAP:g} nat needed)"
  )
  return {"ok": ok, "plateau": stuck, "gap": gap, "against": w, "text": text}


def rescue(c0: Cells, cws: dict[int, Cells], cp: Cells, *, min_seeds: int = MIN_SEEDS) -> tuple[str, str, dict]:
  """(verdict, reason, numbers) of the per-lr rule on cells: Post-LN without warmup `c0`, with warmup W `cws[W]`,
  Pre-LN without warmup `cp` (module docstring; the horizon is the caller's)."""
  show = lambda c: ", ".join(f"{lr:g} {cls}" for lr, (cls, _) in sorted(c.items()))
  fails = sorted(lr for lr, (cls, _) in c0.items() if cls in FAILED)
  trains_w = sorted({lr for cw in cws.values() for lr, (cls, _) in cw.items() if cls == outcomes.TRAINED})
  by_w = {w: sorted(lr for lr in fails if cw.get(lr, ("", 0))[0] == outcomes.TRAINED) for w, cw in cws.items()}
  rescued = sorted({lr for lrs in by_w.values() for lr in lrs})
  pre_fails = [lr for lr in rescued if cp.get(lr, ("", 0))[0] != outcomes.TRAINED]
  numbers = {
      "rescued lrs": rescued,
      **{f"rescued by warmup {w}": lrs for w, lrs in by_w.items()},
      "Post-LN fails without warmup at": fails,
      "Pre-LN fails (no warmup) at a rescued lr": pre_fails,
  }
  lrs = lambda xs: "{" + ", ".join(format(x, "g") for x in xs) + "}" if xs else "none"
  reason = (
      f"cells by class: Post-LN without warmup [{show(c0)}]; "
      + "; ".join(f"with warmup {w} [{show(cw)}]" for w, cw in cws.items())
      + f"; Pre-LN without warmup [{show(cp)}]; warmup rescues Post-LN at η {lrs(rescued)}"
  )
  if not trains_w:
    return study.INCONCLUSIVE, reason + "; Post-LN with warmup trains at no η: smaller lrs or more steps", numbers
  if not fails:
    return study.INCONCLUSIVE, reason + "; Post-LN without warmup never fails: extend the lr grid upwards", numbers
  if not rescued:
    mixed = sorted({lr for lr in fails for cw in cws.values() if cw.get(lr, ("", 0))[0] == MIXED})
    mixed += [lr for lr, (cls, _) in c0.items() if cls == MIXED]
    if mixed:
      return study.INCONCLUSIVE, reason + f"; mixed seeds at η {lrs(sorted(set(mixed)))}: more seeds", numbers
    return study.NOT_REPRODUCED, reason, numbers
  deciding = [c0, cp, *[cws[w] for w, xs in by_w.items() if xs]]
  few = sorted({lr for lr in rescued for c in deciding if c.get(lr, ("", 0))[1] < min_seeds})
  if len(pre_fails) == len(rescued) and not few:
    return study.NOT_REPRODUCED, reason + "; Pre-LN fails at every rescued η", numbers
  if few:
    return (
        study.INCONCLUSIVE,
        reason + f"; the deciding cells at η {lrs(few)} have fewer than {min_seeds} seeds: run more",
        numbers,
    )
  if pre_fails:
    return study.NOT_REPRODUCED, reason + f"; Pre-LN fails at η {lrs(pre_fails)}", numbers
  return study.REPRODUCED, reason, numbers


def _run(run: study.Run, steps: int) -> dict:
  curve = [(m["step"], m["loss"]) for m in run.metrics("eval") if "loss" in m]
  loss = run.final.get("eval/loss")
  return dict(
      seed=run.seed,
      cls=run.record.get("class"),
      final_loss=float(loss) if stats.finite(loss) else None,
      converged=near_convergence(curve, steps),
      curve=[list(p) for p in curve],
  )


def arm_name(norm: str, warmup: int) -> str:
  return f"{'Post' if norm == 'post' else 'Pre'}-LN, warmup {warmup}"


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  steps = results.config.train.num_steps if results.config is not None else None
  arms: dict[str, dict] = {}
  for run in results.runs:
    norm, warmup = run.params["model.norm_position"], int(run.params["optim.warmup_steps"])
    lr = float(run.params["optim.learning_rate"])
    arm = arms.setdefault(arm_name(norm, warmup), {"norm": norm, "warmup": warmup, "cells": {}})
    arm["cells"].setdefault(format(lr, "g"), []).append(_run(run, steps or run.config()["train"]["num_steps"]))
  entropies = {(run.json("data_stats.json") or {}).get("target_unigram_entropy") for run in results.runs}
  entropies.discard(None)
  out.update(arms=arms, steps=steps, unigram_entropy=entropies.pop() if len(entropies) == 1 else None)
  return out


def _cells(arm: dict) -> Cells:
  return {float(lr): (cell_class([r["cls"] for r in runs]), len(runs)) for lr, runs in arm["cells"].items()}


def _best(arm: dict) -> Optional[str]:
  """The lr (its key) of the arm's lowest mean final loss among its trained cells."""
  trained = {lr: np.mean([r["final_loss"] for r in runs]) for lr, runs in arm["cells"].items()}
  trained = {lr: v for lr, v in trained.items() if cell_class([r["cls"] for r in arm["cells"][lr]]) == "trained"}
  return min(trained, key=trained.get) if trained else None


FRESH_SEEDS_FROM = 3  # the rule was stated after seeds 0–2 were seen (docs/design_log.md#warmup)
REREADING = (
    "A re-reading of seeds 0–2 by the rule of issue 40, stated after these runs were seen; the fresh seeds 3–5 of the "
    "cpu config confirm it and their verdict is the one reported"
)


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  """The rule (module docstring); on a record with seeds below `FRESH_SEEDS_FROM`, said as a re-reading."""
  v = _verdict(m)
  seeds = {r["seed"] for a in m["arms"].values() for rs in a["cells"].values() for r in rs}
  if seeds and min(seeds) < FRESH_SEEDS_FROM and m.get("steps", 0) > 100:  # the tiny tests' runs are no record
    return study.Verdict(v.verdict, f"{REREADING}. {v.reason}")
  return v


def _verdict(m: dict) -> study.Verdict:
  arms = m["arms"]
  unclassed = [f"{a} η {lr}" for a, arm in arms.items() for lr, runs in arm["cells"].items() if any(
      r["cls"] is None for r in runs)]  # fmt: skip
  if unclassed:
    return study.Verdict(study.INCONCLUSIVE, f"runs without an outcome class (train.eval_at_init off): {unclassed[:4]}")
  post = {a["warmup"]: a for a in arms.values() if a["norm"] == "post"}
  pre = [a for a in arms.values() if a["norm"] == "pre"]
  if 0 not in post or len(post) < 2 or not pre:
    return study.Verdict(study.INCONCLUSIVE, f"the grid lacks an arm: has {sorted(arms)}")
  verdict_, reason, numbers = rescue(_cells(post[0]), {w: _cells(a) for w, a in post.items() if w}, _cells(pre[0]))
  if verdict_ != study.REPRODUCED:
    return study.Verdict(verdict_, reason)
  pre_ok = set(numbers["rescued lrs"]) - set(numbers["Pre-LN fails (no warmup) at a rescued lr"])
  checks = {lr: failing_arm(m, format(lr, "g")) for lr in sorted(pre_ok)}
  reason += ". The failing arm " + "; ".join(c["text"] for c in checks.values())
  if any(c["ok"] for c in checks.values()):
    return study.Verdict(study.REPRODUCED, reason)
  return study.Verdict(
      study.INCONCLUSIVE, reason + ": the failing arm does not hold at any rescued η (more seeds, or more steps)"
  )


def horizon_check(m: dict) -> dict:
  """Whether Pre-LN's best trained cell and the best trained Post-LN-with-warmup cell (lowest mean final loss) are
  near convergence in every seed: {"ok", "text", "checks": {"<arm> at η <lr>": bool}}."""
  best: dict[str, tuple[float, str, str]] = {}
  for name, arm in m["arms"].items():
    if arm["norm"] == "pre" or arm["warmup"] > 0:
      lr = _best(arm)
      if lr is not None:
        loss = float(np.mean([r["final_loss"] for r in arm["cells"][lr]]))
        side = arm["norm"]
        if side not in best or loss < best[side][0]:
          best[side] = (loss, name, lr)
  checks = {
      f"{name} at η {lr}": all(r["converged"] for r in m["arms"][name]["cells"][lr]) for _, name, lr in best.values()
  }
  ok = len(best) == 2 and all(checks.values())
  text = (
      ", ".join(f"{k} {'near convergence' if v else 'still improving'}" for k, v in checks.items()) or "no cell trains"
  )
  return {"ok": ok, "text": text, "checks": checks}


def _lowest(arm: dict) -> str:
  """The lr (its key) of the arm's lowest mean final loss over cells without a diverged seed (any class)."""
  ok = {lr: np.mean([r["final_loss"] for r in runs]) for lr, runs in arm["cells"].items() if all(
      r["final_loss"] is not None for r in runs)}  # fmt: skip
  return min(ok, key=ok.get) if ok else min(arm["cells"], key=float)


def _rescued_key(m: dict) -> Optional[str]:
  """The cell key of the smallest rescued η where the failing arm holds, else of the smallest rescued η, or None."""
  post = {a["warmup"]: a for a in m["arms"].values() if a["norm"] == "post"}
  pre = [a for a in m["arms"].values() if a["norm"] == "pre"]
  if 0 not in post or not pre:
    return None
  _, _, numbers = rescue(_cells(post[0]), {w: _cells(a) for w, a in post.items() if w}, _cells(pre[0]))
  keys = [format(lr, "g") for lr in numbers["rescued lrs"]]
  held = [k for k in keys if failing_arm(m, k)["ok"]]  # the η that decides, where there is one
  return (held or keys or [None])[0]


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed") or not m.get("arms"):
    return []
  arms = m["arms"]
  names = sorted(arms, key=lambda a: (arms[a]["norm"] != "post", arms[a]["warmup"]))
  colors = {a: f"C{i}" for i, a in enumerate(names)}
  fig, (ax, cx) = plots.plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
  runs = [r for a in arms.values() for rs in a["cells"].values() for r in rs]
  inits = [r["curve"][0][1] for r in runs if r["curve"] and r["curve"][0][0] == 0]
  top = 1.15 * max([v for v in inits if stats.finite(v)] or [10.0])
  styles = ("-", "--", ":", "-.")  # arms that coincide (two collapsed ones on the plateau) stay visible
  for i, a in enumerate(names):
    lrs = sorted(arms[a]["cells"], key=float)
    shift = 1.04 ** (i - (len(names) - 1) / 2)  # each arm's markers a little apart along the lr axis
    means = []
    for lr in lrs:
      cell = arms[a]["cells"][lr]
      for r in cell:
        y = top if r["cls"] == outcomes.DIVERGED or r["final_loss"] is None else min(r["final_loss"], top)
        ax.plot(float(lr) * shift, y, MARKERS.get(r["cls"], "."), color=colors[a], ms=6, alpha=0.7, mfc="none")
      ok = [r["final_loss"] for r in cell if r["cls"] != outcomes.DIVERGED and r["final_loss"] is not None]
      means.append(np.mean(ok) if len(ok) == len(cell) else math.nan)
    ax.plot([float(x) * shift for x in lrs], means, styles[i % 4], color=colors[a], label=a)
  for cls, marker in MARKERS.items():
    ax.plot(
        [], [], marker, color="grey", mfc="none", label=cls + (f" (at {top:.3g}, clipped)" if cls == "diverged" else "")
    )
  ax.set_xscale("log")
  xs = [float(lr) for a in arms.values() for lr in a["cells"]]
  ax.set_xlim(min(xs) / 1.25, max(xs) * 1.25)  # the grid's end points off the frame
  plots.plain_log_ticks(ax.xaxis, min(xs), max(xs), at=xs)  # a tick at every lr of the grid, none between
  plots.log_loss_axis(ax, [r["final_loss"] for r in runs], top)
  ax.set(xlabel="peak lr", ylabel="final validation loss (nats)", title="(a) every seed by outcome class; line: mean")
  shown = []
  rescued = _rescued_key(m)
  for i, a in enumerate(names):
    lr = rescued if rescued in arms[a]["cells"] else _lowest(arms[a])
    for r in arms[a]["cells"][lr]:
      if r["curve"]:
        steps, losses = zip(*r["curve"])
        cx.plot(steps, losses, styles[i % 4], color=colors[a], alpha=0.7)
        shown += list(losses)
    cx.plot([], [], styles[i % 4], color=colors[a], label=f"{a}: η {lr}")
  if m.get("unigram_entropy"):
    cx.axhline(m["unigram_entropy"], color="k", ls=":", lw=0.8, label=f"unigram entropy H = {m['unigram_entropy']:.3g}")
  where = f"at the rescued η {rescued}" if rescued else "each arm's lowest-loss cell"
  cx.set(xlabel="step", ylabel="validation loss (nats)", title=f"(b) {where}, every seed")
  plots.log_loss_axis(cx, shown, top)
  cx.legend(fontsize=7, loc="upper right")
  plots.figure_legend(fig, *ax.get_legend_handles_labels(), max_cols=4, fontsize=8)
  plots.headline_title(
      fig, "Claim 6 (Xiong et al. 2020): does warmup rescue Post-LN where it fails, lr by lr?", settings
  )
  return [plots.save(fig, out_dir, "warmup.png")]


def summary(m: dict) -> dict:
  if m.get("crashed") or not m.get("arms"):
    return {}
  arms = m["arms"]
  post = {a["warmup"]: a for a in arms.values() if a["norm"] == "post"}
  pre = [a for a in arms.values() if a["norm"] == "pre"]
  if 0 not in post or not pre:
    return {}
  _, _, numbers = rescue(_cells(post[0]), {w: _cells(a) for w, a in post.items() if w}, _cells(pre[0]))
  for lr in numbers["rescued lrs"]:
    check = failing_arm(m, format(lr, "g"))
    if check.get("gap"):
      g = check["gap"]
      numbers[f"η {lr:g}: no-warmup final − warmup {check['against']}'s, nats"] = f"{g[0]:.3g} [{g[1]:.3g}, {g[2]:.3g}]"
      numbers[f"η {lr:g}: no-warmup seeds on the plateau"] = f"{sum(check['plateau'])}/{len(check['plateau'])}"
  return {**numbers, "good arms near convergence (reported)": horizon_check(m)["ok"]}


CLAIM = study.Study(
    name="warmup",
    number=6,
    statement="Xiong et al. 2020: Post-LN needs a learning-rate warmup, Pre-LN does not: at a learning rate where "
    "Post-LN without warmup fails (collapses or diverges), Post-LN with warmup and Pre-LN without it train.",
    source="Xiong et al. 2020, abstract and Fig. 2; docs/science.md §8",
    paper_scale="6+6 layers, d = 512, IWSLT14 De-En, ~100k steps, warmup 4000 steps",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    figures_from_record=True,
)
