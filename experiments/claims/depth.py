"""Study 13 (Dey et al. 2025, CompleteP): CompleteP's optimal lr moves less with depth than standard Pre-LN's.

The statement, quoted (Dey et al. 2025, arXiv 2505.01618, abstract): "Some parameterizations fail to transfer optimal
base HPs (such as learning rate) across changes in model depth, requiring practitioners to either re-tune these HPs as
they scale up (expensive), or accept sub-optimal training when re-tuning is prohibitive. [...] we identify and adopt
the parameterization we call CompleteP that achieves both depth-wise HP transfer and non-lazy learning in all layers."
CompleteP (their Table 1, AdamW; models/residual.py, models/parameterization.py): each residual branch × (L/L_base)^{−α}
and the lrs inside the layers × (L/L_base)^{α−1}, α = 1; α = 1/2 (Depth-µP, Bordelon et al. 2024) is reported beside.

Measured (configs/claims/depth.py: SP = Pre-LN with the plain residual, CompleteP and Depth-µP, L layers per stack, ×
a factor-2 lr grid × seeds; optima and intervals from experiments/claims/shared/transfer.py, shared with study 12):
  at base   η_b = the lr of the lowest seed-mean final loss at the shallowest depth among lrs whose runs all trained
            (one η_b: at L_base the arms are one model); per arm and seed Δ = loss(deepest, η_b) − loss(shallowest,
            η_b); D_loss = Δ_CompleteP − Δ_SP, paired by seed, Student-t 95% over the seeds;
  reported  per arm × depth the optimum (parabola-refined in log₂ lr, an edge flagged), its shift from the shallowest to
            the deepest depth with D = |shift CompleteP| − |shift SP| and SP's own shift as their control, the regret
            at η_b, and where curvature is recorded (`CURVATURE_EVERY` > 0) the sharpness η(t)·λ_max(M·P_t⁻¹H).
Rule (issue 40, stated after a record was seen and decided on fresh seeds: docs/design_log.md):
  control         SP's Δ interval lies above 0 (the failure the paper names is visible; else inconclusive: deeper);
  reproduced      the control holds and D_loss's interval lies below 0;
  not reproduced  D_loss's interval lies at or above 0 (CompleteP at η_b does no better with depth than SP);
  inconclusive    D_loss straddles 0 (more seeds), the control fails, fewer than 2 seeds, a run at η_b at an end depth
                  without a final loss (diverged; a collapsed run's plateau counts, it is the failure), a crashed run,
                  or a run without an outcome class (`train.eval_at_init` off).
"""

import numpy as np

from experiments import plots, stats, study
from experiments.claims.shared import transfer

SP, CP, DMU = "SP", "CompleteP", "Depth-µP"
ARMS = (SP, CP, DMU)
D = "|CompleteP| − |SP|"
DIFFS = {D: (CP, SP), "|Depth-µP| − |SP|": (DMU, SP)}
THRESHOLDS = {
    "optimum": "per arm × depth, the lowest seed-mean final validation loss among lrs whose runs all trained, refined "
    "by the parabola through its grid neighbours in log₂ lr; flagged at the lr grid's edge",
    "shift": "log₂ η*(deepest) − log₂ η*(shallowest), in factor-2 grid steps",
    "at base": "η_b the shallowest depth's best trained grid lr; per arm and seed Δ = loss(deepest, η_b) − "
    "loss(shallowest, η_b); D_loss = Δ_CompleteP − Δ_SP paired by seed, Student-t 95% over the seeds",
    "transfer": "control: SP's Δ interval above 0; reproduced: the control holds and D_loss's interval below 0; not "
    "reproduced: D_loss's interval at or above 0; inconclusive: straddling 0, the control failing, a run at η_b that "
    "did not train, or < 2 seeds",
    "shift (reported)": "D = |shift CompleteP| − |shift SP|, Student-t 95% over the seeds' own differences, beside SP's "
    "own shift (its positive control)",
    "reported": "Depth-µP's shift and |Depth-µP| − |SP|, and every arm's log₂-log₂ slope of the sharpness S vs depth "
    "at the reference lr (S: the median of η(t)·λ_max(M·P_t⁻¹H) over the last two thirds of the run): measured beside "
    "the verdict, not decisive",
}


def _has_loss(run: dict) -> bool:
  """A final loss to compare: a run that trained, or collapsed (its plateau is the failure, and Δ shows it); a
  diverged run has none."""
  return run["final_loss"] is not None


def at_base(arms: dict, ends: list) -> dict:
  """The loss at the base-tuned lr η_b across the end depths (module docstring, 'at base'): per arm the seeds' Δ, its
  interval, the regret at the deepest depth and the runs at η_b without a final loss; D_loss paired by seed."""
  shallow, deep = ends
  base = transfer.best_loss(arms[SP][shallow]) if SP in arms else None
  if base is None:
    return {"lr": None}
  lr, out = base[2], {"lr": base[2], "arms": {}}
  for a, grid in arms.items():
    at = {L: {r["seed"]: r for r in grid[L].get(lr, [])} for L in ends}
    failed = [f"{a} @ depth {L} seed {s}" for L in ends for s, r in sorted(at[L].items()) if not _has_loss(r)]
    seeds = sorted(s for s in set(at[shallow]) & set(at[deep]) if _has_loss(at[shallow][s]) and _has_loss(at[deep][s]))
    delta = {s: at[deep][s]["final_loss"] - at[shallow][s]["final_loss"] for s in seeds}
    best = transfer.best_loss(grid[deep])
    deep_mean = float(np.mean([at[deep][s]["final_loss"] for s in seeds])) if seeds else None
    out["arms"][a] = dict(
        delta=list(stats.mean_interval(list(delta.values()))) if len(delta) >= 2 else None,
        per_seed=delta,
        loss=[float(np.mean([at[L][s]["final_loss"] for s in seeds])) if seeds else None for L in ends],
        regret=None if best is None or deep_mean is None else deep_mean - best[0],
        no_loss=failed,
    )
  cp, sp = (out["arms"].get(a, {}).get("per_seed", {}) for a in (CP, SP))
  paired = [cp[s] - sp[s] for s in sorted(set(cp) & set(sp))]
  out["diff"] = list(stats.mean_interval(paired)) if len(paired) >= 2 else None
  out["paired_seeds"] = len(paired)
  return out


def _run(run: study.Run, steps: int) -> dict:
  loss = run.final.get("eval/loss")
  final = float(loss) if stats.finite(loss) else None
  return dict(seed=run.seed, cls=run.record.get("class"), final_loss=final, **transfer.sharpness_record(run, steps))


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  steps = results.config.train.num_steps if results.config is not None else None
  arms: dict[str, dict] = {}
  for run in results.runs:
    arm, depth = transfer.parse_label(run.arm, "depth")
    lr = float(run.params["optim.learning_rate"])
    t = steps or run.config()["train"]["num_steps"]
    arms.setdefault(arm, {}).setdefault(depth, {}).setdefault(lr, []).append(_run(run, t))
  # the sharpness at the reference lr (configs/claims/depth.py REF_LR): the one lr whose runs carry curvature records
  ref = sorted({lr for g in arms.values() for c in g.values() for lr, runs in c.items() if any(r["curve"] for r in runs)})  # fmt: skip
  if len(ref) > 1:
    raise ValueError(f"study 13 reads the sharpness at one lr; curvature records were found at lrs {ref}")
  rows = {a: {L: list(c[ref[0]]) for L, c in sorted(g.items()) if ref[0] in c} for a, g in arms.items()} if ref else {}
  sharp, slopes = transfer.sharpness_slopes({a: g for a, g in rows.items() if g})
  # a reference-lr run without a window median (no records: it diverged first) is named, not silently dropped
  no_stat = [f"{a} @ depth {L} seed {r['seed']}" for a, g in rows.items() for L, rs in g.items() for r in rs if r["stat"] is None]  # fmt: skip
  lanczos = [n for g in rows.values() for rs in g.values() for r in rs for n in r["lanczos"]]
  cost = dict(records=len(lanczos), median=float(np.median(lanczos)), max=max(lanczos)) if lanczos else None
  common = sorted(set.intersection(*[set(g) for g in arms.values()])) if arms else []
  ends = [common[0], common[-1]] if len(common) >= 2 else []
  optima = {a: {str(L): transfer.optimum(c) for L, c in sorted(g.items())} for a, g in arms.items()}
  grids = {a: {L: g[L] for L in ends} for a, g in arms.items()}
  seeds = min((len(runs) for g in arms.values() for c in g.values() for runs in c.values()), default=0)
  unclassed = [f"{a} @ depth {L} η {lr:g}" for a, g in arms.items() for L, c in g.items() for lr, runs in c.items() if any(r["cls"] is None for r in runs)]  # fmt: skip
  out.update(
      steps=steps,
      ref_lr=ref,
      sharpness=sharp,
      slopes=slopes,
      lanczos_steps=cost,
      sharpness_missing=no_stat,
      seeds=seeds,
      unclassed=unclassed,
      depths=sorted({L for g in arms.values() for L in g}),
      ends=ends,
      runs={a: {str(L): {format(lr, "g"): runs for lr, runs in sorted(c.items())} for L, c in sorted(g.items())} for a, g in arms.items()},  # fmt: skip
      optima={a: {L: (None if o is None else {"log2_lr": o[0], "lr": 2 ** o[0], "edge": o[1]}) for L, o in x.items()} for a, x in optima.items()},  # fmt: skip
      shifts=transfer.shift_intervals(grids, ends, DIFFS) if ends else {},
      at_base=at_base(arms, ends) if ends else None,
  )
  return study.jsonable(out)


def with_at_base(m: dict) -> dict:
  """`m` with its `at_base` computed from its own runs where a record predates it (the 4-seed record)."""
  if m.get("at_base") is not None or not m.get("runs") or len(m.get("ends") or []) != 2:
    return m
  arms = {a: {int(L): {float(lr): rs for lr, rs in c.items()} for L, c in g.items()} for a, g in m["runs"].items()}
  return {**m, "at_base": study.jsonable(at_base(arms, [int(L) for L in m["ends"]]))}


def _read(m: dict) -> tuple[str, str, str]:
  """(verdict, reason, advice) of the rule (module docstring) on the loss at the base-tuned lr."""
  if m.get("seeds", 0) < 2:
    return study.INCONCLUSIVE, f"{m.get('seeds', 0)} seed(s) per cell: no interval", "≥ 2 seeds"
  ends = m.get("ends") or []
  if len(ends) < 2:
    return study.INCONCLUSIVE, f"depths every arm ran: {m.get('depths')}, not two", "two depths in every arm"
  base = m.get("at_base") or {}
  if base.get("lr") is None:
    return study.INCONCLUSIVE, f"no lr trained at SP's depth {ends[0]}", "smaller lrs or more steps"
  arms = base["arms"]
  lost = [x for a in (CP, SP) for x in (arms.get(a) or {}).get("no_loss", [])]
  if lost:
    return study.INCONCLUSIVE, f"runs at η_b = {base['lr']:g} without a final loss: {lost[:4]}", "smaller lrs"
  fmt = lambda i: stats.fmt(tuple(i)) if i else "—"
  shift = lambda k: fmt(m["shifts"].get(k))
  arm = lambda a: (
      f"{a} {arms[a]['loss'][0]:.3f} → {arms[a]['loss'][1]:.3f}, Δ {fmt(arms[a]['delta'])}" if arms.get(a) else f"{a} —"
  )
  diff, sp = base.get("diff"), (arms.get(SP) or {}).get("delta")
  regret = ", ".join(f"{a} {arms[a]['regret']:.3f}" for a in (SP, CP) if (arms.get(a) or {}).get("regret") is not None)
  text = (
      f"loss at the base-tuned lr η_b = {base['lr']:g} from {ends[0]} to {ends[-1]} layers per stack: {arm(SP)}; "
      f"{arm(CP)}; D_loss = Δ_CompleteP − Δ_SP {fmt(diff)} over {base['paired_seeds']} seeds (rule: below 0, with "
      f"SP's Δ above 0); reported, not decisive: regret at depth {ends[-1]} {regret or '—'}; the optimum's shift in "
      f"log₂ lr SP {shift(SP)} (the shift's positive control), CompleteP {shift(CP)}, D = |CompleteP| − |SP| {shift(D)}"
  )
  if diff is None:
    return study.INCONCLUSIVE, f"{text}: fewer than 2 paired seeds", "≥ 2 seeds"
  if diff[1] >= 0:
    return study.NOT_REPRODUCED, text, ""
  if sp is None or sp[1] <= 0:
    return (
        study.INCONCLUSIVE,
        f"{text}: the control fails (SP's Δ interval is not above 0: its failure to transfer is not visible here)",
        "deeper stacks or longer runs, where SP at its base lr gets worse",
    )
  if diff[2] < 0:
    return study.REPRODUCED, text, ""
  need = stats.seeds_to_decide(diff, base["paired_seeds"], 0.0)
  more = f"≈ {need} seeds" if need else "more than 100 seeds (D_loss sits near 0)"
  return study.INCONCLUSIVE, f"{text}: D_loss's interval straddles 0", f"more seeds: {more}, were its spread to hold"


FRESH_SEEDS_FROM = 4  # the rule was stated after seeds 0–3 (depths 2–16) were seen (module docstring)
REREADING = (
    "A re-reading of seeds 0–3 (depths 2–16) by the rule of issue 40, stated after these runs were seen; the fresh "
    "seeds of the cpu config (depths 2 and 32) decide it"
)


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  if m.get("unclassed"):
    return study.Verdict(study.INCONCLUSIVE, f"runs without an outcome class (train.eval_at_init off): {m['unclassed'][:4]}")  # fmt: skip
  m = with_at_base(m)
  v, reason, advice = _read(m)
  reason += f" [decides it: {advice}]" if advice else ""
  seeds = {r["seed"] for g in m.get("runs", {}).values() for c in g.values() for rs in c.values() for r in rs}
  if seeds and min(seeds) < FRESH_SEEDS_FROM and (m.get("steps") or 0) > 100:  # the tiny tests' runs are no record
    return study.Verdict(v, f"{REREADING}. {reason}")
  return study.Verdict(v, reason)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed") or not m.get("runs"):
    return []
  runs = m["runs"]
  arms = [a for a in ARMS if a in runs] + [a for a in runs if a not in ARMS]
  depths = m["depths"]
  cmap = plots.plt.get_cmap("viridis")
  lcol = {L: cmap(i / max(1, len(depths) - 1) * 0.9) for i, L in enumerate(depths)}
  acol = {a: f"C{i}" for i, a in enumerate(arms)}
  sharp = {a: m["sharpness"][a] for a in arms if (m.get("sharpness") or {}).get(a)}
  panels = [f"l{i}" for i in range(len(arms))] + ["o"] + (["s"] if sharp else [])
  ncol = 2 if len(panels) == 4 else min(3, len(panels))
  mosaic = [panels[i : i + ncol] + ["."] * (i + ncol - len(panels)) for i in range(0, len(panels), ncol)]
  fig, ax = plots.plt.subplot_mosaic(mosaic, figsize=(4.2 * ncol, 3.6 * len(mosaic) + 0.9), layout="constrained")
  losses = [r["final_loss"] for g in runs.values() for c in g.values() for rs in c.values() for r in rs]
  top = transfer.clipped_top(losses)
  base = with_at_base(m).get("at_base") or {}  # the rule's reading: each arm's loss at η_b, shallowest to deepest
  for i, a in enumerate(arms):  # final loss vs lr per depth; not-trained runs as 'x', at a clipped top without a loss
    x = ax[f"l{i}"]
    transfer.loss_vs_lr(x, runs[a], [int(L) for L in runs[a]], m["optima"][a], lcol, losses, top)
    if base.get("lr"):
      x.axvline(base["lr"], color="0.45", lw=1.0, ls="--")
    x.set_title(f"({chr(97 + i)}) {a}: final loss vs lr", fontsize=10)
    x.set(xlabel="peak lr", ylabel="final val. loss (nats, log scale)" if i % ncol == 0 else None)
  o = ax["o"]
  transfer.optima_vs_size(o, m["optima"], m["shifts"], acol, depths, word="depth", xlabel="layers per stack L")
  d = m["shifts"].get(D)
  o.set_title(
      f"({chr(97 + len(arms))}) optimal lr vs depth" + (f"\nD = {D} = {stats.fmt(tuple(d))}" if d else ""), fontsize=10
  )
  if sharp:  # the sharpness along training vs depth at the reference lr (reported, not decisive)
    ref = ", ".join(format(lr, "g") for lr in m["ref_lr"])
    transfer.sharpness_vs_size(ax["s"], sharp, m["slopes"], acol, depths, word="depth", xlabel="layers per stack L")
    ax["s"].set_title(f"({chr(98 + len(arms))}) sharpness vs depth at η {ref}\n(mean ± seeds' std; reported)", fontsize=10)  # fmt: skip
  handles = [plots.plt.Line2D([], [], color=lcol[L], label=f"L = {L}") for L in depths]
  if base.get("lr"):
    handles.append(plots.plt.Line2D([], [], color="0.45", lw=1.0, ls="--", label=f"η_b = {base['lr']:g} (base-tuned)"))
  handles.append(transfer.not_trained_handle(top))
  plots.figure_legend(fig, handles, [h.get_label() for h in handles], max_cols=len(handles), fontsize=8)
  what = "the loss at the base-tuned lr η_b and the optimal lr" + (" and the sharpness" if sharp else "")
  decides = f"\nD_loss = Δ_CompleteP − Δ_SP at η_b = {stats.fmt(tuple(base['diff']))} (the rule)" if base.get("diff") else ""  # fmt: skip
  plots.headline_title(fig, f"Study 13 (Dey et al. 2025, CompleteP): {what} across depth{decides}", settings)
  return [plots.save(fig, out_dir, "depth.png")]


def summary(m: dict) -> dict:
  if m.get("crashed") or not m.get("runs"):
    return {}
  m = with_at_base(m)
  base = m.get("at_base") or {}
  out = {f"Δ loss at η_b {a}": stats.fmt(tuple(x["delta"])) for a, x in (base.get("arms") or {}).items() if x["delta"]}
  if base.get("diff"):
    out["D_loss = Δ_CompleteP − Δ_SP"] = stats.fmt(tuple(base["diff"]))
  out.update({f"shift {k}": stats.fmt(tuple(s)) for k, s in m["shifts"].items() if s})
  out.update({f"sharpness slope {a} (reported)": stats.fmt(tuple(s)) for a, s in (m.get("slopes") or {}).items() if s})  # fmt: skip
  if m.get("sharpness_missing"):
    out["sharpness: reference-lr runs without a window median"] = ", ".join(m["sharpness_missing"])
  n = m.get("lanczos_steps")
  if n:
    out["Lanczos steps per curvature record"] = f"median {n['median']:g}, max {n['max']} over {n['records']} records"
  return out


CLAIM = study.Study(
    name="depth",
    number=13,
    statement='Dey et al. 2025: "Some parameterizations fail to transfer optimal base HPs (such as learning rate) '
    "across changes in model depth [...] CompleteP [...] achieves both depth-wise HP transfer and non-lazy learning in "
    "all layers\": CompleteP's optimal learning rate shifts less with depth than standard Pre-LN's (Depth-µP, "
    "Bordelon et al. 2024, measured beside it).",
    source="Dey et al. 2025 (arXiv 2505.01618), abstract and Table 1; Bordelon et al. 2024 (arXiv 2309.16620), "
    "Depth-µP (α = 1/2)",
    paper_scale="LLM training with depth scaled from a tuned base depth (Dey et al. 2025, abstract); here an "
    "encoder-decoder on Multi30k De→En, L + L layers",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    headline=("D_loss = Δ_CompleteP − Δ_SP",),
)
