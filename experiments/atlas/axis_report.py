"""ATLAS.md's sections of the axis parts: per part its status (runs done of expected, missing cells named), settings,
prediction and verdict, table and figure, from whatever `<workdir>/<part>/` holds.

Contract: `sections(config, workdir, fig_dir)` collects and measures every axis part (experiments.atlas.axis_collect),
draws each part's figure into `fig_dir` once it has a run (experiments.atlas.axis_figures) and returns (the markdown
of the sections, {part: measured}); experiments.atlas.report puts both into ATLAS.md and atlas.json.
"""

import copy
from typing import Any, Optional

import ml_collections

from experiments import grid as grid_lib
from experiments import report as sweep_report
from experiments.atlas import axes as axes_lib
from experiments.atlas import axis_collect, axis_figures
from experiments.atlas import axis_measures as A
from models.config import PRESETS

TITLES = {
    "trace": "Through warmup: η(t)·λ_max(t) against the edge of stability",
    "width": "Width: curvature at init against d_model (SP, NTK, µP)",
    "depth": "Depth: curvature and the last layer's gradient at init against N (Xiong et al. 2020, Theorem 1)",
    "transfer": "Learning-rate transfer across widths (Yang et al. 2022, Tensor Programs V)",
}


def _fmt(x: Any, spec: str = ".3g") -> str:
  return format(x, spec) if sweep_report.finite(x) else "—"


def settings(cfg: ml_collections.ConfigDict, part: str) -> str:
  """What the part's sweep holds fixed, as a figure title (experiments.report.fixed_settings, plus the sizes the
  part's grid leaves fixed)."""
  m = cfg.model
  size = lambda k: m[k] if m[k] is not None else PRESETS[m.preset][k]
  layers = f"{size('num_encoder_layers')}+{size('num_decoder_layers')} layers, {size('num_heads')} heads, "
  shape = {
      "trace": "",
      "width": layers + "init by parameterization, ",
      "transfer": layers + "init by parameterization, ",
      "depth": f"d={size('d_model')}, {size('num_heads')} heads, d_ff {size('d_ff')}, ",
  }[part]
  drop = [k for k, _ in grid_lib.parse_grid(cfg.sweep.grid, cfg)]
  drop += {"trace": [], "width": ["init.scheme"], "transfer": ["init.scheme"], "depth": ["model.preset"]}[part]
  view = copy.deepcopy(cfg)
  if part in ("width", "depth"):  # at init: the one step only gives ℓ₀, no optimizer setting matters
    view.train.num_steps = 0
  analysis = f"; analysis batch {cfg.analysis.batch_size}, {cfg.analysis.lanczos_steps} Lanczos steps"
  return shape + sweep_report.fixed_settings(view, drop, cfg.sweep.seeds) + (analysis if part != "transfer" else "")


MAX_MISSING_NAMED = 6  # a part's status names at most this many missing cells (atlas.json lists every one)


def _status(m: dict) -> str:
  if not m["missing"]:
    return f"**complete** ({m['done']} runs)"
  labels = m["missing_labels"]
  named = "; ".join(labels[:MAX_MISSING_NAMED])
  more = (
      f"; and {len(labels) - MAX_MISSING_NAMED} more (atlas.json's `missing` names them)"
      if len(labels) > MAX_MISSING_NAMED
      else ""
  )
  return f"**PARTIAL: {m['done']} of {m['expected']} runs**; {len(labels)} cell(s) missing: {named}{more}"


def _width_table(m: dict) -> str:
  rows = list(m["rows"].values())
  widths = rows[0]["widths"] if rows else []
  head = "| parameterization | " + " | ".join(f"d={w:g}: λ_max(H) ± / λ_max(P⁻¹H)" for w in widths)
  lines = [
      head + " | exponent λ_max(H) | exponent λ_max(P⁻¹H) | max/min λ_max(H) |",
      "|---|" + "---|" * (len(widths) + 3),
  ]
  for arm, r in m["rows"].items():
    cells = [
        f"{_fmt(v)} ± {_fmt(b, '.1g')} / {_fmt(p)}"
        for v, b, p in zip(r["lambda_max"], r["lambda_max_bound"], r["p_lambda"])
    ]
    lines.append(
        f"| {arm} | " + " | ".join(cells) + f" | {_fmt(r['slope'], '+.2f')} | {_fmt(r['p_slope'], '+.2f')} | "
        f"{_fmt(r['ratio'], '.2f')} |"
    )
  return "\n".join(lines)


def _depth_table(m: dict) -> str:
  rows = list(m["rows"].values())
  depths = rows[0]["depths"] if rows else []
  ns = " / ".join(f"{n:g}" for n in depths)
  lines = [
      f"| method | λ_max(H) at N = {ns} | exponent (ref.) | ‖∂ℓ/∂W^(2,L)‖ decoder at N = {ns} | exponent (ref.) | "
      "encoder's exponent | verdicts (grad, λ) |",
      "|---|---|---|---|---|---|---|",
  ]
  for arm, r in m["rows"].items():
    ref = lambda table: f" ({table[arm]:+g})" if arm in table else ""
    v = m["verdicts"].get(arm)
    lines.append(
        f"| {arm} | {' / '.join(_fmt(x) for x in r['lambda_max'])} | {_fmt(r['lambda_max_slope'], '+.2f')}"
        f"{ref(A.LAMBDA_SLOPES)} | {' / '.join(_fmt(x) for x in r['grad_decoder'])} | "
        f"{_fmt(r['grad_decoder_slope'], '+.2f')}{ref(A.GRAD_SLOPES)} | {_fmt(r['grad_encoder_slope'], '+.2f')} | "
        + (f"**{v['grad']}**, **{v['lambda']}**" if v else "no prediction")
        + " |"
    )
  return "\n".join(lines)


def _transfer_table(m: dict) -> str:
  rows = list(m["rows"].values())
  lrs = rows[0]["lrs"] if rows else []
  lines = [
      "| parameterization | d_model | " + " | ".join(f"η = {lr:g}" for lr in lrs) + " | optimal η |",
      "|---|---|" + "---|" * (len(lrs) + 1),
  ]
  for arm, r in m["rows"].items():
    for w in r["widths"]:
      losses = ["×" if d else _fmt(v, ".3f") for v, d in zip(w["losses"], w["diverged"])]
      edge = {"above": " (≥: grid's top)", "below": " (≤: grid's bottom)"}.get(w["censored"] or "", "")
      lines.append(f"| {arm} | {w['width']:g} | " + " | ".join(losses) + f" | {_fmt(w['optimal_lr'])}{edge} |")
  lines += ["", "| parameterization | shift of the optimum, smallest → largest width (grid steps) | factor | verdict |"]
  lines.append("|---|---|---|---|")
  for arm, r in m["rows"].items():
    verdict = f"**{r['verdict']}**" if arm == "mup" else "reported"
    lines.append(f"| {arm} | {axis_figures.shift_text(r)} | {_fmt(r['shift_factor'])} | {verdict} |")
  return "\n".join(lines)


def _trace_table(m: dict) -> str:
  adam = _fmt(m["adam_threshold"], "g")
  lines = [
      f"| run | window (steps ≤) | max η·λ_max(H)/2 in it | max η·λ_max(P⁻¹H)/{adam} in it | max η·λ_max(H)/2, whole "
      "run | outcome | final val loss |",
      "|---|---|---|---|---|---|---|",
  ]
  for arm, runs in m["rows"].items():
    for r in runs:
      lines.append(
          f"| {arm} (seed {r['seed']}) | {r['window']} | {_fmt(r['max_gd'])} | {_fmt(r['max_adam'])} | "
          f"{_fmt(r['max_gd_run'])} | {'**diverged**' if r['diverged'] else r['outcome']} | {_fmt(r['final_loss'])} |"
      )
  return "\n".join(lines)


TABLES = {"trace": _trace_table, "width": _width_table, "depth": _depth_table, "transfer": _transfer_table}
RULES = {
    "trace": f"Per run, the largest η(t)·λ_max(H)(t)/2 (gradient descent's threshold, Cohen et al. 2021) and "
    f"η(t)·λ_max(P⁻¹H)(t)/((2 + 2β₁)/(1 − β₁)) (Adam's, Cohen et al. 2022) over the records with t ≤ T_w, or t ≤ "
    f"{A.EARLY_STEPS} without warmup (> 1: past it); no prediction. The preconditioned panel and column appear when "
    "the runs' records hold `curvature/lr_times_preconditioned_lambda_max` (analysis.preconditioned_top_k > 0).",
    "width": f"Prediction: **mup_flat**: {A.PREDICTIONS['mup_flat']} (Noci et al. 2024, arXiv:2402.17457); SP and "
    f"NTK reported with their fitted exponents. Needs every width, ≥ {A.MIN_POINTS} of them, and Lanczos bounds "
    f"≤ {A.BOUND_TOL:.0%} of λ_max. µP starts its readout and W_q at 0 (Tensor Programs V, App. D.2), so at step 0 "
    "no weight below the readout has a gradient: Adam's step-1 preconditioner |g| + ε is ε there and µP's "
    "λ_max(P⁻¹H) measures ε, not the landscape (reported, not read).",
    "depth": f"Predictions: **grad**: {A.PREDICTIONS['grad']} (the decoder's last layer; the encoder's reported); "
    f"**lambda**: {A.PREDICTIONS['lambda']} (the Gauss–Newton reading: the square of the gradient's). Fitted by "
    f"least squares in log-log over every depth (≥ {A.MIN_POINTS}); DeepNorm, T-Fixup, Admin: no prediction.",
    "transfer": f"Prediction: **mup_transfer**: {A.PREDICTIONS['mup_transfer']} (Yang et al. 2022, Fig. 1); the "
    "optimum is the argmin over the grid of the final validation loss (diverged = ∞), censored at the grid's edge "
    "(the shift is then an interval); SP's and NTK's shifts reported.",
}


def _verdicts(m: dict, part: str) -> str:
  if part == "depth":
    return "; ".join(f"{a}: grad **{v['grad']}**, lambda **{v['lambda']}**" for a, v in m["verdicts"].items())
  return "; ".join(f"{k}: **{v}**" for k, v in m["verdicts"].items()) or "descriptive (no prediction)"


def sections(
    config: ml_collections.ConfigDict, workdir: str, fig_dir: str, *, stored: Optional[dict] = None
) -> tuple[str, dict]:
  """(ATLAS.md's axis sections, {part: measured}) (module docstring); with `stored` (atlas.json's `axes`), each
  part's measurements as stored, nothing read from `workdir` (a re-decision of the report, its runs gone)."""
  texts, measured = [], {}
  beta1 = float(config.optim.b1)
  for part in axes_lib.AXIS_PARTS:
    if "atlas" not in config or part not in config.atlas:
      continue
    if stored is not None:
      if part not in stored:
        continue
      m, has_runs = stored[part], stored[part]["done"] > 0
    else:
      collected = axis_collect.collect(config, workdir, part)
      m, has_runs = axis_collect.measure(collected, part, beta1), bool(collected["runs"])
      m["settings"] = settings(axes_lib.part_config(config, part), part)
    figure: Optional[str] = None
    if has_runs:
      figure = axis_figures.DRAW[part](m, fig_dir, m["settings"])
    measured[part] = m
    image = f"![{part}.png](atlas/{part}.png)" if figure else "(no finished run yet)"
    texts.append(f"""## {TITLES[part]}

Status: {_status(m)}. Settings: {m['settings']}; `<workdir>/{part}/`.

{RULES[part]}

Verdict: {_verdicts(m, part)}.

{TABLES[part](m)}

{image}
""")
  return "\n".join(texts), measured
