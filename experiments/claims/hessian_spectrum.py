"""Claim 7 (Zhang & Mackey 2022, the slides' experiment; docs/science.md §9): at init a 6+6-layer encoder-decoder with
Xavier init on Multi30k De→En pairs has a Hessian with larger top eigenvalues and a wider spectrum under Post-LN than
under Pre-LN.

Measured (configs/claims/hessian_spectrum.py; analysis.run at init, per seed and norm position): the Hessian of the
token-mean loss over the analysis batches (forward-over-reverse HVPs), Lanczos with full reorthogonalization from a
random start for the top-3 (eigenvalues.json 'top') and, in a second run, the bottom-3 eigenvalues ('bottom'), each a
Ritz value θ with its residual bound b (an eigenvalue lies in [θ ± b]; Parlett 1998, Thm 13.1.1); λ_max = the top
Ritz value, λ_min = the bottom one, the width w = λ_max − λ_min known to ± (b_max + b_min). The SLQ density
(spectrum.json: each probe's nodes and weights) is drawn, not decided on.

Thresholds (per seed, with the residual bounds of the Ritz values involved; those of analysis/reproduce/curvature.py
(retired; git commit 35e9f30)):
  larger   λ_max(Post) − b_max(Post) > λ_max(Pre) + b_max(Pre)  (the two intervals separated);
  wider    w(Post) − (b_max + b_min)(Post) > w(Pre) + (b_max + b_min)(Pre).
REPRODUCED if both hold in every seed; NOT_REPRODUCED if λ_max(Post) ≤ λ_max(Pre) in every seed, or if in every seed
the order is reversed beyond the bounds (Pre-LN larger or wider, the same tests with the arms swapped; this mirror
test was added in review, before the cpu run on the claims layer); otherwise (mixed seeds, or Post-LN above but within
the bounds) INCONCLUSIVE, and so if a run crashed (no measurement) or the two arms ran different seeds.

The figure's density: per probe v, ρ_v(t) = Σ_i τ²_{v,i} g_σ(t − θ_{v,i}) recomputed from the nodes and weights
on one grid and one σ (1% of the range of every node of both arms, SLQ's default rule) so the arms compare; the band is
min–max over seeds × probes. Below ρ_floor = 1 / (n σ √(2π)) (the peak of one eigenvalue's mass 1/n under the
kernel: less than one eigenvalue per kernel width, which n·m quadrature weights cannot resolve) the density is not
drawn.
"""

import math

import numpy as np

from analysis.plots import slq_floor
from experiments.claims import at_init, base, figures

TOP_K = 3
THRESHOLDS = {
    "larger": "per seed λ_max(Post) − b_max(Post) > λ_max(Pre) + b_max(Pre) (Lanczos residual bounds)",
    "wider": "per seed (λ_max − λ_min)(Post) − (b_max + b_min)(Post) > (λ_max − λ_min)(Pre) + (b_max + b_min)(Pre)",
    "verdict": "reproduced: both in every seed; not reproduced: λ_max(Post) ≤ λ_max(Pre) in every seed, or Pre-LN "
    "larger or wider beyond the bounds in every seed; else inconclusive",
}
POSITIONS = ("post", "pre")
COLORS = {"post": "C3", "pre": "C0"}
GRID_SIZE = 800


def _valid(part: dict) -> tuple[list[float], list[float]]:
  keep = [i for i, v in enumerate(part["valid"]) if v]
  return [part["values"][i] for i in keep], [part["bounds"][i] for i in keep]


def _run(run: base.Run) -> dict:
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


def measure(results: base.Results) -> dict:
  out: dict = {"crashed": base.crashed(results.runs)}
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


def larger_beyond_bounds(post: dict, pre: dict) -> bool:
  """λ_max(Post) larger than λ_max(Pre) with their residual-bound intervals separated."""
  return post["lambda_max"] - post["top_bounds"][0] > pre["lambda_max"] + pre["top_bounds"][0]


def wider_beyond_bounds(post: dict, pre: dict) -> bool:
  """Width λ_max − λ_min of Post-LN larger than Pre-LN's by more than the bounds of all four Ritz values."""
  return post["width"] - post["width_bound"] > pre["width"] + pre["width_bound"]


def verdict(m: dict) -> base.Verdict:
  bad = base.crashed_verdict(m)
  if bad:
    return bad
  seeds = {pos: [r["seed"] for r in m[pos]] for pos in POSITIONS}
  if seeds["post"] != seeds["pre"]:
    return base.Verdict(base.INCONCLUSIVE, f"the arms ran different seeds ({seeds}): no paired comparison")
  pairs = list(zip(m["post"], m["pre"]))
  larger = [larger_beyond_bounds(a, b) for a, b in pairs]
  wider = [wider_beyond_bounds(a, b) for a, b in pairs]
  above = [a["lambda_max"] > b["lambda_max"] for a, b in pairs]
  reversed_ = [larger_beyond_bounds(b, a) or wider_beyond_bounds(b, a) for a, b in pairs]
  per_seed = "; ".join(
      f"seed {a['seed']}: λ_max {a['lambda_max']:.4g} ± {a['top_bounds'][0]:.2g} vs {b['lambda_max']:.4g} ± "
      f"{b['top_bounds'][0]:.2g}, width {a['width']:.4g} ± {a['width_bound']:.2g} vs {b['width']:.4g} ± "
      f"{b['width_bound']:.2g}"
      for a, b in pairs
  )
  reason = f"Post-LN vs Pre-LN — {per_seed} (larger beyond bounds: {larger}, wider beyond bounds: {wider})"
  if all(larger) and all(wider):
    return base.Verdict(base.REPRODUCED, reason)
  if not any(above) or all(reversed_):
    return base.Verdict(base.NOT_REPRODUCED, reason + f"; Pre-LN larger or wider beyond bounds: {reversed_}")
  return base.Verdict(base.INCONCLUSIVE, reason)


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
  the margin (Post − its bound) − (Pre + its bound): the verdict's 'beyond the bounds' is a positive margin."""
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
      margin = (post[key] - bound(post)) - (pre[key] + bound(pre))
      ax.annotate(
          f"{margin:+.3g}",
          (x, (post[key] + pre[key]) / 2),
          xytext=(5, 0),
          textcoords="offset points",
          fontsize=7,
          va="center",
      )
  ax.set_xticks([t for t, _ in ticks], [lbl for _, lbl in ticks], fontsize=8)
  ax.set_xlim(-0.7, ticks[-1][0] + 0.9)
  ax.set_ylabel("value ± residual bound")
  ax.set_title(
      "the verdict: Post-LN above Pre-LN beyond the bounds?\n(numbers: margin (Post − b) − (Pre + b), > 0 = yes)",
      fontsize=9,
  )
  ax.legend(fontsize=7)


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, axes = figures.plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw=dict(width_ratios=[1.4, 1, 1]))
  _density_panel(axes[0], m)
  _extremes_panel(axes[1], m)
  _verdict_panel(axes[2], m)
  n = m["post"][0]["num_params"]
  figures.suptitle(
      fig,
      f"Hessian at init (Xavier), Post-LN vs Pre-LN: {m['model']} ({n:,} parameters)",
      f"{settings}; {m['analysis']}; Lanczos {m['lanczos_steps']} steps (also per SLQ probe)",
  )
  return [figures.save(fig, out_dir, "hessian_spectrum.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  mean = lambda pos, key: float(np.mean([r[key] for r in m[pos]]))
  return {
      "λ_max Post-LN": mean("post", "lambda_max"),
      "λ_max Pre-LN": mean("pre", "lambda_max"),
      "width Post-LN": mean("post", "width"),
      "width Pre-LN": mean("pre", "width"),
  }


CLAIM = base.Claim(
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
)
