"""The axis parts' runs read back from `<workdir>/<part>/`, and what is measured from them (axis_measures).

Contract: `collect(config, workdir, part)` reads every cell × seed of the part (experiments.atlas.axes.part_cells)
from the part's results.jsonl, as the study contract reads a sweep (experiments.study's `Results`; a run
without a record is missing) and what the part measures: at init (width, depth)
`analysis/step_0/eigenvalues.json` (λ_max with its residual bound), `stability.json` (λ_max(P⁻¹H)) and
`grad_norms.json` (the last layer's mlp_out kernel of each stack); for training parts the record's final
`eval/loss` (transfer) and the `curvature/*` records of metrics.jsonl (trace). `measure(collected, part, beta1)`
turns one part's runs into its table, exponents and verdicts; every number is plain JSON (∞ and NaN as None).
"""

import math
import os
from typing import Any, Optional

import ml_collections
import numpy as np

from experiments import study
from experiments.atlas import axes as axes_lib
from experiments.atlas import axis_measures as A

CURVATURE = {  # analysis/tracking.py's metric -> the trace's name
    "curvature/lambda_max": "lambda_max",
    "curvature/lambda_max_bound": "lambda_max_bound",
    "curvature/learning_rate": "lr",
    "curvature/lr_times_lambda_max": "lr_lambda",
    "curvature/preconditioned_lambda_max": "p_lambda",
    "curvature/preconditioned_lambda_max_bound": "p_lambda_bound",
    "curvature/lr_times_preconditioned_lambda_max": "lr_p_lambda",
}


def _last_layer_grad(profile: Optional[dict], stack: str) -> Optional[float]:
  """‖∂ℓ/∂W^{2,L}‖_F of `stack`: the mlp_out kernel of its last layer (mean over the profile's pairs)."""
  rows = [r for r in (profile or {}).get("aggregate", []) if r["role"] == "mlp_out" and r["stack"] == stack]
  return max(rows, key=lambda r: r["layer"])["norm_mean"] if rows else None


def _at_init(run: study.Run) -> dict:
  eigen = run.analysis("eigenvalues", required=False) or {}
  stab = run.analysis("stability", required=False) or {}
  grads = run.analysis("grad_norms", required=False)
  top = eigen.get("top", {})
  return dict(
      lambda_max=top["values"][0] if top else None,
      lambda_max_bound=top["bounds"][0] if top else None,
      p_lambda=stab.get("preconditioned_lambda_max"),
      p_lambda_bound=stab.get("preconditioned_lambda_max_bound"),
      grad_decoder=_last_layer_grad(grads, "decoder"),
      grad_encoder=_last_layer_grad(grads, "encoder"),
  )


def _trace(run: study.Run) -> dict:
  records = [r for r in run.metrics(split="train") if "curvature/lambda_max" in r]
  return dict(steps=[r["step"] for r in records], **{n: [r.get(k) for r in records] for k, n in CURVATURE.items()})


def collect(config: ml_collections.ConfigDict, workdir: str, part: str) -> dict:
  """{runs: [{arm, x, lr, seed, outcome, loss, ...}], missing: [(cell, seed)], missing_labels: [the report's name of
  each missing cell: arm, x (and lr)], expected, xs, lrs} of one part."""
  seeds = axes_lib.axis(config, part).seeds
  found = study.Results.load(os.path.join(workdir, part)).by_run()
  cells = axes_lib.part_cells(config, part)
  runs, missing, labels = [], [], []
  x_name = {"width": "d", "depth": "N", "transfer": "d"}.get(part)
  for c in cells:
    for s in range(seeds):
      run = found.get((c.cell.name, s))
      if run is None:
        missing.append((c.cell.name, s))
        labels.append(
            c.arm + (f", {x_name}={c.x:g}" if x_name else "") + (f", lr {c.lr:g}" if part == "transfer" else "")
        )
        continue
      loss = run.final.get("eval/loss")
      row = dict(arm=c.arm, x=c.x, lr=c.lr, seed=s, outcome=run.outcome, loss=loss if A._finite(loss) else None)
      row.update(_at_init(run) if part in ("width", "depth") else _trace(run) if part == "trace" else {})
      runs.append(row)
  return dict(
      runs=runs,
      missing=missing,
      missing_labels=list(dict.fromkeys(labels)),
      expected=len(cells) * seeds,
      arms=list(dict.fromkeys(c.arm for c in cells)),
      xs=sorted({c.x for c in cells}),
      lrs=sorted({c.lr for c in cells}),
  )


def _mean(values) -> Optional[float]:
  v = [x for x in values if A._finite(x)]
  return float(np.mean(v)) if v else None


def _worst(values) -> Optional[float]:
  v = [abs(x) for x in values if A._finite(x)]
  return max(v) if v else None


def _series(runs: list[dict], arm: str, xs: list[float], key: str, reduce=_mean) -> list[Optional[float]]:
  """Per x, the reduction over seeds of `key` of the arm's finished runs."""
  return [
      reduce(r.get(key) for r in runs if r["arm"] == arm and r["x"] == x and r["outcome"] == "finished") for x in xs
  ]


def _present(xs: list[float], ys: list[Optional[float]]) -> tuple[list[float], list[float]]:
  pairs = [(x, y) for x, y in zip(xs, ys) if y is not None]
  return [p[0] for p in pairs], [p[1] for p in pairs]


def _width(c: dict) -> dict:
  rows = {}
  for arm in c["arms"]:
    lam, bound = _series(c["runs"], arm, c["xs"], "lambda_max"), _series(
        c["runs"], arm, c["xs"], "lambda_max_bound", _worst
    )
    p, p_bound = _series(c["runs"], arm, c["xs"], "p_lambda"), _series(
        c["runs"], arm, c["xs"], "p_lambda_bound", _worst
    )
    rows[arm] = dict(
        widths=c["xs"],
        lambda_max=lam,
        lambda_max_bound=bound,
        p_lambda=p,
        p_lambda_bound=p_bound,
        slope=A.loglog_slope(*_present(c["xs"], lam)),
        p_slope=A.loglog_slope(*_present(c["xs"], p)),
        ratio=A.flatness([v for v in lam if v is not None]),
        p_ratio=A.flatness([v for v in p if v is not None]),
    )
  mup = rows.get("mup")
  complete = mup is not None and None not in mup["lambda_max"]
  decided = A.decide_flat(mup["lambda_max"], mup["lambda_max_bound"]) if complete else study.INCONCLUSIVE
  return dict(rows=rows, verdicts={"mup_flat": decided})


def _depth(c: dict) -> dict:
  rows, verdicts = {}, {}
  for arm in c["arms"]:
    row: dict[str, Any] = dict(depths=c["xs"])
    for key in ("lambda_max", "grad_decoder", "grad_encoder"):
      row[key] = _series(c["runs"], arm, c["xs"], key)
      row[key + "_slope"] = A.loglog_slope(*_present(c["xs"], row[key]))
    row["lambda_max_bound"] = _series(c["runs"], arm, c["xs"], "lambda_max_bound", _worst)
    complete = None not in row["lambda_max"] and None not in row["grad_decoder"]
    if arm in A.GRAD_SLOPES:
      grad = A.decide_slope(c["xs"], row["grad_decoder"], A.GRAD_SLOPES[arm], A.GRAD_TOL) if complete else None
      lam = A.LAMBDA_SLOPES[arm]
      lam = A.decide_slope(c["xs"], row["lambda_max"], lam, A.LAMBDA_TOL, row["lambda_max_bound"]) if complete else None
      verdicts[arm] = dict(grad=grad or study.INCONCLUSIVE, **{"lambda": lam or study.INCONCLUSIVE})
    rows[arm] = row
  return dict(rows=rows, verdicts=verdicts)


def _loss_at(runs: list[dict]) -> Optional[float]:
  """One width × lr: the mean final loss over seeds, ∞ if a seed diverged, None without a result (crashed)."""
  results = [r for r in runs if r["outcome"] in ("finished", "diverged")]
  if not results:
    return None
  if any(r["outcome"] == "diverged" or r["loss"] is None for r in results):
    return math.inf
  return float(np.mean([r["loss"] for r in results]))


def _transfer(c: dict) -> dict:
  rows = {}
  for arm in c["arms"]:
    per_width, optima = [], {}
    for x in c["xs"]:
      mine = [r for r in c["runs"] if r["arm"] == arm and r["x"] == x]
      losses = [_loss_at([r for r in mine if r["lr"] == lr]) for lr in c["lrs"]]
      optima[x] = A.optimal_lr(dict(zip(c["lrs"], losses)))
      per_width.append(
          dict(
              width=x,
              losses=[v if v is not None and math.isfinite(v) else None for v in losses],
              diverged=[v is not None and math.isinf(v) for v in losses],
              optimal_lr=None if optima[x] is None else c["lrs"][optima[x][0]],
              censored=None if optima[x] is None else optima[x][1],
          )
      )
    small, large = optima[c["xs"][0]], optima[c["xs"][-1]]
    shift = A.lr_shift(small, large) if len(c["xs"]) > 1 else None
    rows[arm] = dict(
        lrs=c["lrs"],
        widths=per_width,
        shift=None if shift is None else [v if math.isfinite(v) else None for v in shift],
        shift_factor=None if shift is None else c["lrs"][large[0]] / c["lrs"][small[0]],
        verdict=A.decide_transfer(shift),
    )
  return dict(rows=rows, verdicts={"mup_transfer": rows["mup"]["verdict"] if "mup" in rows else study.INCONCLUSIVE})


def _trace_runs(c: dict, beta1: float) -> dict:
  adam = A.adam_threshold(beta1)
  rows = {}
  for r in c["runs"]:
    window = A.trace_window(int(r["x"]))
    rows.setdefault(r["arm"], []).append(
        dict(
            seed=r["seed"],
            warmup=int(r["x"]),
            window=window,
            diverged=r["outcome"] == "diverged",
            outcome=r["outcome"],
            final_loss=r["loss"],
            max_gd=A.max_ratio(r["steps"], r["lr_lambda"], 2.0, window),
            max_adam=A.max_ratio(r["steps"], r["lr_p_lambda"], adam, window),
            max_gd_run=A.max_ratio(r["steps"], r["lr_lambda"], 2.0, max(r["steps"], default=0)),
            curves={k: r[k] for k in ("steps", *CURVATURE.values())},
        )
    )
  return dict(rows=rows, adam_threshold=adam, verdicts={})


def measure(collected: dict, part: str, beta1: float) -> dict:
  """One part's table, exponents and verdicts (axis_measures' rules), with its status."""
  out = {"trace": lambda c: _trace_runs(c, beta1), "width": _width, "depth": _depth, "transfer": _transfer}[part](
      collected
  )
  done = len(collected["runs"])
  out.update(
      done=done,
      expected=collected["expected"],
      missing=sorted({cell for cell, _ in collected["missing"]}),  # the cells' directory names (atlas.json)
      missing_labels=collected["missing_labels"],
      outcomes={o: sum(r["outcome"] == o for r in collected["runs"]) for o in ("finished", "diverged", "crashed")},
  )
  return plain(out)


def plain(obj: Any) -> Any:
  """`obj` with every non-finite float as None and tuples as lists: strict JSON."""
  if isinstance(obj, dict):
    return {k: plain(v) for k, v in obj.items()}
  if isinstance(obj, (list, tuple)):
    return [plain(v) for v in obj]
  if isinstance(obj, float) and not math.isfinite(obj):
    return None
  return obj
