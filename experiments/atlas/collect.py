"""The atlas's runs read back from its two sweep folders, and what is measured from them (experiments.atlas.measures).

Contract: `collect(config, workdir)` reads the two sweeps as the study contract does (experiments.study's
`Results` of `<workdir>/train/` and `<workdir>/init/`, from their results.jsonl): every training cell × seed of
`config` (a run without a record is missing) and, per method × seed, the at-init run: its step-1 `train/loss` (ℓ₀)
and `analysis/step_0/{eigenvalues,stability,blocks}.json`, and the unigram reference the runs' classes are read
against (`reference`: a training run's data_stats.json). `measure`
turns that into per-method numbers and the predictions' verdicts; every number is plain JSON.
"""

import dataclasses
import math
import os
from typing import Any, Optional

import ml_collections
import numpy as np

from analysis import outcomes
from experiments import study
from experiments.atlas import cells as cells_lib
from experiments.atlas import measures as M
from train import loop as train_loop


def _curvature(run: study.Run) -> dict:
  """The step-0 curvature of one at-init run (empty where a file is missing)."""
  out: dict[str, Any] = {}
  eigen = run.analysis("eigenvalues", required=False) or {}
  if "top" in eigen:
    out.update(lambda_max=eigen["top"]["values"][0], lambda_max_bound=eigen["top"]["bounds"][0])
  if "bottom" in eigen:
    out.update(lambda_min=eigen["bottom"]["values"][0], lambda_min_bound=eigen["bottom"]["bounds"][0])
  stab = run.analysis("stability", required=False) or {}
  for key in ("preconditioned_lambda_max", "update_sharpness", "max_stable_lr_gd", "max_stable_lr_adam"):
    if key in stab:
      out[key] = stab[key]
  if "first_step_critical_lr" in stab:
    out["first_step_critical_lr"] = stab["first_step_critical_lr"]
  blocks = run.analysis("blocks", required=False)
  if blocks:
    top = max(blocks, key=lambda b: b["top_value"])
    out.update(block_max=top["top_value"], block_max_bound=top["top_bound"], block_max_name=top["name"])
  return out


def collect(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """{points: [Point], missing: [(cell, seed)], init: {method: [{seed, loss0, curvature...}]}, expected runs}."""
  seeds = config.sweep.seeds
  train = study.Results.load(os.path.join(workdir, "train")).by_run()
  init_runs = study.Results.load(os.path.join(workdir, "init")).by_run()
  points, missing = [], []
  cells = cells_lib.training_cells(cells_lib.train_config(config))
  for c in cells:
    for s in range(seeds):
      run = train.get((c.cell.name, s))
      if run is None:
        missing.append((c.cell.name, s))
        continue
      loss = run.final.get("eval/loss")
      loss = loss if M._finite(loss) else None
      points.append(M.Point(c.method, c.warmup, c.lr, s, run.outcome, loss, run.record.get("class")))
  init: dict[str, list[dict]] = {}
  for method, cell in cells_lib.init_cells(config):
    for s in range(seeds):
      run = init_runs.get((cell.name, s))
      loss0 = next((r["loss"] for r in run.metrics(split="train") if r["step"] == 1), None) if run else None
      init.setdefault(method, []).append(dict(seed=s, loss0=loss0, **(_curvature(run) if run else {})))
  return dict(points=points, missing=missing, init=init, expected_runs=len(cells) * seeds, reference=reference(train))


def reference(runs: dict[tuple[str, int], study.Run]) -> Optional[dict]:
  """The unigram reference of the training runs (their data_stats.json, `train.eval_at_init`; every run of the
  atlas reads the same data, so the first one found): {"unigram_entropy": H, ...}, or None when no run wrote one."""
  for (cell, seed), run in sorted(runs.items()):
    stats = run.json(train_loop.DATA_STATS_FILE)
    if stats is not None:
      return {"unigram_entropy": stats["target_unigram_entropy"], "source": f"{cell}/seed_{seed}", **stats}
  return None


def _mean(values) -> Optional[float]:
  v = [x for x in values if M._finite(x)]
  return float(np.mean(v)) if v else None


def _predicted(init_runs: list[dict], beta1: float) -> dict[str, Optional[float]]:
  """The four predictors' lrs (measures.PREDICTORS), geometric means over seeds."""
  adam = (2 + 2 * beta1) / (1 - beta1)
  per = {
      "gd": [
          2 / r["lambda_max"] if M._finite(r.get("lambda_max")) and r["lambda_max"] > 0 else None for r in init_runs
      ],
      "adam": [
          adam / r["preconditioned_lambda_max"]
          if M._finite(r.get("preconditioned_lambda_max")) and r["preconditioned_lambda_max"] > 0
          else None
          for r in init_runs
      ],
      "update": [r.get("first_step_critical_lr") for r in init_runs],
      "block": [
          2 / r["block_max"] if M._finite(r.get("block_max")) and r["block_max"] > 0 else None for r in init_runs
      ],
  }
  return {k: M.geometric_mean(v) for k, v in per.items()}


def stiffest_block(runs: list[dict]) -> Optional[str]:
  """The block the seeds' at-init analyses name stiffest most often; a tie goes to the name of the run with the largest
  block λ_max (not to set order, which changes between processes); "(k of n seeds)" is added where they disagree."""
  named = [r for r in runs if r.get("block_max_name")]
  if not named:
    return None
  names = [r["block_max_name"] for r in named]
  value = {n: -math.inf for n in names}
  for r in named:
    if M._finite(r.get("block_max")):
      value[r["block_max_name"]] = max(value[r["block_max_name"]], r["block_max"])
  name = max(value, key=lambda n: (names.count(n), value[n]))
  return name if names.count(name) == len(names) else f"{name} ({names.count(name)} of {len(names)} seeds)"


def measure(collected: dict, beta1: float) -> dict:
  """Per-method measures and, per predictor, the verdicts (experiments.atlas.measures)."""
  points = collected["points"]
  per_method = {}
  for m in dict.fromkeys([p.method for p in points] + list(collected["init"])):
    runs = collected["init"].get(m, [])
    row: dict[str, Any] = dict(loss0=_mean(r.get("loss0") for r in runs), predicted=_predicted(runs, beta1))
    for key in ("lambda_max", "lambda_min", "preconditioned_lambda_max", "update_sharpness", "block_max"):
      row[key] = _mean(r.get(key) for r in runs)
      row[key + "_bound"] = _mean(r.get(key + "_bound") for r in runs)
    row["block_max_name"] = stiffest_block(runs)
    per_method[m] = row
  return decide(per_method, points, (collected.get("reference") or {}).get("unigram_entropy"))


def _classified(p: M.Point, loss0: Optional[float], unigram_entropy: Optional[float]) -> M.Point:
  """`p` with its outcome class: its record's, else (a record from before `train.eval_at_init`, or atlas.json's)
  `outcomes.classify_final` of its final loss against ℓ₀ (the training loss of the initial parameters, standing in
  for the validation loss at init the record did not keep) and the unigram entropy; None when neither is known."""
  if p.cls is not None or p.outcome == "crashed":
    return p
  if p.outcome == "diverged":
    return dataclasses.replace(p, cls=outcomes.DIVERGED)
  if unigram_entropy is None or loss0 is None:
    return p
  final = p.loss if p.loss is not None else math.nan
  return dataclasses.replace(
      p, cls=outcomes.classify_final(final, init_loss=loss0, unigram_entropy=unigram_entropy).cls
  )


def decide(per_method: dict[str, dict], points: list[M.Point], unigram_entropy: Optional[float]) -> dict:
  """The training grid's measures of each method (`per_method`: its step-0 row, ℓ₀ and the predicted lrs, completed
  here with `runs` per warmup) and the predictors' verdicts; every run read by its outcome class."""
  points = [_classified(p, per_method.get(p.method, {}).get("loss0"), unigram_entropy) for p in points]
  for m, row in per_method.items():
    row["runs"] = {}
    mine = [p for p in points if p.method == m]
    for warmup in sorted({p.warmup for p in mine}):
      w = [p for p in mine if p.warmup == warmup]
      lrs = sorted({p.lr for p in w})
      by_lr = {lr: [p for p in w if p.lr == lr] for lr in lrs}
      stable = {lr: M.cell_stable(ps) for lr, ps in by_lr.items()}
      mean_loss = {lr: _mean(p.loss for p in ps if p.outcome == "finished") for lr, ps in by_lr.items()}
      sens = []
      for s in sorted({p.seed for p in w}):
        per_seed = {p.lr: (p.loss if p.outcome == "finished" else None) for p in w if p.seed == s}
        if row["loss0"] is not None:
          sens.append(M.lr_sensitivity(per_seed, row["loss0"]))
      max_lr = M.max_stable_lr(stable)
      row["runs"][warmup] = dict(
          lrs=lrs,
          mean_loss=[mean_loss[lr] for lr in lrs],
          losses=[[p.loss for p in by_lr[lr]] for lr in lrs],
          outcomes=[[p.outcome for p in by_lr[lr]] for lr in lrs],
          classes=[[p.cls for p in by_lr[lr]] for lr in lrs],
          stable=[stable[lr] for lr in lrs],
          best=min([v for v in mean_loss.values() if v is not None], default=None),
          max_lr=None if max_lr is None else max_lr.value,
          max_lr_censored=None if max_lr is None else max_lr.censored,
          sensitivity=_mean(sens),
      )
    warmups = sorted({p.warmup for p in mine})
    if len(warmups) == 2:
      w0, w1 = row["runs"][warmups[0]], row["runs"][warmups[1]]
      row["warmup_gain"] = M.warmup_gain(w0["best"], w1["best"])
      ratio = w1["max_lr"] / w0["max_lr"] if w0["max_lr"] and w1["max_lr"] else None
      row["warmup_lr_gain_log10"] = math.log10(ratio) if ratio else None
  measured = {
      m: M.MaxLR(r["runs"][0]["max_lr"], r["runs"][0]["max_lr_censored"])
      for m, r in per_method.items()
      if r["runs"].get(0, {}).get("max_lr") is not None
  }
  gains = {m: r.get("warmup_gain") for m, r in per_method.items()}
  decisions = {
      name: M.decide({m: r["predicted"][name] for m, r in per_method.items()}, measured, gains) for name in M.PREDICTORS
  }
  return dict(
      best_loss=M.best_loss(points),
      methods=per_method,
      predictors=decisions,
      unigram_entropy=unigram_entropy,
      margin=outcomes.COLLAPSE_MARGIN,
  )


def remeasure(record: dict, methods: list[str]) -> dict:
  """atlas.json's record (`record`: its `measured`, `reference`) re-decided by the current rules for the methods
  `methods` (the config's, in its order; a stored method the config no longer has, e.g. SkipInit, which is ReZero
  bit for bit, is dropped): the stored per-run final losses and outcomes become Points again, classified by
  `_classified`, and the step-0 rows (ℓ₀, curvature, predicted lrs) are kept as measured."""
  stored = record["measured"]["methods"]
  per_method, points = {}, []
  for m in methods:
    if m not in stored:
      continue
    per_method[m] = {k: v for k, v in stored[m].items() if k not in ("runs", "warmup_gain", "warmup_lr_gain_log10")}
    for warmup, w in stored[m]["runs"].items():
      for lr, losses, outs in zip(w["lrs"], w["losses"], w["outcomes"]):
        points += [M.Point(m, int(float(warmup)), lr, s, o, v) for s, (v, o) in enumerate(zip(losses, outs))]
  return decide(per_method, points, (record.get("reference") or {}).get("unigram_entropy"))
