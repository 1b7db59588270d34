"""Study 11, the atlas's question cell by cell (issue 28): does the curvature at step 0 predict where training breaks,
and where warmup rescues it? Its sweep: configs/claims/edge.py.

The statement tested (the verdict): Cohen et al. 2022 ("Adaptive Gradient Methods at the Edge of Stability",
arXiv:2207.14484, §3 and Eq. 1-2): for Adam with its preconditioner P frozen, the quadratic model is stable iff
η·λ_max(P⁻¹H) < (2 + 2β₁)/(1 − β₁) (38 at β₁ = 0.9), "the preconditioned sharpness" that Adam trains at the edge of.
Read at step 0 across methods, each method's boundary is η* = c/λ₀. The verdict reads the boundary rules
(experiments/claims/shared/boundary_rules.py: a run fails when it diverges, spikes or collapses; log η* regressed on log(c/λ₀))
on the `adam` predictor; they were stated after these runs were seen (issue 40: issue 28's early outcome could not
see collapse), so this study's verdict is a re-reading, and study 14 (experiments/claims/edge_boundary.py) decides
them on fresh seeds. Issue 28's cell-by-cell AUC scores on the early outcome stay as reported tables.
Kalra & Barkeshli 2024 ("Why Warmup the Learning Rate?", NeurIPS 2024, §4) say warmup's benefit is that it lets the
sharpness fall before the lr peaks, so a cell that fails without warmup can train with it: the rescue scores below.
Their mechanism is measured on the trace runs (one method, one lr, with and without warmup): λ(P⁻¹H) at the longest
warmup's end over the same seed's λ₀, for both, so the run without warmup is the control (reported, not decided).

The rules (cells and their early and final outcomes, the predictors and their thresholds, the scores against the lr
alone and the majority class, the warmup-rescue question and the adaptive grid) are in
experiments/claims/shared/edge_rules.py and boundary_rules.py, fixed before the runs; this module reads a sweep into them (`measure`), decides
(`verdict`), draws (`figure`: shared/edge_report.py) and names the next round of the grid (`extensions`).
"""

import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np

from experiments import study
from experiments.claims.shared.boundary_rules import (
    BOUNDARY_THRESHOLDS,
    boundary_verdict,
    row,
)
from experiments.claims.shared.edge_report import boundary_of, figure, summary, tables
from experiments.claims.shared.edge_rules import (
    EARLY,
    FINAL,
    MAX_ROUNDS,
    PREDICTORS,
    Cell,
    extend,
    rescue_score,
    score,
    threshold,
)


# ------------------------------------------------------------------------------------------------ the study over a sweep
# λ₀ of each predictor from a step-0 analysis (analysis/run.py's stability.json and eigenvalues.json), with the
# residual bound where Lanczos gives one (the update sharpness is a Rayleigh quotient and the batch sharpness an
# average over batches: exact numbers, no bound).
def step0_lambdas(stability: Mapping, beta1: float) -> dict[str, dict]:
  """{predictor: {"lambda", "bound"}} of one at-init run's stability.json (a predictor it lacks is absent)."""
  del beta1  # the thresholds are applied by `threshold`; λ₀ itself does not depend on β₁
  s = stability
  out = {}
  if s.get("lambda_max") is not None:
    out["gd"] = {"lambda": s["lambda_max"], "bound": s.get("lambda_max_bound")}
  if s.get("preconditioned_lambda_max") is not None:
    out["adam"] = {"lambda": s["preconditioned_lambda_max"], "bound": s.get("preconditioned_lambda_max_bound")}
  critical = s.get("first_step_critical_lr")
  if critical is None and s.get("update_sharpness") is not None and s["update_sharpness"] <= 0:
    critical = math.inf  # dᵀHd ≤ 0: the critical lr is ∞, which stability.json (strict JSON) holds as null
  if critical is not None:  # c/λ₀ = the critical first step 2gᵀd/dᵀHd, so λ₀ = 2/it (0 when the step never overshoots)
    out["update"] = {"lambda": 2.0 / critical if math.isfinite(critical) and critical > 0 else 0.0, "bound": None}
  if s.get("ggn_lambda_max") is not None:
    out["ggn"] = {"lambda": s["ggn_lambda_max"], "bound": s.get("ggn_lambda_max_bound")}
  if s.get("batch_sharpness") is not None:
    out["batch"] = {"lambda": s["batch_sharpness"], "bound": None}
  return out


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
  v = [x for x in values if x is not None and math.isfinite(x)]
  return float(np.median(v)) if v else None


def _max(values: Sequence[Optional[float]], c: float) -> Optional[float]:
  v = [x for x in values if x is not None and math.isfinite(x)]
  return max(v) / c if v else None


def trace(run: study.Run, warmup: int) -> dict:
  """A trace run's records (`train.curvature_every`, analysis/tracking.py metric names) along its steps: λ_max(H),
  λ_max(P_t⁻¹H), η(t)·each, and both λ at the first record at or after the end of the warmup."""
  recs = [r for r in run.metrics("train") if "curvature/lambda_max" in r]
  out = dict(
      method=run.arm,
      lr=float(run.params["optim.learning_rate"]),
      warmup=warmup,
      seed=run.seed,
      steps=[r["step"] for r in recs],
      lambda_=[r["curvature/lambda_max"] for r in recs],
      p_lambda=[r.get("curvature/preconditioned_lambda_max") for r in recs],
      lr_lambda=[r.get("curvature/lr_times_lambda_max") for r in recs],
      lr_p_lambda=[r.get("curvature/lr_times_preconditioned_lambda_max") for r in recs],
  )
  after = [i for i, step in enumerate(out["steps"]) if step >= max(warmup, 1)]
  i = after[0] if after else None
  out["end_of_warmup"] = (
      {"step": out["steps"][i], "lambda": out["lambda_"][i], "p_lambda": out["p_lambda"][i]} if i is not None else {}
  )
  return out


def _cells_of(rows: Sequence[dict]) -> list[Cell]:
  grouped: dict[tuple, list[dict]] = {}
  for r in rows:
    grouped.setdefault((r["method"], r["lr"], r["warmup"]), []).append(r)
  return [
      Cell(m, lr, w, tuple(r["early"] for r in rs if r["early"]), tuple(r["final"] for r in rs if r["final"]))
      for (m, lr, w), rs in grouped.items()
  ]


def _is_cell(run: study.Run) -> bool:
  """A training run of the grid: not an at-init analysis, not a trace, not crashed."""
  return (
      run.outcome != "crashed"
      and not run.params.get("analysis.at_init")
      and not run.params.get("train.curvature_every")
  )


def measure(results: study.Results) -> dict:
  """The runs read back: per method its step-0 λ₀ (the median over seeds of each predictor; `flagged`: the
  predictors ε decides in any seed), per training run its early and final class, and every score."""
  beta1 = float(results.config.optim.b1) if results.config is not None else 0.9
  crashed = study.crashed(results.runs)
  per_seed: dict[str, dict[int, dict]] = {}
  flagged: dict[str, set] = {}
  rows, traces = [], []
  for run in results.runs:
    if run.outcome == "crashed":
      continue
    if run.params.get("analysis.at_init"):
      stability = run.analysis("stability", 0, required=False) or {}
      per_seed.setdefault(run.arm, {})[run.seed] = step0_lambdas(stability, beta1)
      for predictor, flag in (("adam", "eps_decides"), ("update", "update_eps_decides")):
        if stability.get(flag):
          flagged.setdefault(run.arm, set()).add(predictor)
      continue
    warmup = int(run.params["optim.warmup_steps"])
    if run.params.get("train.curvature_every"):
      traces.append(trace(run, warmup))
      continue
    rows.append(row(run, warmup))
  seeds = {method: list(by_seed.values()) for method, by_seed in per_seed.items()}
  lam0 = {
      method: {p: _median([s[p]["lambda"] for s in ss if p in s]) for p in PREDICTORS if any(p in s for s in ss)}
      for method, ss in seeds.items()
  }
  bounds = {
      method: {p: max((s[p]["bound"] or 0.0) for s in ss if p in s) for p in PREDICTORS if any(p in s for s in ss)}
      for method, ss in seeds.items()
  }
  for t in traces:  # Kalra & Barkeshli's mechanism: λ at the end of the warmup against the same seed's λ₀
    at_init = per_seed.get(t["method"], {}).get(t["seed"], {})
    for p, key in (("gd", "lambda"), ("adam", "p_lambda")):
      end = t["end_of_warmup"].get(key)
      lam = (at_init.get(p) or {}).get("lambda")
      t["end_of_warmup"][f"{p}_over_step0"] = end / lam if end is not None and lam else None
    t["max_over_c"] = {
        "gd": _max(t["lr_lambda"], threshold("gd", beta1)),
        "adam": _max(t["lr_p_lambda"], threshold("adam", beta1)),
    }
  cells = _cells_of(rows)
  flags = {m: sorted(f) for m, f in flagged.items()}
  warmups = sorted({c.warmup for c in cells if c.warmup})
  return dict(
      beta1=beta1,
      crashed=crashed,
      runs=rows,
      lam0=lam0,
      bounds=bounds,
      flagged=flags,
      thresholds={p: threshold(p, beta1) for p in PREDICTORS},
      grid=extend(cells),
      traces=traces,
      scores={
          which: {p: score(cells, lam0, p, beta1=beta1, which=which, flagged=flags) for p in PREDICTORS}
          for which in (EARLY, FINAL)
      },
      rescue={
          which: {
              str(w): {
                  p: rescue_score(cells, lam0, p, beta1=beta1, warmup=w, which=which, flagged=flags) for p in PREDICTORS
              }
              for w in warmups
          }
          for which in (EARLY, FINAL)
      },
  )


REREADING = (
    "A re-reading of seeds 0–2 by the boundary rules (experiments/claims/shared/boundary_rules.py), stated after these runs "
    "were seen (issue 40); study 14 (edge_boundary) decides the same rules on fresh seeds, and its verdict is "
    "the one reported"
)


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  """The boundary rules on the `adam` predictor (edge_rules.boundary_verdict), said as a re-reading (`REREADING`)."""
  result, reason = boundary_verdict(boundary_of(m))
  return study.Verdict(result, f"{REREADING}. {reason}")


def extensions(results: study.Results) -> dict[str, dict[str, list]]:
  """The next round of the grid (module docstring, `extend`): {method label: {"optim.learning_rate": lrs}} for every
  method whose boundary (early outcome, without warmup) is not bracketed yet; {} when every one is."""
  rows = [row(run, int(run.params["optim.warmup_steps"])) for run in results.runs if _is_cell(run)]
  grid = extend(_cells_of(rows))  # the grid's cells only: no analysis read, no score bootstrapped
  return {method: {"optim.learning_rate": g["add"]} for method, g in grid.items() if g["add"]}


CLAIM = study.Study(
    name="edge",
    number=11,
    statement=(
        "Adam is unstable at η when η·λ_max(P⁻¹H) exceeds (2 + 2β₁)/(1 − β₁): read at step 0, the preconditioned "
        "sharpness predicts each method's boundary η* = c/λ₀ (slope 1 of log η* on log(c/λ₀) across methods), where "
        "a run fails when it diverges, spikes or collapses to the unigram plateau."
    ),
    source=(
        "Cohen et al. 2022, Adaptive Gradient Methods at the Edge of Stability, §3, Eq. 1-2; warmup's mechanism: "
        "Kalra & Barkeshli 2024, Why Warmup the Learning Rate?, NeurIPS 2024, §4"
    ),
    paper_scale=(
        "Cohen et al. 2022: full-batch and minibatch Adam on CIFAR-10 networks and Transformers (WikiText-2), "
        "sharpness tracked along training; Kalra & Barkeshli 2024: CIFAR-10 ResNets and WikiText Transformers"
    ),
    thresholds={
        "re-reading": "the boundary rules (experiments/claims/shared/boundary_rules.py) were stated after these runs were seen "
        "(issue 40); study 14 (edge_boundary) applies them to fresh seeds, and its verdict is the one reported",
        **BOUNDARY_THRESHOLDS,
        "reported": "the other predictors' slopes, the warmup question (Spearman ρ of the rescued fraction at η_hi on "
        "log λ₀), and issue 28's early-outcome AUC scores",
    },
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
    headline=("slope log η* on log(c/λ₀), gd", "slope log η* on log(c/λ₀), adam"),
    tables=tables,
    extend=extensions,
    max_rounds=MAX_ROUNDS,
    figures_from_record=True,
)
