"""Study 14: does the curvature at step 0 predict where each rule breaks, on fresh seeds (issue 40)? Its sweep:
configs/claims/edge_boundary.py (each method's bracket from study 11's record, refined at its √2 midpoint, on fresh seeds).

The statement tested: Cohen et al. 2022 ("Adaptive Gradient Methods at the Edge of Stability", §3, Eq. 1-2): Adam
with its preconditioner P frozen is stable iff η·λ_max(P⁻¹H) < (2 + 2β₁)/(1 − β₁) = c; read at step 0 across
methods, each method's boundary is η* = c/λ₀, so log η* on log(c/λ₀) has slope 1. The rules (the collapse-aware
outcome, the bracket, the regression and its three readings, the warmup question of Kalra & Barkeshli 2024 §4) are
experiments/claims/shared/boundary_rules.py's boundary rules, stated before these runs; study 11's record gives λ₀ (its step-0
analyses of seeds 0–2: `claim.predictors_from`), so the predictor is measured apart from the outcomes it predicts.
"""

import json
import math
import os

from experiments import study
from experiments.claims.shared import edge_figures
from experiments.claims.shared.boundary_rules import (
    BOUNDARY_THRESHOLDS,
    boundaries,
    boundary_measure,
    boundary_summary,
    boundary_tables,
    boundary_verdict,
    row,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREDICTORS_FROM = "reports/reproduction/edge/claim.json"  # study 11's record: its step-0 λ₀ per method
MAX_ROUNDS = 3  # √2 steps past an end of a bracket the fresh seeds move (configs/claims/edge_boundary.py)


def predictors(path: str) -> dict:
  """{"lam0", "flagged", "beta1", "from"} of the claim.json at `path` (relative to the repository, or absolute)."""
  full = path if os.path.isabs(path) else os.path.join(REPO, path)
  if not os.path.exists(full):
    raise FileNotFoundError(f"claim.predictors_from={path!r}: no such claim.json (study 11's record gives λ₀)")
  with open(full, encoding="utf-8") as f:
    record = json.load(f)
  m = record["measured"]
  commit = (record.get("provenance") or {}).get("git_commit")
  return {"lam0": m["lam0"], "flagged": m["flagged"], "beta1": m.get("beta1", 0.9), "from": path, "commit": commit}


def _rows(results: study.Results) -> list[dict]:
  return [row(run, int(run.params["optim.warmup_steps"])) for run in results.runs if run.outcome != "crashed"]


def measure(results: study.Results) -> dict:
  """The fresh runs read back (rows: early and final classes per run), study 11's λ₀, and the boundary rules."""
  cfg = results.config
  path = (cfg.claim.get("predictors_from") if cfg is not None else "") or PREDICTORS_FROM
  pred = predictors(path)
  rows = _rows(results)
  return dict(
      crashed=study.crashed(results.runs),
      runs=rows,
      beta1=pred["beta1"],
      lam0=pred["lam0"],
      flagged=pred["flagged"],
      predictors_from={"path": pred["from"], "commit": pred["commit"]},
  )


def boundary_of(m: dict) -> dict:
  """The boundary rules on the record's runs and λ₀ (computed, never stored: a re-decision reads them afresh)."""
  return study.jsonable(boundary_measure(m["runs"], m["lam0"], m["flagged"], beta1=m.get("beta1", 0.9)))


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  """The boundary rules on λ_max(P⁻¹H) (edge_rules.boundary_verdict), over the fresh seeds' brackets."""
  result, reason = boundary_verdict(boundary_of(m))
  return study.Verdict(result, f"On fresh seeds: {reason}")


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  """boundary.png (figures.boundary) and classes.png: every run by its collapse-aware class (figures.run_classes)."""
  del results
  head = "Study 14 (fresh seeds): log η* against log(c/λ₀), one point per method"
  return [
      *edge_figures.boundary(boundary_of(m), out_dir, head, settings),
      *edge_figures.run_classes(
          m["runs"], out_dir, "Study 14: every run by its collapse-aware class", settings, "classes.png"
      ),
  ]


def summary(m: dict) -> dict:
  return {} if m.get("crashed") else boundary_summary(boundary_of(m))


def tables(m: dict) -> list[dict]:
  return [] if m.get("crashed") else boundary_tables(boundary_of(m))


def _step(lr: float, up: bool) -> float:
  """lr·√2 (or /√2) to 3 significant digits, as the config's midpoints."""
  return float(f"{lr * math.sqrt(2) ** (1 if up else -1):.3g}")


def extensions(results: study.Results) -> dict[str, dict[str, list]]:
  """The next round: for each method whose fresh bracket is open, one √2 step past its end (below its smallest lr
  when that fails, above its largest when none fails); {} when every bracket is closed."""
  out = {}
  for method, b in boundaries(_rows(results), 0).items():
    lrs = [float(lr) for lr in b["cells"]]
    if b["open"] == "below":
      out[method] = {"optim.learning_rate": [_step(min(lrs), up=False)]}
    elif b["open"] == "above":
      out[method] = {"optim.learning_rate": [_step(max(lrs), up=True)]}
  return out


CLAIM = study.Study(
    name="edge_boundary",
    number=14,
    statement=(
        "Adam is unstable at η when η·λ_max(P⁻¹H) exceeds (2 + 2β₁)/(1 − β₁): read at step 0, the preconditioned "
        "sharpness predicts each method's boundary η* = c/λ₀ (slope 1 of log η* on log(c/λ₀) across methods), where "
        "a run fails when it diverges, spikes or collapses to the unigram plateau; on seeds the rule never saw."
    ),
    source=(
        "Cohen et al. 2022, Adaptive Gradient Methods at the Edge of Stability, §3, Eq. 1-2; warmup: Kalra & "
        "Barkeshli 2024, Why Warmup the Learning Rate?, NeurIPS 2024, §4"
    ),
    paper_scale=(
        "Cohen et al. 2022: CIFAR-10 networks and WikiText-2 Transformers; Kalra & Barkeshli 2024: CIFAR-10 ResNets "
        "and WikiText Transformers"
    ),
    thresholds=dict(BOUNDARY_THRESHOLDS),
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
