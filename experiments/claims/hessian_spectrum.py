"""Claim 7 (Zhang & Mackey 2022, the slides' experiment; docs/science.md §9): at init a 6+6-layer encoder-decoder with
Xavier init on Multi30k De→En pairs has a Hessian with larger top eigenvalues and a wider spectrum under Post-LN than
under Pre-LN.

The statement (the slides, a course presentation with no numbered equations or figures to cite, as docs/science.md
§9 records it): "a 6-layer encoder-decoder with Xavier init on De→En translation (1000 Multi30k validation pairs),
Lanczos on the Hessian at init: the Post-LN model's loss surface is more curved (larger top eigenvalues, wider
spectrum) than the Pre-LN model's." Tested: λ_max(Post) > λ_max(Pre) and (λ_max − λ_min)(Post) > (λ_max −
λ_min)(Pre), in expectation over the init (the seeds).

Measured (configs/claims/hessian_spectrum.py; analysis.run at init, per seed and norm position): the Hessian of the
token-mean loss over the analysis batches, Lanczos with full reorthogonalization for the top-3 and the bottom-3
eigenvalues, each a Ritz value θ with its residual bound b (Parlett 1998, Thm 13.1.1); λ_max, λ_min and the width
w = λ_max − λ_min. The SLQ density is drawn, not decided on. A seed draws both arms' weights, so per seed the log
ratio r = log(λ_max(Post)/λ_max(Pre)) (and the same for w) is the replicate; the 95% Student-t interval of its mean
(experiments/stats.py), widened by the largest shift of r the Ritz bounds allow, is exponentiated.

Rules (each holds when its whole interval satisfies it, fails when none of it does, is undetermined otherwise):
  larger   λ_max(Post)/λ_max(Pre) > 1;
  wider    w(Post)/w(Pre) > 1.
REPRODUCED if both hold; NOT_REPRODUCED if either fails (its interval lies below 1: Pre-LN larger or wider);
INCONCLUSIVE if one is undetermined (more seeds: the reason gives n, t_{n−1} and the n that would decide), fewer than
2 seeds, the arms ran different seeds, a Ritz value is not positive where a logarithm needs it, or a run crashed.
The rules' history and the seeds' count: docs/design_log.md.
"""

import math
from typing import Optional

import numpy as np
import scipy.stats

from analysis.plots import slq_floor
from experiments import plots, stats, study
from experiments.claims.shared import at_init

THRESHOLDS = {
    "larger": "λ_max(Post)/λ_max(Pre), paired by seed: 95% Student-t interval of the mean log ratio over the seeds, "
    "widened by the Lanczos residual bounds, exponentiated, > 1",
    "wider": "(λ_max − λ_min)(Post)/(λ_max − λ_min)(Pre), the same interval, > 1",
    "verdict": "reproduced: both hold; not reproduced: either interval below 1; inconclusive: an interval straddles 1 "
    "(more seeds decide) or fewer than 2 seeds",
}
POSITIONS = ("post", "pre")
COLORS = {"post": "C3", "pre": "C0"}
GRID_SIZE = 800


def _valid(part: dict) -> tuple[list[float], list[float]]:
  keep = [i for i, v in enumerate(part["valid"]) if v]
  return [part["values"][i] for i in keep], [part["bounds"][i] for i in keep]


def _run(run: study.Run) -> dict:
  """One run's extremes, width and SLQ nodes/weights."""
  eig = run.analysis("eigenvalues")
  top, top_b = _valid(eig["top"])
  bottom, bottom_b = _valid(eig["bottom"])
  spec = run.analysis("spectrum")
  masks = np.asarray(spec["node_mask"], bool)
  return dict(
      seed=run.seed,
      top=top,
      top_bounds=top_b,
      bottom=bottom,
      bottom_bounds=bottom_b,
      lambda_max=top[0],
      lambda_min=bottom[0],
      width=top[0] - bottom[0],
      width_bound=top_b[0] + bottom_b[0],
      num_params=run.analysis("metadata")["num_params"],
      slq_nodes=[np.asarray(n)[k].tolist() for n, k in zip(spec["nodes"], masks)],
      slq_weights=[np.asarray(w)[k].tolist() for w, k in zip(spec["weights"], masks)],
  )


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  if out["crashed"]:
    return out
  for pos in POSITIONS:
    runs = sorted(results.select({"model.norm_position": pos}), key=lambda r: r.seed)
    if not runs:
      raise ValueError(f"no {pos}-LN run in the sweep; is the grid configs/claims/hessian_spectrum.py's?")
    out[pos] = [_run(r) for r in runs]
  meta = results.runs[0].analysis("metadata")
  out.update(
      model=at_init.model_size(results.runs[0]),
      analysis=at_init.analysis_settings(results.runs[0]),
      lanczos_steps=meta["lanczos_steps"],
      num_probes=len(out["post"][0]["slq_nodes"]),
  )
  return out


def seed_log_ratios(m: dict, key: str) -> Optional[list[tuple[float, float, float]]]:
  """Per seed (Post and Pre paired by seed), (r, low, high) of r = log(Post/Pre) for `key` ('lambda_max' or
  'width'), low and high with each Ritz value at the edge of its bound interval; None if a value is not positive."""
  bound = (lambda r: r["top_bounds"][0]) if key == "lambda_max" else (lambda r: r["width_bound"])
  out = []
  for post, pre in zip(m["post"], m["pre"]):
    (a, da), (b, db) = (post[key], bound(post)), (pre[key], bound(pre))
    if a <= 0 or b <= 0:
      return None
    log = lambda x: math.log(x) if x > 0 else -math.inf
    out.append((math.log(a / b), log(a - da) - math.log(b + db), math.log(a + da) - log(b - db)))
  return out


def ratio_interval(per_seed: list[tuple[float, float, float]]) -> tuple[float, float, float]:
  """exp of the Student-t interval of the seeds' mean log ratio, widened by the largest shift the Ritz bounds allow
  a seed's log ratio (module docstring): (geometric-mean ratio, low, high)."""
  r = [x[0] for x in per_seed]
  mean, lo, hi = stats.mean_interval(r)
  lo -= max(x[0] - x[1] for x in per_seed)
  hi += max(x[2] - x[0] for x in per_seed)
  return math.exp(mean), math.exp(lo), math.exp(hi)


def seeds_to_decide(r: list[float], level: float = stats.LEVEL, most: int = 100) -> Optional[int]:
  """The fewest seeds n whose Student-t interval would exclude 0 (ratio 1), were the mean and spread of the log
  ratios `r` to hold: t_{n−1}·s/√n < |mean|; None if not within `most`."""
  mean, s = float(np.mean(r)), float(np.std(r, ddof=1))
  for n in range(2, most + 1):
    if scipy.stats.t.ppf(0.5 + level / 2, n - 1) * s / math.sqrt(n) < abs(mean):
      return n
  return None


def intervals(m: dict) -> Optional[dict]:
  """{'lambda_max', 'width'}: each the per-seed log ratios and the ratio interval; None with fewer than 2 seeds, or
  if a value is not positive."""
  out = {}
  for key in ("lambda_max", "width"):
    per_seed = seed_log_ratios(m, key)
    if per_seed is None or len(per_seed) < 2:
      return None
    out[key] = dict(per_seed=per_seed, interval=ratio_interval(per_seed))
  return out


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  seeds = {pos: [r["seed"] for r in m[pos]] for pos in POSITIONS}
  if seeds["post"] != seeds["pre"]:
    return study.Verdict(study.INCONCLUSIVE, f"the arms ran different seeds ({seeds}): no paired comparison")
  pairs = list(zip(m["post"], m["pre"]))
  per_seed = "; ".join(
      f"seed {a['seed']}: λ_max {a['lambda_max']:.4g} ± {a['top_bounds'][0]:.2g} vs {b['lambda_max']:.4g} ± "
      f"{b['top_bounds'][0]:.2g}, width {a['width']:.4g} ± {a['width_bound']:.2g} vs {b['width']:.4g} ± "
      f"{b['width_bound']:.2g}"
      for a, b in pairs
  )
  iv = intervals(m)
  if iv is None:
    return study.Verdict(
        study.INCONCLUSIVE,
        f"Post-LN vs Pre-LN — {per_seed}; no interval over {len(pairs)} seed(s) (≥ 2 seeds with positive λ_max and "
        "width needed): more seeds",
    )
  rules = {"larger": stats.reading(iv["lambda_max"]["interval"], low=1.0)}
  rules["wider"] = stats.reading(iv["width"]["interval"], low=1.0)
  n = len(pairs)
  reason = (
      f"Post-LN / Pre-LN over {n} seeds (geometric mean, 95% interval): λ_max {stats.fmt(iv['lambda_max']['interval'])}"
      f", width {stats.fmt(iv['width']['interval'])}. Per seed, Post-LN vs Pre-LN — {per_seed}"
  )

  def undetermined(keys: list[str]) -> str:
    t = scipy.stats.t.ppf(0.5 + stats.LEVEL / 2, n - 1)
    key = {"larger": "lambda_max", "wider": "width"}
    need = {k: seeds_to_decide([x[0] for x in iv[key[k]]["per_seed"]]) for k in keys}
    need_text = ", ".join(f"{k} ≈ {v if v else 'over 100'} seeds" for k, v in need.items())
    return (
        f"the interval straddles 1 (more seeds: n = {n} gives t_{n - 1} = {t:.3g}; were the seeds' spread to hold, "
        f"{need_text} would decide): {keys}"
    )

  return study.decide(rules, reason, failing="failing (Pre-LN larger or wider)", undetermined=undetermined)


def _densities(runs: list[dict], grid: np.ndarray, sigma: float) -> np.ndarray:
  """[seeds × probes, G]: each probe's Gaussian-smoothed quadrature density on `grid`."""
  rows = []
  for r in runs:
    for nodes, weights in zip(r["slq_nodes"], r["slq_weights"]):
      t = grid[None, :] - np.asarray(nodes)[:, None]
      kernel = np.exp(-0.5 * (t / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
      rows.append(np.asarray(weights) @ kernel)
  return np.asarray(rows)


def _density_panel(ax, m: dict) -> None:
  nodes = np.concatenate([x for pos in POSITIONS for r in m[pos] for x in map(np.asarray, r["slq_nodes"])])
  lo, hi = float(nodes.min()), float(nodes.max())
  sigma = 0.01 * (hi - lo if hi > lo else max(abs(hi), 1.0))
  grid = np.linspace(lo - 5 * sigma, hi + 5 * sigma, GRID_SIZE)
  n = max(r["num_params"] for pos in POSITIONS for r in m[pos])
  floor = slq_floor(sigma, n)
  for pos in POSITIONS:
    rho = _densities(m[pos], grid, sigma)
    mean, low, high = rho.mean(0), rho.min(0), rho.max(0)
    ax.fill_between(grid, np.maximum(low, floor), high, where=high >= floor, color=COLORS[pos], alpha=0.2, lw=0)
    ax.plot(grid, np.where(mean >= floor, mean, np.nan), color=COLORS[pos], lw=1.2, label=f"{pos.capitalize()}-LN")
    for r in m[pos]:  # the Lanczos extremes the verdict uses, as ticks on the axis
      for x in (r["lambda_min"], r["lambda_max"]):
        ax.axvline(x, ymax=0.06, color=COLORS[pos], lw=1.5)
  ax.axhline(floor, color="grey", ls=":", lw=1, label=r"floor $1/(n\sigma\sqrt{2\pi})$: < 1 eigenvalue per $\sigma$")
  ax.set_yscale("log")
  ax.set_ylim(bottom=floor / 3)
  ax.set_xlabel(r"eigenvalue $\lambda$")
  ax.set_ylabel(r"SLQ density $\rho(\lambda)$")
  ax.set_title(
      f"density: mean, band min–max over seeds × {m['num_probes']} probes\n(σ = {sigma:.3g}; ticks at the foot: "
      r"Lanczos $\lambda_{\min}$, $\lambda_{\max}$)",
      fontsize=9,
  )
  ax.legend(fontsize=7)


def _extremes_panel(ax, m: dict) -> None:
  worst = 0.0
  seeds = len(m["post"])
  for pos_i, pos in enumerate(POSITIONS):
    for s, r in enumerate(m[pos]):
      shift = (pos_i - 0.5) * 0.3 + (s - (seeds - 1) / 2) * 0.3 / max(seeds, 1) / 2
      for part, marker, fill in (("top", "o", COLORS[pos]), ("bottom", "v", "white")):
        values, bounds = r[part], r[f"{part}_bounds"]
        idx = np.arange(1, len(values) + 1) + shift
        worst = max(worst, max(bounds))
        label = f"{pos.capitalize()}-LN {part}" if s == 0 else None
        ax.errorbar(idx, values, yerr=bounds, fmt=marker, mfc=fill, color=COLORS[pos], ms=5, capsize=3, label=label)
  ax.axhline(0, color="grey", lw=0.5)
  ax.xaxis.get_major_locator().set_params(integer=True)
  ax.set_xlabel(r"index $i$ ($i = 1$: $\lambda_{\max}$ for top, $\lambda_{\min}$ for bottom)")
  ax.set_ylabel(r"Ritz value $\theta_i$ ± residual bound")
  k = max(len(r[part]) for pos in POSITIONS for r in m[pos] for part in ("top", "bottom"))
  ax.set_title(f"Lanczos top-{k} and bottom-{k}, every seed\n(largest bound {worst:.2g})", fontsize=9)
  ax.legend(fontsize=7)


def _verdict_panel(ax, m: dict) -> None:
  """Per seed, λ_max and the width for Post-LN and Pre-LN at one x, ± their bounds, joined by a line labelled with
  the seed's ratio Post/Pre; the title gives the ratios' intervals the verdict reads."""
  pairs = list(zip(m["post"], m["pre"]))
  quantities = ((r"$\lambda_{\max}$", "lambda_max", lambda r: r["top_bounds"][0], "o"), ("width", "width", None, "s"))
  ticks = []
  for q_i, (name, key, bound, marker) in enumerate(quantities):
    bound = bound or (lambda r: r["width_bound"])
    for s_i, (post, pre) in enumerate(pairs):
      x = q_i * (len(pairs) + 1) + s_i
      ticks.append((x, f"{name}\nseed {post['seed']}"))
      ax.plot([x, x], [pre[key], post[key]], color="grey", lw=0.8, zorder=1)
      for pos, r in (("post", post), ("pre", pre)):
        label = f"{pos.capitalize()}-LN" if (q_i, s_i) == (0, 0) else None
        ax.errorbar(x, r[key], yerr=bound(r), fmt=marker, color=COLORS[pos], ms=6, capsize=3, label=label, zorder=2)
      ax.annotate(
          f"×{post[key] / pre[key]:.3g}",
          (x, (post[key] + pre[key]) / 2),
          xytext=(5, 0),
          textcoords="offset points",
          fontsize=7,
          va="center",
      )
  ax.set_xticks([t for t, _ in ticks], [lbl for _, lbl in ticks], fontsize=8)
  ax.set_xlim(-0.7, ticks[-1][0] + 0.9)
  ax.set_ylabel("value ± residual bound")
  iv = intervals(m)
  tested = (
      f"λ_max {stats.fmt(iv['lambda_max']['interval'])}; width {stats.fmt(iv['width']['interval'])}"
      if iv
      else "one seed: no interval"
  )
  ax.set_title(
      f"the verdict: Post/Pre per seed (numbers);\nover the seeds, 95% interval (> 1 holds):\n{tested}", fontsize=9
  )
  ax.legend(fontsize=7)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, axes = plots.plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw=dict(width_ratios=[1.4, 1, 1]))
  _density_panel(axes[0], m)
  _extremes_panel(axes[1], m)
  _verdict_panel(axes[2], m)
  n = m["post"][0]["num_params"]
  plots.headline_title(
      fig,
      f"Hessian at init (Xavier), Post-LN vs Pre-LN: {m['model']} ({n:,} parameters)",
      f"{settings}; {m['analysis']}; Lanczos {m['lanczos_steps']} steps (also per SLQ probe)",
  )
  return [plots.save(fig, out_dir, "hessian_spectrum.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  mean = lambda pos, key: float(np.mean([r[key] for r in m[pos]]))
  out = {
      "λ_max Post-LN": mean("post", "lambda_max"),
      "λ_max Pre-LN": mean("pre", "lambda_max"),
      "width Post-LN": mean("post", "width"),
      "width Pre-LN": mean("pre", "width"),
  }
  iv = intervals(m) if [r["seed"] for r in m["post"]] == [r["seed"] for r in m["pre"]] else None
  if iv:
    out["λ_max Post/Pre"] = stats.fmt(iv["lambda_max"]["interval"])
    out["width Post/Pre"] = stats.fmt(iv["width"]["interval"])
  return out


CLAIM = study.Study(
    name="hessian_spectrum",
    number=7,
    statement=(
        "The slides' experiment: at init (6-layer encoder-decoder, Xavier, Multi30k pairs) Post-LN has larger top "
        "Hessian eigenvalues and a wider spectrum than Pre-LN."
    ),
    source="Zhang & Mackey 2022 (slides); docs/science.md §9",
    paper_scale="6+6 layers, d = 512, 1000 Multi30k pairs",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    headline=("λ_max Post/Pre",),
)
