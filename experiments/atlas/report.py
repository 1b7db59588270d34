"""reports/ATLAS.md: the atlas's tables, figures, predictions and verdicts, from a finished or partial atlas workdir.

Contract: `write(config, workdir, out, command=...)` collects and measures (experiments.atlas.collect), draws the
figures into `<out>/atlas/`, writes `<out>/atlas/atlas.json` (every number) and `<out>/ATLAS.md`: status (runs done
of expected; the missing cells named), the scale beside the papers', the rules and the predictions as stated before
the runs (experiments.atlas.measures), the verdict per predictor, the per-method table, the Post-LN-with-warmup vs
Pre-LN training-length check, the figures, the axis parts' sections (trace, width, depth, transfer:
experiments.atlas.axis_report), provenance and the commands to resume and to rerun at paper scale. Returns the
measured dict (its `axes`: the axis parts', also in atlas.json).
"""

import json
import os
from typing import Any, Optional

import ml_collections
from etils import epath

from experiments import provenance as provenance_lib
from experiments import report as sweep_report
from experiments.atlas import axis_report, figures
from experiments.atlas import cells as cells_lib
from experiments.atlas import collect as collect_lib
from experiments.atlas import length as length_lib
from experiments.atlas import measures as M
from experiments.atlas.cells import LR_KEY, WARMUP_KEY

CLOSE_NATS = 0.2  # training length check: best Post-LN with warmup within this of the best Pre-LN
PAPERS = """| source | models | data | warmup / lr |
|---|---|---|---|
| Xiong et al. 2020 (Fig. 2) | Post-LN vs Pre-LN, 6+6, d 512 | IWSLT14 De→En | Post-LN needs warmup (4000 steps) |
| Liu et al. 2020 (Admin) | 6+6 to 60+12 layers | WMT14 En→De, En→Fr; IWSLT14 | with warmup |
| Huang et al. 2020 (T-Fixup) | no LayerNorm, shallow to very deep | IWSLT14 De→En, WMT17 En→De | no warmup |
| Wang et al. 2022 (DeepNet) | up to 1000 layers | WMT17 En→De, OPUS-100 | with warmup |
| Wortsman et al. 2023 | small decoder-only LMs, grown to ~1B parameters | C4 | lr sweeps over orders of magnitude |"""


def _fmt(x: Any, spec: str = ".3g") -> str:
  return format(x, spec) if sweep_report.finite(x) else "—"


def _lr(w: Optional[dict]) -> str:
  if not w or w.get("max_lr") is None:
    return "—"
  return {"above": "≥ ", "below": "< "}.get(w["max_lr_censored"], "") + _fmt(w["max_lr"])


def _settings(config: ml_collections.ConfigDict) -> str:
  return sweep_report.fixed_settings(
      config, ["model.norm_position", "init.scheme", LR_KEY, WARMUP_KEY], config.sweep.seeds
  )


def _check_length(m: dict) -> str:
  post = m["methods"].get("Post-LN + Xavier", {})
  pre = m["methods"].get("Pre-LN", {})
  warm = [w for k, w in post.get("runs", {}).items() if k != 0]
  best_post = warm[0]["best"] if warm else None
  best_pre = min([w["best"] for w in pre.get("runs", {}).values() if w["best"] is not None], default=None)
  if best_post is None or best_pre is None:
    return "not yet measurable (Post-LN with warmup or Pre-LN has no finished run)."
  gap = best_post - best_pre
  verdict = (
      f"within {CLOSE_NATS} nats"
      if gap <= CLOSE_NATS
      else f"NOT within {CLOSE_NATS} nats: the runs are too short to compare the methods near convergence; read the "
      "verdicts with that in mind"
  )
  return f"best Post-LN + Xavier with warmup {best_post:.3f} vs best Pre-LN {best_pre:.3f}: gap {gap:+.3f} ({verdict})."


def _method_table(m: dict) -> str:
  lines = [
      "| method | ℓ₀ | best loss (no wu / wu) | max stable lr (no wu / wu) | LR sensitivity (no wu / wu) | warmup gain "
      "(nats) | λ_max(H) ± | λ_min(H) ± | λ_max(P⁻¹H) | sharpness along u | stiffest block |",
      "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for method, r in m["methods"].items():
    ws = [r["runs"][k] for k in sorted(r["runs"])]
    w0, w1 = (ws[0] if ws else None), (ws[1] if len(ws) > 1 else None)
    lines.append(
        f"| {method} | {_fmt(r['loss0'])} | {_fmt((w0 or {}).get('best'))} / {_fmt((w1 or {}).get('best'))} | "
        f"{_lr(w0)} / {_lr(w1)} | {_fmt((w0 or {}).get('sensitivity'))} / {_fmt((w1 or {}).get('sensitivity'))} | "
        f"{_fmt(r.get('warmup_gain'))} | {_fmt(r['lambda_max'])} ± {_fmt(r['lambda_max_bound'], '.1g')} | "
        f"{_fmt(r['lambda_min'])} ± {_fmt(r['lambda_min_bound'], '.1g')} | {_fmt(r['preconditioned_lambda_max'])} | "
        f"{_fmt(r['update_sharpness'])} | {r['block_max_name'] or '—'} {_fmt(r['block_max'])} |"
    )
  return "\n".join(lines)


def _predictor_table(m: dict) -> str:
  names = list(M.PREDICTORS)
  lines = [
      "| method | measured max lr (no warmup) | " + " | ".join(f"{M.PREDICTORS[n]} (factor)" for n in names) + " |",
      "|---|---|" + "---|" * len(names),
  ]
  for method, r in m["methods"].items():
    cells = []
    for n in names:
      f = m["predictors"][n]["factors"].get(method)
      cells.append(f"{_fmt(r['predicted'][n])} ({_fmt(f, '.2g')}×)" if f is not None else _fmt(r["predicted"][n]))
    lines.append(f"| {method} | {_lr(r['runs'].get(0))} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _interval(d: dict, key: str, spec: str) -> str:
  v = d.get(key + "_interval")
  if v is None:
    return _fmt(d.get(key), spec)
  return f"{_fmt(v[0], spec)} [{_fmt(v[1], spec)}, {_fmt(v[2], spec)}]"


def _verdict_table(m: dict) -> str:
  lines = [
      "| predictor | fraction within 2× [95%] | ρ with max lr [95%] (n) | ρ with warmup gain [95%] (n) | "
      + " | ".join(M.PREDICTIONS)
      + " |",
      "|---|---|---|---|" + "---|" * len(M.PREDICTIONS),
  ]
  for n, d in m["predictors"].items():
    lines.append(
        f"| {M.PREDICTORS[n]} | {_interval(d, 'fraction_within', '.0%')} | {_interval(d, 'rho_lr', '.2f')} ({d['n_lr']}) | "
        f"{_interval(d, 'rho_gain', '.2f')} ({d['n_gain']}) | "
        + " | ".join(f"**{d['verdicts'][p]}**" for p in M.PREDICTIONS)
        + " |"
    )
  return "\n".join(lines)


def write(
    config: ml_collections.ConfigDict, workdir: str, out: str, *, command: str = "", redecide: bool = False
) -> dict:
  """Writes `<out>/ATLAS.md`, `<out>/atlas/` (figures, atlas.json); returns the measured dict (module docstring).

  With `redecide`, nothing is read from `workdir`: `<out>/atlas/atlas.json`'s stored measurements are re-decided by
  the current rules (experiments.atlas.collect.remeasure; the axis parts' and the length probe's as stored), for
  when a rule changed and the runs are gone; the record keeps the measurement's provenance and adds `redecided_by`.
  """
  fig_dir = _mkdir(os.path.join(out, "atlas"))
  settings = _settings(config)
  methods = [m for m, _ in cells_lib.init_cells(config)]
  if redecide:
    stored = json.loads(epath.Path(fig_dir, "atlas.json").read_text(encoding="utf-8"))
    m = collect_lib.remeasure(stored, methods)
    reference, probe, missing_runs = stored["reference"], stored["length"], stored["missing"]
    prov, redecided_by = stored["provenance"], provenance_lib.provenance()
    settings = stored.get("settings", settings)
    done = sum(len(v) for r in m["methods"].values() for w in r["runs"].values() for v in w["losses"])
    paths = figures.draw(m, fig_dir, settings) if done else []
    axis_text, m["axes"] = axis_report.sections(config, workdir, fig_dir, stored=stored["measured"].get("axes", {}))
  else:
    collected = collect_lib.collect(config, workdir)
    m = collect_lib.measure(collected, float(config.optim.b1))
    reference, probe, missing_runs = collected["reference"], length_lib.measure(config, workdir), collected["missing"]
    prov, redecided_by, done = provenance_lib.provenance(), None, len(collected["points"])
    paths = figures.draw(m, fig_dir, settings) if collected["points"] else []
    axis_text, m["axes"] = axis_report.sections(config, workdir, fig_dir)
  if probe is not None:
    paths.append(length_lib.figure(probe, fig_dir))
  expected = len(cells_lib.training_cells(cells_lib.train_config(config))) * config.sweep.seeds
  missing = sorted({cell for cell, _ in missing_runs})
  record = dict(measured=m, reference=reference, length=probe, missing=missing_runs, provenance=prov)
  if redecided_by is not None:
    record["redecided_by"] = redecided_by
  epath.Path(fig_dir, "atlas.json").write_text(json.dumps(dict(record, settings=settings), indent=1))
  redecided = (
      f"\nRe-decided from atlas.json's measurements by the rules below at commit {redecided_by.get('git_commit')} "
      f"(dirty: {redecided_by.get('git_dirty')}); the runs were measured at commit {prov.get('git_commit')}.\n"
      if redecided_by
      else ""
  )
  scale = config.claim.scale
  grid = cells_lib.training_cells(cells_lib.train_config(config))
  status = (
      "complete"
      if not missing and done >= expected
      else f"PARTIAL: {done} of {expected} runs; {len(missing)} cell(s) missing"
  )
  text = f"""# Does curvature at step 0 predict the need for warmup? The atlas (issue 15)

Status: **{status}**. Scale `{scale}`: {settings}; warmup steps
{sorted({c.warmup for c in grid})}; peak lrs {sorted({c.lr for c in grid})}. Axis parts (runs done of expected):
{', '.join(f"{p} {a['done']}/{a['expected']}" for p, a in m['axes'].items()) or 'none'}.

## Rules and predictions (stated before the runs; experiments/atlas/measures.py)

* Each run is classified (analysis/outcomes.py): diverged (non-finite, or a validation loss above the loss at init),
  collapsed (final loss within δ = {_fmt(m['margin'])} nats of the targets' unigram entropy H = {_fmt(m['unigram_entropy'], '.4g')}),
  undertrained (still above H + δ) or trained (below H − δ). A cell (method, warmup, lr) is unstable if any run
  diverged or collapsed, stable if every run trained, else undetermined. Largest stable lr: the largest stable grid
  lr ("≥": the grid's largest lr was stable; "<": none was, below the smallest unstable lr). (The first reading of
  these runs called a run unstable 1 nat above the atlas's best run; it was replaced by the classes on 2026-11-26,
  issue 24, and the runs re-decided: experiments/atlas/measures.py.)
* LR sensitivity (Wortsman et al. 2023, §2.2): E_η[min(ℓ(η), ℓ₀) − min_η ℓ(η)] over the grid, per seed, then the mean;
  ℓ₀ the loss at init (the at-init run's step-1 training loss).
* Warmup gain: best loss without warmup − best with (nats).
* Predictors (step 0, one per method × seed, geometric mean over seeds): {', '.join(M.PREDICTORS.values())}.
* Predictions, each per predictor: {'; '.join(f'**{k}**: {v}' for k, v in M.PREDICTIONS.items())}. Each reads a
  95% interval (the fraction's exact binomial interval over the methods, ρ's Fisher-z interval): it holds when the
  whole interval meets its threshold, fails when none of it does, and is inconclusive when the interval straddles
  it (more methods decide) or fewer than {M.MIN_METHODS} methods have both numbers.

## Verdicts
{redecided}
{_verdict_table(m)}

Training-length check: {_check_length(m)} {length_lib.markdown(probe, config.train.num_steps)}

## Claims on the atlas's cells

Claims 8, 9 and 10 of reports/REPRODUCTION.md are studies over this grid's cells (configs/claims/_atlas_cells.py:
`--config.sweep.cells_dir=<workdir>/train` reads and completes these runs); their verdicts are in their records,
reports/reproduction/<claim>/claim.json, not here.

## Per method

{_method_table(m)}

## Predicted vs measured largest stable lr (no warmup)

{_predictor_table(m)}

## Figures

{chr(10).join(f'![{os.path.basename(p)}](atlas/{os.path.basename(p)})' for p in paths) or '(no finished run yet)'}

{axis_text}
## Scale, next to the papers'

This atlas: {settings}. The papers it tests:

{PAPERS}

The step-0 curvature is of one batch of `analysis.batch_size` sequences ({config.analysis.batch_size}),
{config.analysis.lanczos_steps} Lanczos steps ({config.analysis.block_lanczos_steps} per block), in
{config.analysis.dtype}; bounds are Lanczos residual norms.

## Missing cells

{chr(10).join(f'* `{c}`' for c in missing) or 'none'}

## Provenance and commands

Commit {prov.get('git_commit')} (dirty: {prov.get('git_dirty')}); every number in
`atlas/atlas.json`; each part's results.jsonl and each run's config.json, metrics.jsonl and sweep_record.json
under the workdir.

    {command or f'python main.py --config=configs/atlas.py:{scale} --workdir=<workdir>'}
        # runs or resumes the atlas (rerunning skips every finished run; --config.atlas.parts=width,depth: those only)
    python main.py --config=configs/atlas.py:paper --config.data.dir=<Multi30k folder> \\
        --workdir=runs/atlas_paper --config.atlas.out=reports/paper   # the papers' sizes, on an accelerator
"""
  epath.Path(out).mkdir(parents=True, exist_ok=True)
  epath.Path(out, "ATLAS.md").write_text(text)
  return m


def _mkdir(path: str) -> str:
  epath.Path(path).mkdir(parents=True, exist_ok=True)
  return path
