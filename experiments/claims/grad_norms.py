"""Claim 5 (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture", Theorem 1 and Fig. 3): at init
the gradients of the parameters near the output are large for Post-LN and well-behaved for Pre-LN.

The statements, quoted: the abstract, "at initialization, for the original-designed Post-LN Transformer, [...] the
expected gradients of the parameters near the output layer are large. [...] if the layer normalization is put inside
the residual blocks (recently proposed as Pre-LN Transformer), the gradients are well-behaved at initialization";
Theorem 1, ‖∂L̃/∂W^{2,L}‖_F ≤ O(d·√(ln d)) for Post-LN and ≤ O(d·√(ln d / L)) for Pre-LN with L layers. The layers
next to the loss are the decoder's, so the decoder decides and the encoder is reported beside it; for Pre-LN the
statement is one-sided (a decrease toward the output, which the 1/√L factor per layer implies, is not a failure).

Measured (configs/claims/grad_norms.py; analysis.grad_norms at init, Xavier, ReLU): ‖∂L/∂W‖_F of the token-mean loss,
averaged over the analysis batches, per seed, for each layer's FFN matrices W¹ (mlp_in) and W² (mlp_out):
  (a) profile: Post-LN vs Pre-LN; the growth across a stack is exp(slope·(L−1)) of the least-squares line through
      log-norm vs layer index, every seed's layers as points (1 = flat), with the slope's 95% Student-t interval;
  (b) depth: for N = M = L in the depth series, ‖∂L/∂W^{2,L}‖ of the decoder's last layer and the slope of the
      least-squares line through log-norm vs log L, every seed's points, with its 95% interval.
Rules (each holds when its whole interval satisfies it, fails when none does, and is undetermined otherwise):
  (a) decoder  Post-LN growth ≥ 1.5 for W¹ and W² of the decoder; Pre-LN growth ≤ 1.5 for both (not growing);
  (b) slope    Post-LN slope in [−0.2, 0.2] (≈ constant in L); Pre-LN slope in [−0.75, −0.25] (≈ −1/2).
REPRODUCED if all hold; NOT_REPRODUCED if any fails; INCONCLUSIVE if one is undetermined (more seeds narrow it), a run
crashed, or a norm is zero or non-finite (no logarithm, so no growth or slope). The rules' history:
docs/design_log.md.
"""

import math
from typing import Optional

import numpy as np

from experiments import grid as grid_lib
from experiments import plots, stats, study
from experiments.claims.shared import at_init

GROWTH = 1.5
POST_SLOPE = (-0.2, 0.2)
PRE_SLOPE = (-0.75, -0.25)
THRESHOLDS = {
    "(a) decoder": f"growth of the decoder's W¹, W² (95% interval): Post-LN ≥ {GROWTH}; Pre-LN ≤ {GROWTH}; encoder "
    "reported, not tested",
    "(b) slope": f"log-log slope of ‖∂L/∂W^(2,L)‖ vs L (95% interval): Post-LN in {list(POST_SLOPE)}; Pre-LN in "
    f"{list(PRE_SLOPE)}",
}
DECISIVE = ("decoder/mlp_in", "decoder/mlp_out")  # the layers next to the loss (module docstring)
POSITIONS = ("post", "pre")
COLORS = {"post": "C3", "pre": "C0"}
ROLES = ("mlp_in", "mlp_out")
LAST = "decoder/mlp_out"


def _run_profile(run: study.Run) -> dict[str, list[float]]:
  """'<stack>/<role>' -> ‖∂L/∂W‖_F per layer (mean over the analysis batches) of the FFN matrices."""
  out: dict[str, dict[int, float]] = {}
  for r in run.analysis("grad_norms")["aggregate"]:
    if r["sublayer"] == "mlp" and r["role"] in ROLES and r["layer"] is not None:
      out.setdefault(f"{r['stack']}/{r['role']}", {})[r["layer"]] = r["norm_mean"]
  return {k: [v[i] for i in sorted(v)] for k, v in sorted(out.items())}


def _positive(values) -> bool:
  return len(values) > 1 and all(v is not None and math.isfinite(v) and v > 0 for v in values)


def growth(norms) -> Optional[float]:
  """exp(slope·(L−1)) of the line through log ‖∂L/∂W‖ vs layer index;
  None if a norm is not positive and finite."""
  if not _positive(norms):
    return None
  slope = np.polyfit(np.arange(len(norms)), np.log(norms), 1)[0]
  return float(np.exp(slope * (len(norms) - 1)))


def loglog_slope(depths, norms) -> Optional[float]:
  """Slope of the line through log ‖∂L/∂W^{2,L}‖ vs log L; None if a norm is not positive and finite."""
  if not _positive(norms):
    return None
  return float(np.polyfit(np.log(depths), np.log(norms), 1)[0])


def _profile(runs: list[study.Run]) -> dict:
  profiles = [_run_profile(r) for r in runs]
  return {
      k: {"mean": np.mean([p[k] for p in profiles], 0).tolist(), "per_seed": [p[k] for p in profiles]}
      for k in profiles[0]
  }


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  if out["crashed"]:
    return out
  profile, growths, last, slopes, depths, example = {}, {}, {}, {}, {}, {}
  for pos in POSITIONS:
    # (a): the cells of the grid's first part, which set only the norm position (configs/claims/grad_norms.py).
    name = grid_lib.cell_name({"model.norm_position": pos})
    a_runs = [r for r in results.runs if r.cell == name]
    b_runs = [r for r in results.runs if r.cell != name and r.params["model.norm_position"] == pos]
    if not a_runs or not b_runs:
      raise ValueError(
          f"{pos}-LN: no profile cell {name!r} or no depth cells; is the grid configs/claims/grad_norms.py's?"
      )
    profile[pos] = _profile(a_runs)
    growths[pos] = {k: growth(v["mean"]) for k, v in profile[pos].items()}
    by_depth: dict[int, list[study.Run]] = {}
    for r in b_runs:
      by_depth.setdefault(r.params["model.num_decoder_layers"], []).append(r)
    depths[pos] = sorted(by_depth)
    per_seed = np.asarray([[_run_profile(r)[LAST][-1] for r in by_depth[d]] for d in depths[pos]]).T  # [seeds, L]
    last[pos] = {"mean": per_seed.mean(0).tolist(), "per_seed": per_seed.tolist()}
    slopes[pos] = loglog_slope(depths[pos], last[pos]["mean"])
    example[pos] = (a_runs[0], b_runs[0])
  if depths["post"] != depths["pre"]:
    raise ValueError(f"the depth series differ: Post-LN {depths['post']}, Pre-LN {depths['pre']}")
  out.update(
      profile=profile,
      growth=growths,
      depths=depths["post"],
      last_ffn_norm=last,
      slopes=slopes,
      model_a=at_init.model_size(example["post"][0]),
      model_b=at_init.model_size(example["post"][1]).split(", ", 1)[1],  # its width; the depth is the x axis
      analysis=at_init.analysis_settings(example["post"][0]),
  )
  return out


def growth_interval(per_seed) -> Optional[tuple[float, float, float]]:
  """(growth, low, high): exp(slope·(L−1)) of log-norm vs layer index over every seed's layers, with the slope's 95%
  interval carried through; None if a norm is not positive and finite."""
  per_seed = np.asarray(per_seed, np.float64)
  if not all(_positive(row) for row in per_seed):
    return None
  layers = per_seed.shape[1]
  slope = stats.slope_interval(np.tile(np.arange(layers), len(per_seed)), np.log(per_seed).ravel())
  return tuple(float(np.exp(v * (layers - 1))) for v in slope)


def slope_interval(depths, per_seed) -> Optional[tuple[float, float, float]]:
  """The log-log slope of ‖∂L/∂W^{2,L}‖ vs L over every seed's points, with its 95% interval."""
  per_seed = np.asarray(per_seed, np.float64)
  if not all(_positive(row) for row in per_seed):
    return None
  return stats.slope_interval(np.tile(np.log(depths), len(per_seed)), np.log(per_seed).ravel())


def intervals(m: dict) -> dict:
  """The intervals the verdict reads: growth per position and stack/role, slope per position (None where a norm is
  not positive and finite)."""
  return {
      "growth": {pos: {k: growth_interval(v["per_seed"]) for k, v in m["profile"][pos].items()} for pos in POSITIONS},
      "slope": {pos: slope_interval(m["depths"], m["last_ffn_norm"][pos]["per_seed"]) for pos in POSITIONS},
  }


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  iv = intervals(m)
  g, s = iv["growth"], iv["slope"]
  missing = [f"{pos} {k}" for pos in POSITIONS for k in DECISIVE if g[pos].get(k) is None]
  missing += [f"{pos} slope" for pos in POSITIONS if s[pos] is None]
  if missing:
    return study.Verdict(study.INCONCLUSIVE, f"a gradient norm is zero or non-finite, no growth or slope for {missing}")
  rules = {
      **{f"(a) Post-LN {k} grows": stats.reading(g["post"][k], low=GROWTH) for k in DECISIVE},
      **{f"(a) Pre-LN {k} does not grow": stats.reading(g["pre"][k], high=GROWTH) for k in DECISIVE},
      "(b) Post-LN constant in L": stats.reading(s["post"], low=POST_SLOPE[0], high=POST_SLOPE[1]),
      "(b) Pre-LN ~ L^-1/2": stats.reading(s["pre"], low=PRE_SLOPE[0], high=PRE_SLOPE[1]),
  }
  fmt = lambda pos, keys: ", ".join(f"{k} {stats.fmt(g[pos][k])}" for k in keys if g[pos].get(k))
  encoder = [k for k in g["post"] if k not in DECISIVE]
  reason = (
      f"decoder growth first→last layer (95% interval): Post-LN {fmt('post', DECISIVE)}; Pre-LN "
      f"{fmt('pre', DECISIVE)}. log-log slope of ‖∂L/∂W^(2,L)‖ vs L ∈ {m['depths']}: Post-LN "
      f"{stats.fmt(s['post'])}, Pre-LN {stats.fmt(s['pre'])}. Encoder (reported, not tested): Post-LN "
      f"{fmt('post', encoder)}; Pre-LN {fmt('pre', encoder)}"
  )
  return study.decide(
      rules, reason, undetermined=lambda keys: f"the interval straddles the threshold (more seeds would decide): {keys}"
  )


def _fmt(v: Optional[float]) -> str:
  return "n/a" if v is None else f"{v:.2f}"


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, axes = plots.plt.subplots(1, 3, figsize=(14, 4.4))
  for ax, stack in zip(axes[:2], ("encoder", "decoder")):
    for pos in POSITIONS:
      for role, style, w in (("mlp_in", "s--", "1"), ("mlp_out", "o-", "2")):
        key = f"{stack}/{role}"
        if key not in m["profile"][pos]:
          continue
        per_seed = m["profile"][pos][key]["per_seed"]
        x = np.arange(1, len(per_seed[0]) + 1)
        mean = plots.seed_band(ax, x, per_seed, COLORS[pos], alpha=0.15)
        label = rf"{pos.capitalize()}-LN $W^{w}$ (growth {_fmt(m['growth'][pos][key])})"
        ax.plot(x, mean, style, color=COLORS[pos], ms=4, lw=1.2, label=label)
    plots.log_y(ax)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(f"{stack} layer")
    ax.set_ylabel(r"$\|\partial \mathcal{L}/\partial W\|_F$ at init")
    ax.set_title(
        f"(a) {stack}: growth = fitted last/first\n"
        + (f"tested: Post-LN ≥ {GROWTH}, Pre-LN ≤ {GROWTH}" if stack == "decoder" else "reported, not tested"),
        fontsize=9,
    )
    ax.legend(fontsize=7)
  ax = axes[2]
  depths = np.asarray(m["depths"], float)
  for pos in POSITIONS:
    per_seed = m["last_ffn_norm"][pos]["per_seed"]
    mean = plots.seed_band(ax, depths, per_seed, COLORS[pos], alpha=0.15)
    ax.plot(
        depths, mean, "o-", color=COLORS[pos], ms=5, label=f"{pos.capitalize()}-LN (slope {_fmt(m['slopes'][pos])})"
    )
    if m["slopes"][pos] is not None:
      fit = np.exp(np.polyval(np.polyfit(np.log(depths), np.log(mean), 1), np.log(depths)))
      ax.plot(depths, fit, ":", color=COLORS[pos], lw=1)
  for pos, power, label in (("post", 0.0, r"$L^0$"), ("pre", -0.5, r"$L^{-1/2}$")):
    start = m["last_ffn_norm"][pos]["mean"][0]
    ax.plot(depths, start * (depths / depths[0]) ** power, "-", color="grey", lw=0.8, alpha=0.7)
    end = start * (depths[-1] / depths[0]) ** power
    ax.annotate(label, (depths[-1], end), fontsize=9, color="grey", ha="right", va="bottom")
  ax.set_xscale("log", base=2)
  plots.log_y(ax)
  ax.set_xticks(depths, [str(int(d)) for d in depths])
  ax.minorticks_off()
  ax.set_xlabel("layers L (encoder = decoder)")
  ax.set_ylabel(r"$\|\partial \mathcal{L}/\partial W^{2,L}\|_F$ (decoder's last FFN)")
  ax.set_title(
      f"(b) {m['model_b']}: log-log slope\nPost-LN in {list(POST_SLOPE)}, Pre-LN in {list(PRE_SLOPE)}", fontsize=9
  )
  ax.legend(fontsize=7)
  plots.headline_title(
      fig,
      f"Gradient norms at init (Xavier, ReLU): (a) {m['model_a']}",
      f"{settings}; {m['analysis']}",
  )
  return [plots.save(fig, out_dir, "grad_norms.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  iv = intervals(m)
  show = lambda x: stats.fmt(x) if x else None
  return {
      "Post-LN dec W¹ growth": show(iv["growth"]["post"].get("decoder/mlp_in")),
      "Post-LN dec W² growth": show(iv["growth"]["post"].get(LAST)),
      "Pre-LN dec W¹ growth": show(iv["growth"]["pre"].get("decoder/mlp_in")),
      "Pre-LN dec W² growth": show(iv["growth"]["pre"].get(LAST)),
      "Post-LN slope vs L": show(iv["slope"]["post"]),
      "Pre-LN slope vs L": show(iv["slope"]["pre"]),
  }


CLAIM = study.Study(
    name="grad_norms",
    number=5,
    statement=(
        "Xiong et al. Theorem 1 and Fig. 3: at init the gradients of the parameters near the output (the decoder's "
        "layers) grow toward the output for Post-LN and do not for Pre-LN; the last layer's FFN gradient norm is "
        "~constant in depth L for Post-LN and decreases like L^{-1/2} for Pre-LN."
    ),
    source="Xiong et al. 2020, Fig. 3 and Theorem 1",
    paper_scale="6+6 layers, d = 512, IWSLT14 De-En",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
