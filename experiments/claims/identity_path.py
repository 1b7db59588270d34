"""Claim 4 (Su 2021a §6; Su 2021b; docs/science.md §6): at init Post-LN's identity path decays like 2^{-l/2} with
depth, Pre-LN's does not.

The statement (Su 2021a §6, its equations transcribed): Post Norm x_{t+1} = Norm(x_t + F_t(x_t)), with x_t and F_t
of variance 1, is (x_t + F_t(x_t))/√2, so the coefficient of x_0 in x_l decays like 2^{-l/2}; Pre Norm
x_{t+1} = x_t + F_t(Norm(x_t)) keeps it at 1. One step, for c = <x, x_0>/<x_0, x_0> and a branch F independent of x_0:
    Post-LN  c_out = c_in / sqrt(q_in + q_F),   q_in = E[x_in²], q_F = E[F²]   (2^{-1/2} when q_in = q_F = 1),
    Pre-LN   c_out = c_in.

Measured (configs/claims/identity_path.py; analysis.signal at init, per sublayer and seed, averaged over the analysis
batches): c_out, q_in, q_F and σ² = q_F/q_in per sublayer of an encoder built to the derivation's setting (MLP
branches d→d→d with the normalized ReLU and Xavier kernels, so σ²_MLP ≈ 1). Each sublayer is one step (c_in, c_out);
the steps are the replicates, and a law's factor is the least-squares slope through the origin of c_out on its
prediction, with its Student-t interval (t_{N−1}, N steps).

Rules (each reads its 95% interval: it holds when the whole interval satisfies it, fails when none of it does):
  post   every Post-LN sublayer with c_in ≥ 0.05: slope of c_out on c_in/√(q_in + q_F) in [1 − 0.15, 1 + 0.15];
  decay  the σ² ≈ 1 (MLP) Post-LN sublayers with c_in ≥ 0.05: slope of c_out on c_in within 10% of 2^{-1/2}, i.e. in
         [0.636, 0.778]; their mean σ² is reported;
  pre    every Pre-LN sublayer: slope of c_out on c_in in [0.9^{1/K}, 1.1^{1/K}] (K sublayers: the expected
         coefficient after the whole stack within 10% of 1).
REPRODUCED if all three hold; NOT_REPRODUCED if one fails; INCONCLUSIVE if one is undetermined (more seeds: the
reason projects how many would decide it, `seeds_to_decide`), a rule has fewer than 2 steps to read, or a run
crashed. Why the steps are the replicates, the cut c_in ≥ 0.05, and the rules' history: docs/design_log.md.
"""

import math
from typing import Optional

import numpy as np
import scipy.stats

from experiments import plots, stats, study

POST_REL, DECAY_REL, PRE_STACK = 0.15, 0.10, 0.10
DECAY_MIN_C = 0.05  # c_in from which a step is read (5 × 0.01, the noise of <F, x_0>/<x_0, x_0> first assumed)
DECAY = 2**-0.5
THRESHOLDS = {
    "post": f"Post-LN steps with c_in ≥ {DECAY_MIN_C}: slope through 0 of c_out on c_in/√(q_in + q_F), 95% interval "
    f"over the steps of every seed, in [{1 - POST_REL:g}, {1 + POST_REL:g}]",
    "decay": f"Post-LN MLP (σ² ≈ 1) steps with c_in ≥ {DECAY_MIN_C}: slope through 0 of c_out on c_in, 95% interval, "
    f"within {DECAY_REL:.0%} of 2^(-1/2)",
    "pre": f"Pre-LN, every step: slope through 0 of c_out on c_in, 95% interval, in [{1 - PRE_STACK:g}^(1/K), "
    f"{1 + PRE_STACK:g}^(1/K)] for K sublayers (the coefficient after the stack within {PRE_STACK:.0%} of 1)",
    "reading": "an interval straddling its band's edge is inconclusive (more seeds decide)",
}


def _profile(run: study.Run) -> list[dict]:
  """Per sublayer (in stack order): c, q_in, q_F, sublayer kind; averaged over the run's analysis batches."""
  per_batch = run.analysis("signal")
  out = None
  for batch in per_batch:
    recs = [r for r in batch["records"] if r["stack"] == "encoder" and r["layer"] is not None]
    rows = [
        dict(
            kind=r["sublayer"],
            layer=r["layer"],
            c=r["x0_coefficient"],
            q_in=r["second_moment_in"],
            q_f=r["branch_second_moment"],
        )
        for r in recs
    ]
    if out is None:
      out = [dict(row, n=1) for row in rows]
    else:
      for acc, row in zip(out, rows):
        for k in ("c", "q_in", "q_f"):
          acc[k] += row[k]
        acc["n"] += 1
  return [{**r, **{k: r[k] / r["n"] for k in ("c", "q_in", "q_f")}} for r in out]


def _arm(runs: list[study.Run]) -> dict:
  """Per seed and sublayer c, q_in, q_F; their seed means, σ² and the chained Post-LN prediction (drawn)."""
  profiles = [_profile(r) for r in runs]
  per_seed = {k: np.asarray([[p[k] for p in prof] for prof in profiles]) for k in ("c", "q_in", "q_f")}
  mean = {k: v.mean(0) for k, v in per_seed.items()}
  # Chained prediction: the first sublayer's input is x_0 (c_in = 1, q_in = E[x_0²]).
  pred, c = [], 1.0
  for q_in, q_f in zip(mean["q_in"], mean["q_f"]):
    c = c / math.sqrt(q_in + q_f)
    pred.append(c)
  return dict(
      kinds=[p["kind"] for p in profiles[0]],
      layers=[p["layer"] for p in profiles[0]],
      c=mean["c"].tolist(),
      c_per_seed=per_seed["c"].tolist(),
      q_in_per_seed=per_seed["q_in"].tolist(),
      q_f_per_seed=per_seed["q_f"].tolist(),
      sigma2=(mean["q_f"] / mean["q_in"]).tolist(),
      predicted=pred,
      seeds=[r.seed for r in runs],
  )


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  if out["crashed"]:
    return out
  for pos in ("post", "pre"):
    out[pos] = _arm(results.select({"model.norm_position": pos}))
  post = out["post"]
  out["post_mlp_sigma2"] = float(np.mean([s for s, k in zip(post["sigma2"], post["kinds"]) if k == "mlp"]))
  out["sublayers"] = len(post["c"])
  return out


def origin_slope_interval(x, y, level: float = stats.LEVEL) -> Optional[tuple[float, float, float]]:
  """(b, low, high): least squares through the origin, b = Σxy/Σx², with b ± t_{N−1}·s/√Σx², s² = Σ(y − bx)²/(N−1);
  None for fewer than 2 points."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if len(x) < 2 or not np.any(x):
    return None
  sxx = float(x @ x)
  b = float(x @ y) / sxx
  s = math.sqrt(float(np.sum((y - b * x) ** 2)) / (len(x) - 1))
  half = scipy.stats.t.ppf(0.5 + level / 2, len(x) - 1) * s / math.sqrt(sxx)
  return b, b - half, b + half


MOST_SEEDS = 200


def projected_half_width(interval, n_steps: int, seeds: int, m: int) -> float:
  """The origin slope's half-width over `m` seeds, were the slope and the scatter about it to hold: the steps and Σx²
  grow as m/seeds, so it scales as t_{N′−1}/t_{N−1}·√(seeds/m) (N′ = N·m/seeds)."""
  b, _, hi = interval
  t_now, t_then = (scipy.stats.t.ppf(0.5 + stats.LEVEL / 2, n - 1) for n in (n_steps, round(n_steps * m / seeds)))
  return (hi - b) * t_then / t_now * math.sqrt(seeds / m)


def seeds_to_decide(interval, n_steps: int, seeds: int, band: tuple[float, float]) -> Optional[int]:
  """The fewest seeds whose projected interval (`projected_half_width`) straddles no edge of `band` (it clears the
  edge nearest the slope, so the far one too); None when the slope sits on an edge or more than MOST_SEEDS are
  needed. A projection of a Student-t interval (as experiments/stats.py `seeds_to_decide` for a mean), which covers
  at any number of steps for normal deviations, not of a percentile bootstrap."""
  gap = min(abs(interval[0] - band[0]), abs(interval[0] - band[1]))
  if gap == 0:
    return None
  return next(
      (m for m in range(seeds, MOST_SEEDS + 1) if projected_half_width(interval, n_steps, seeds, m) < gap), None
  )


def steps(arm: dict) -> dict[str, np.ndarray]:
  """Every (seed, sublayer) step, flattened: c_in (the previous sublayer's c of that seed; 1 for the first), c_out,
  the Post-LN law's c_in/√(q_in + q_F), and whether the sublayer is an MLP."""
  c = np.asarray(arm["c_per_seed"], np.float64)
  c_in = np.concatenate([np.ones((len(c), 1)), c[:, :-1]], 1)
  law = c_in / np.sqrt(np.asarray(arm["q_in_per_seed"]) + np.asarray(arm["q_f_per_seed"]))
  mlp = np.broadcast_to(np.asarray(arm["kinds"]) == "mlp", c.shape)
  return dict(c_in=c_in.ravel(), c_out=c.ravel(), law=law.ravel(), mlp=mlp.ravel())


def bands(m: dict) -> dict[str, tuple[float, float]]:
  k = len(m["pre"]["c"])
  return {
      "post": (1 - POST_REL, 1 + POST_REL),
      "decay": (DECAY * (1 - DECAY_REL), DECAY * (1 + DECAY_REL)),
      "pre": ((1 - PRE_STACK) ** (1 / k), (1 + PRE_STACK) ** (1 / k)),
  }


def intervals(m: dict) -> dict:
  """The slopes the verdict reads with their 95% intervals (None where fewer than 2 steps qualify), and the
  number of steps each reads."""
  post, pre = steps(m["post"]), steps(m["pre"])
  read = post["c_in"] >= DECAY_MIN_C
  chosen = {"post": (post["law"], post["c_out"], read), "decay": (post["c_in"], post["c_out"], read & post["mlp"])}
  chosen["pre"] = (pre["c_in"], pre["c_out"], np.ones_like(pre["mlp"]))
  return {
      name: dict(interval=origin_slope_interval(x[keep], y[keep]), steps=int(keep.sum()))
      for name, (x, y, keep) in chosen.items()
  }


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  iv, band = intervals(m), bands(m)
  unread = [f"{k} ({v['steps']} step(s))" for k, v in iv.items() if v["interval"] is None]
  if unread:
    return study.Verdict(
        study.INCONCLUSIVE, f"fewer than 2 steps with c_in ≥ {DECAY_MIN_C} to read: {unread}; more seeds or layers"
    )
  rules = {k: stats.reading(v["interval"], low=band[k][0], high=band[k][1]) for k, v in iv.items()}

  def show(k: str) -> str:
    return f"{stats.fmt(iv[k]['interval'], 4)} over {iv[k]['steps']} steps (band [{band[k][0]:.4g}, {band[k][1]:.4g}])"

  seeds = len(m["post"]["seeds"])
  reason = (
      f"slopes through 0, {seeds} seed(s), 95% intervals: Post-LN law c_out vs c_in/√(q_in + q_F) {show('post')}; "
      f"Post-LN MLP factor c_out/c_in {show('decay')} (2^(-1/2) = {DECAY:.3f}, mean σ² = {m['post_mlp_sigma2']:.2f}); "
      f"Pre-LN factor {show('pre')}. Post-LN c after {m['sublayers']} sublayers = {m['post']['c'][-1]:.3g} (chained "
      f"prediction {m['post']['predicted'][-1]:.3g}), Pre-LN {m['pre']['c'][-1]:.3g}"
  )

  def undetermined(keys: list[str]) -> str:
    need = {k: seeds_to_decide(iv[k]["interval"], iv[k]["steps"], seeds, band[k]) for k in keys}
    gives = ", ".join(
        f"{k}: at least ≈ {n} seeds (now {seeds})"
        if n
        else f"{k}: not within {MOST_SEEDS} seeds (or its slope sits on the edge)"
        for k, n in need.items()
    )
    return (
        f"the interval straddles its band's edge (more seeds decide it, were the slope and its scatter to hold, a "
        f"projection of the Student-t interval: {gives}): {keys}"
    )

  return study.decide(rules, reason, undetermined=undetermined)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, (ax, ax_steps) = plots.plt.subplots(1, 2, figsize=(13, 4.4), gridspec_kw=dict(width_ratios=[1.2, 1]))
  for pos, color, marker in (("post", "C3", "o"), ("pre", "C0", "s")):
    arm = m[pos]
    k = np.arange(1, len(arm["c"]) + 1)
    per_seed = np.asarray(arm["c_per_seed"])
    if len(per_seed) > 1:
      ax.fill_between(k, per_seed.min(0), per_seed.max(0), color=color, alpha=0.2, lw=0)
    ax.plot(k, arm["c"], marker, color=color, ms=4, label=f"{pos.capitalize()}-LN measured (mean over seeds)")
  k = np.arange(1, m["sublayers"] + 1)
  pred = np.asarray(m["post"]["predicted"])
  ax.plot(k, pred, "-", color="C3", lw=1, label=r"Post-LN $\hat c_k = c_0\prod_j (q_{in}/(q_{in}+q_F))^{1/2}$")
  ax.plot(
      k, pred[0] * 2.0 ** (-(k - 1) / 2), ":", color="grey", lw=1, label=r"$2^{-1/2}$ per sublayer ($\sigma^2 = 1$)"
  )
  ax.axhline(1.0, color="C0", lw=1)
  floor = min(DECAY_MIN_C / 16, float(pred.min()) / 2)
  ax.axhspan(floor, DECAY_MIN_C, color="grey", alpha=0.12, lw=0, label=f"c < {DECAY_MIN_C}: steps from here not read")
  ax.set_yscale("log", base=2)
  ax.set_ylim(floor, 1.6)
  ax.set_xlabel("sublayer k (attention, MLP alternating)")
  ax.set_ylabel(r"$c_k = \langle x_k, x_0\rangle / \langle x_0, x_0\rangle$ (≤ 0 not drawn)")
  ax.xaxis.get_major_locator().set_params(integer=True)
  ax.legend(fontsize=7)
  ax.set_title("the coefficient through the stack", fontsize=9)
  # The verdict's steps: c_out over its predictor, against c_in; the fitted slope's 95% interval and the rule's band.
  iv, band = intervals(m), bands(m)
  post, pre = steps(m["post"]), steps(m["pre"])
  read = post["c_in"] >= DECAY_MIN_C
  mlp = read & post["mlp"]
  groups = (
      ("post", post["c_in"][read], post["c_out"][read] / post["law"][read], "C3", "o", "Post-LN c_out / law"),
      ("decay", post["c_in"][mlp], post["c_out"][mlp] / post["c_in"][mlp], "C1", "s", "Post-LN MLP c_out / c_in"),
      ("pre", pre["c_in"], pre["c_out"] / pre["c_in"], "C0", "^", "Pre-LN c_out / c_in"),
  )
  for name, x, y, color, marker, label in groups:
    interval = iv[name]["interval"]
    text = f" (slope {stats.fmt(interval, 4)})" if interval else ""
    ax_steps.plot(x, y, marker, color=color, ms=3.5, alpha=0.7, mfc="none", label=label + text)
    if interval:
      ax_steps.axhspan(interval[1], interval[2], color=color, alpha=0.25, lw=0)
    for edge in band[name]:
      ax_steps.axhline(edge, color=color, ls="--", lw=0.7)
  ax_steps.set_xscale("log")
  ax_steps.set_xlabel(r"$c_{in}$ of the step (every seed; read from " + f"{DECAY_MIN_C})")
  ax_steps.set_ylabel("step factor over its prediction")
  ax_steps.set_title("the verdict: slopes through 0 (shaded: 95% interval; dashed: bands)", fontsize=9)
  ax_steps.legend(fontsize=7)
  plots.headline_title(fig, "Coefficient of the stack input x_0 in the residual stream at init, per sublayer", settings)
  return [plots.save(fig, out_dir, "identity_path.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  iv = intervals(m)
  show = lambda k: stats.fmt(iv[k]["interval"], 4) if iv[k]["interval"] else None
  return {
      "Post-LN law slope": show("post"),
      "Post-LN MLP factor": show("decay"),
      "Pre-LN factor": show("pre"),
      "Post-LN c_last": m["post"]["c"][-1],
  }


CLAIM = study.Study(
    name="identity_path",
    number=4,
    statement="At init Post-LN's identity path decays like 2^{-l/2} with depth; Pre-LN's does not.",
    source="Su 2021a §6 and Su 2021b (the derivation); docs/science.md §6",
    paper_scale="derivation (σ = 1 branches), any width",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
