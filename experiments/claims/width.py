"""Study 12 (Noci et al. 2024; Kalra & Barkeshli 2026): under µP the lr-scaled preconditioned sharpness along
training does not depend on width while under SP it does, and µP's optimal learning rate moves less with width.

The statements, quoted. Noci et al. 2024 (arXiv 2402.17457, abstract): "certain spectral properties under µP are
largely independent of the size of the network, and remain consistent as training progresses [...] in the Neural
Tangent Kernel (NTK) and other scaling regimes, the sharpness exhibits very different dynamics at different scales".
For Adam, read as η(t)·λ_max(M·P_t⁻¹H), M the run's per-layer lr multipliers (analysis/tracking.py). Kalra &
Barkeshli 2026 (arXiv 2605.21486, abstract): "the overwhelming benefit of µP relative to SP when training with AdamW
arises simply from maximizing the learning rate of the embedding layer"; their arm, SP with µP's embedding lr, is
reported, not decided.

Measured (configs/claims/width.py: SP, NTK, µP and SP + µP's embedding lr × widths × a factor-2 lr grid × seeds):
  sharpness  at `REF_LR`, S = the median of a run's records in `WINDOW` (its last two thirds); per arm the slope of
             log₂ S on log₂ d over every (width, seed) with its Student-t interval (experiments/stats.py);
  shift      per arm, log₂ η*(widest) − log₂ η*(narrowest transfer width), η* the parabola-refined optimum of the
             trained lrs, and D = |shift µP| − |shift SP|, Student-t (95%) over the seeds every lr of theirs ran.
Rules (stated before any run):
  (a) sharpness  reproduced when µP's slope interval lies inside ±`FLAT` and SP's excludes 0; not reproduced when
                 µP's lies outside ±FLAT or SP's inside ±FLAT; otherwise inconclusive (more seeds narrow them);
  (b) transfer   reproduced when D's interval lies below 0; not reproduced when it lies at or above 0; inconclusive
                 when it straddles 0 (more seeds), an optimum sits at the lr grid's edge at a transfer width after the
                 grid's `extensions` (up to `MAX_ROUNDS` factor-2 steps past it), or with fewer than 2 seeds;
  claim          reproduced when (a) and (b) are; not reproduced when either is not; else inconclusive, as is a crash.
`FLAT` = 0.1: ≤ 1.32× over 16× of widths, a tenth of SP's slope 1 (Tensor Programs V §J); history: docs/design_log.md.
"""

import math
from typing import Optional

from experiments import plots, stats, study
from experiments.claims.shared import transfer

METRIC, WINDOW = transfer.SHARPNESS, transfer.WINDOW  # the records and the fractions of the run that give S
FLAT = 0.1
MAX_ROUNDS = 3  # lr-grid extensions past an edge optimum, one factor-2 step per round (module docstring)
MU, SP, NTK, EMB = "µP", "SP", "NTK", "SP + µP emb. lr"
ARMS = (SP, NTK, MU, EMB)
THRESHOLDS = {
    "sharpness statistic": f"median of η(t)·λ_max(M·P_t⁻¹H) over steps in [{WINDOW[0]:.3g}, {WINDOW[1]:g}]×T, at the "
    "reference lr",
    "(a) sharpness": f"µP's log-log slope interval inside ±{FLAT} and SP's excluding 0 (not reproduced: µP's outside "
    f"±{FLAT} or SP's inside it)",
    "(b) transfer": "D = |shift µP| − |shift SP| (log₂ lr of the optimum, widest − narrowest transfer width): "
    "interval below 0 (not reproduced: at or above 0); optima inside the lr grid, ≥ 2 seeds",
    "claim": "reproduced when (a) and (b) are, not reproduced when either is not, else inconclusive",
}


def _run(run: study.Run, steps: int) -> dict:
  loss = run.final.get("eval/loss")
  final = float(loss) if stats.finite(loss) else None
  return dict(seed=run.seed, cls=run.record.get("class"), final_loss=final, **transfer.sharpness_record(run, steps))


def parse_arm(label: str) -> tuple[str, int]:
  """('µP', 128) from the grid's label 'µP @ width 128' (configs/claims/width.py)."""
  return transfer.parse_label(label, "width")


DIFFS = {"|µP| − |SP|": (MU, SP), "|SP + µP emb. lr| − |µP|": (EMB, MU), "|SP + µP emb. lr| − |SP|": (EMB, SP)}


def _arms(results: study.Results) -> dict[str, dict[int, dict[float, list[dict]]]]:
  """{arm: {width: {lr: [run]}}} (`_run`), the lrs as the grid holds them."""
  steps = results.config.train.num_steps if results.config is not None else None
  arms: dict[str, dict] = {}
  for run in results.runs:
    arm, d = parse_arm(run.arm)
    lr = float(run.params["optim.learning_rate"])
    t = steps or run.config()["train"]["num_steps"]
    arms.setdefault(arm, {}).setdefault(d, {}).setdefault(lr, []).append(_run(run, t))
  return arms


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  steps = results.config.train.num_steps if results.config is not None else None
  arms = _arms(results)
  ref = _reference_lr(arms)
  rows = {a: {d: list(cells[ref]) for d, cells in sorted(w.items()) if ref in cells} for a, w in arms.items()}
  sharp, slopes = transfer.sharpness_slopes(rows)
  grids = {a: w for a, w in arms.items() if sum(len(c) > 1 for c in w.values()) >= 2}
  twidths = sorted(set.intersection(*[{d for d, c in w.items() if len(c) > 1} for w in grids.values()])) if grids else []  # fmt: skip
  # Rule (b) reads the seeds every lr of its arms ran (the reference lr's cells may run more, for rule (a))
  common = transfer.common_seeds({a: {d: grids[a][d] for d in twidths} for a in (MU, SP) if a in grids})
  tgrids = {a: {d: transfer.only_seeds(w[d], common) for d in twidths} for a, w in grids.items()}
  optima = {a: {str(d): transfer.optimum(g[d]) for d in twidths} for a, g in tgrids.items()}
  shifts = transfer.shift_intervals(tgrids, twidths, DIFFS) if len(twidths) >= 2 else {}
  seeds = len(common) if grids else min((len(runs) for w in arms.values() for c in w.values() for runs in c.values()), default=0)  # fmt: skip
  unclassed = [f"{a} @ width {d} η {lr:g}" for a, w in arms.items() for d, c in w.items() for lr, runs in c.items() if any(r["cls"] is None for r in runs)]  # fmt: skip
  out.update(
      steps=steps,
      ref_lr=ref,
      seeds=seeds,
      transfer_seeds=common,
      unclassed=unclassed,
      runs={
          a: {str(d): {format(lr, "g"): runs for lr, runs in c.items()} for d, c in w.items()} for a, w in arms.items()
      },
      sharpness=sharp,
      slopes=slopes,
      transfer_widths=twidths,
      optima={a: {d: (None if o is None else {"log2_lr": o[0], "lr": 2 ** o[0], "edge": o[1]}) for d, o in x.items()} for a, x in optima.items()},  # fmt: skip
      shifts=shifts,
  )
  return study.jsonable(out)


def _reference_lr(arms: dict) -> Optional[float]:
  """The lr every (arm, width) ran at: the sharpness runs' lr (configs/claims/width.py REF_LR)."""
  common = set.intersection(*[set(c) for w in arms.values() for c in w.values()]) if arms else set()
  return min(common) if len(common) == 1 else (sorted(common)[len(common) // 2] if common else None)


def _read_sharpness(m: dict) -> tuple[str, str, str]:
  """(verdict, reason, advice) of rule (a)."""
  mu, sp = m["slopes"].get(MU), m["slopes"].get(SP)
  if mu is None or sp is None:
    return study.INCONCLUSIVE, f"no sharpness slope for {'µP' if mu is None else 'SP'}", "≥ 3 (width, seed) points"
  flat_mu = stats.reading(tuple(mu), low=-FLAT, high=FLAT)
  flat_sp = stats.reading(tuple(sp), low=-FLAT, high=FLAT)
  zero_sp = stats.reading(tuple(sp), low=0.0, high=0.0)  # False: SP's interval excludes 0
  text = f"log₂-log₂ slope of the lr-scaled preconditioned sharpness vs width: µP {stats.fmt(tuple(mu))}, SP {stats.fmt(tuple(sp))} (rule: µP inside ±{FLAT}, SP excluding 0)"  # fmt: skip
  if flat_mu is False or flat_sp is True:
    why = "µP's interval lies outside ±%g" % FLAT if flat_mu is False else "SP's interval lies inside ±%g" % FLAT
    return study.NOT_REPRODUCED, f"{text}: {why}", ""
  if flat_mu and zero_sp is False:
    return study.REPRODUCED, text, ""
  which = "µP's straddles ±%g" % FLAT if not flat_mu else "SP's includes 0"
  if not flat_mu:  # which way the point leans: a reading, not a verdict
    which += f" (its point {mu[0]:.3g} lies {'outside' if abs(mu[0]) > FLAT else 'inside'} ±{FLAT:g}: it leans to "
    which += f"{'not reproduced' if abs(mu[0]) > FLAT else 'reproduced'})"
  undecided = [a for a, none in ((MU, flat_mu is None), (SP, zero_sp is None)) if none]
  return study.INCONCLUSIVE, f"{text}: {which}", _seeds_to_decide(m, undecided)


def _seeds_to_decide(m: dict, arms: list) -> str:
  """The design change an undecided rule (a) names: per undecided arm, the seeds per width at the reference lr whose
  slope interval would decide its reading, were its slope and scatter to hold (stats.repeats_to_decide): µP's by
  clearing ±FLAT (inside or outside), SP's by clearing 0 or by lying inside ±FLAT, whichever needs fewer."""
  out = []
  for arm in arms:
    rows = m["sharpness"][arm]
    pts = [(math.log2(int(d)), math.log2(v)) for d, r in rows.items() for v in r["seeds"] if v and v > 0]
    ways = [(-FLAT, FLAT)] if arm == MU else [(0.0,), (-FLAT, FLAT)]
    found = [n for n in (stats.repeats_to_decide(*zip(*pts), thresholds=t) for t in ways) if n]
    now = min(len(r["seeds"]) for r in rows.values())
    out.append(f"{arm}: at least ≈ {min(found)} per width (now {now})" if found else f"{arm}: none within 100 per width (now {now}; its slope sits on a threshold or its scatter is too wide)")  # fmt: skip
  return "more seeds per width at the reference lr, were the slope and its scatter to hold: " + "; ".join(out)


def _read_transfer(m: dict) -> tuple[str, str, str]:
  """(verdict, reason, advice) of rule (b)."""
  if m.get("seeds", 0) < 2:
    return study.INCONCLUSIVE, f"{m.get('seeds', 0)} seed(s) per cell: no interval", "≥ 2 seeds"
  edges = [f"{a} @ width {d}" for a in (MU, SP) for d, o in m["optima"].get(a, {}).items() if o and o["edge"]]
  missing = [f"{a} @ width {d}" for a in (MU, SP) for d, o in m["optima"].get(a, {"—": None}).items() if o is None]
  if missing:
    return study.INCONCLUSIVE, f"no lr trained at {missing}", "smaller lrs or more steps"
  diff = m["shifts"].get("|µP| − |SP|")
  if diff is None:
    return study.INCONCLUSIVE, "no shift difference (an optimum is missing)", "smaller lrs or more steps"
  mu, sp = m["shifts"][MU], m["shifts"][SP]
  text = f"optimum's shift {m['transfer_widths'][0]} → {m['transfer_widths'][-1]} in log₂ lr: µP {stats.fmt(tuple(mu))}, SP {stats.fmt(tuple(sp))}; D = |µP| − |SP| {stats.fmt(tuple(diff))} (rule: below 0)"  # fmt: skip
  return transfer.read_difference(diff, text, edges, m["seeds"])


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  if m.get("unclassed"):
    return study.Verdict(study.INCONCLUSIVE, f"runs without an outcome class (train.eval_at_init off): {m['unclassed'][:4]}")  # fmt: skip
  parts = {"(a) sharpness": _read_sharpness(m), "(b) transfer": _read_transfer(m)}
  reason = "; ".join(f"{k} {v}: {r}" + (f" [decides it: {adv}]" if adv else "") for k, (v, r, adv) in parts.items())
  return study.decide({k: v for k, (v, _, _) in parts.items()}, reason, failing=None)


def extensions(results: study.Results) -> dict[str, dict[str, list]]:
  """The next round of the lr grid (module docstring): {"<arm> @ width <d>": {"optim.learning_rate": [lr]}} for
  every (arm, width) of ≥ 3 lrs whose optimum is at the grid's edge, lr one factor-2 step past it; {} when none."""
  out = {}
  for a, widths in _arms(results).items():  # the optima alone: no shift bootstrapped
    for d, cells in widths.items():
      o, lrs = transfer.optimum(cells) if len(cells) >= 3 else None, sorted(cells)
      if o and o[1]:
        past = 2 * lrs[-1] if o[0] >= math.log2(lrs[-1]) else lrs[0] / 2
        out[f"{a} @ width {d}"] = {"optim.learning_rate": [past]}
  return out


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed") or not m.get("runs"):
    return []
  runs = m["runs"]
  arms = [a for a in ARMS if a in runs] + [a for a in runs if a not in ARMS]
  tarms = [a for a in arms if a in m["optima"]]
  widths = sorted({int(d) for w in runs.values() for d in w})
  cmap = plots.plt.get_cmap("viridis")
  wcol = {d: cmap(i / max(1, len(widths) - 1) * 0.9) for i, d in enumerate(widths)}
  acol = {a: f"C{i}" for i, a in enumerate(arms)}
  ncol = max(len(arms), len(tarms), 2)
  mosaic = [[f"s{i}" if i < len(arms) else "." for i in range(ncol)]]
  if tarms:  # the loss-vs-lr row and the optimum panel only where some arm ran the lr grid
    mosaic.append([f"l{i}" if i < len(tarms) else "." for i in range(ncol)])
    mosaic.append(["w"] * (ncol // 2) + ["o"] * (ncol - ncol // 2))
  else:
    mosaic.append(["w"] * ncol)
  fig, ax = plots.plt.subplot_mosaic(mosaic, figsize=(3.6 * ncol, 3.5 * len(mosaic) + 0.6), layout="constrained")
  ref = m["ref_lr"]
  for i, a in enumerate(arms):  # (a) η(t)·λ_max(M·P_t⁻¹H) along training at the reference lr
    x = ax[f"s{i}"]
    for d, cells in sorted(runs[a].items(), key=lambda kv: int(kv[0])):
      for r in cells.get(format(ref, "g"), []) if ref is not None else []:
        pts = [(s, v) for s, v in r["curve"] if stats.finite(v) and v > 0]
        if pts:
          x.plot(*zip(*pts), "-", color=wcol[int(d)], alpha=0.8)
    x.set_yscale("log")
    plots.plain_log_y(x)
    x.set(xlabel="step", ylabel="η·λ_max(M·P⁻¹H)" if i == 0 else None)
    x.set_title(f"({chr(97 + i)}) {a}:\nsharpness at η {ref:.3g}", fontsize=10)  # two lines: the arms' names are long
  losses = [r["final_loss"] for a in tarms for c in runs[a].values() for rs in c.values() for r in rs]
  top = transfer.clipped_top(losses)
  for i, a in enumerate(tarms):  # final loss vs lr per transfer width; diverged at a clipped top
    x = ax[f"l{i}"]
    transfer.loss_vs_lr(x, runs[a], m["transfer_widths"], m["optima"][a], wcol, losses, top)
    x.set(xlabel="peak lr", ylabel="final val. loss (nats, log scale)" if i == 0 else None)
    x.set_title(f"({chr(97 + len(arms) + i)}) {a}:\nfinal loss vs lr", fontsize=10)
  sharp = {a: m["sharpness"].get(a, {}) for a in arms}  # (sharpness vs width, log-log, the seeds' spread)
  transfer.sharpness_vs_size(ax["w"], sharp, m["slopes"], acol, widths, word="width", xlabel="width d")
  if tarms:  # the optimum vs width
    optima = {a: m["optima"][a] for a in tarms}
    transfer.optima_vs_size(ax["o"], optima, m["shifts"], acol, m["transfer_widths"], word="width", xlabel="width d")
  handles = [plots.plt.Line2D([], [], color=wcol[d], label=f"d = {d}") for d in widths]
  if tarms:
    handles.append(transfer.not_trained_handle(top))
  plots.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=len(handles), fontsize=8)
  plots.headline_title(fig, "Study 12 (Noci et al. 2024; Kalra & Barkeshli 2026): sharpness and the optimal lr across width", settings)  # fmt: skip
  return [plots.save(fig, out_dir, "width.png")]


def summary(m: dict) -> dict:
  if m.get("crashed") or not m.get("runs"):
    return {}
  out = {f"slope {a}": stats.fmt(tuple(s)) for a, s in m["slopes"].items() if s}
  out.update({f"shift {k}": stats.fmt(tuple(s)) for k, s in m["shifts"].items() if s})
  for a in m.get("optima", {}):  # reported, not decisive: what Kalra & Barkeshli 2026 call µP's benefit, the loss
    for d in m["transfer_widths"]:
      cells = m["runs"][a][str(d)]
      best = transfer.best_loss(transfer.only_seeds(cells, m["transfer_seeds"]) if "transfer_seeds" in m else cells)
      if best:
        spread = "" if best[1] is None else f" ± {best[1]:.2g}"
        out[f"best loss {a} @ width {d}"] = f"{best[0]:.3g}{spread} at η {best[2]:g}"
  return out


CLAIM = study.Study(
    name="width",
    number=12,
    statement="Noci et al. 2024: under µP the (Adam-preconditioned, lr-scaled) sharpness along training is "
    "independent of width while under SP it is not; and µP's optimal learning rate shifts less with width than SP's "
    "(with Kalra & Barkeshli 2026's arm, SP with µP's embedding lr, measured beside it).",
    source="Noci et al. 2024 (arXiv 2402.17457), abstract; Kalra & Barkeshli 2026 (arXiv 2605.21486), "
    "abstract; Yang et al. 2022 (Tensor Programs V), Table 3",
    paper_scale="Transformers on WikiText, widths over 8–16×, SP/NTK/µP (Noci et al. 2024); LLMs under AdamW "
    "(Kalra & Barkeshli 2026)",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    headline=("slope µP", "shift |µP| − |SP|"),
    extend=extensions,
    max_rounds=MAX_ROUNDS,
)
