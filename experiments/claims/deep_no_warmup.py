"""Claim 10 (Wang et al. 2022; Liu et al. 2020; Bachlechner et al. 2020): without warmup, DeepNorm and Admin train
where Post-LN at the same depth fails, ReZero where the plain un-normalized residual fails; decided per lr at 2 depths.

The statements, quoted: DeepNorm (Wang et al. 2022, abstract), with which "model updates can be bounded in a stable
way" and "We successfully scale Transformers up to 1,000 layers"; Admin (Liu et al. 2020, abstract), "Admin (Adaptive
model initialization) to stabilize the early stage's training"; ReZero (Bachlechner et al. 2020, §1), "we are the
first to train Transformers over 100 layers without learning rate warmup or LayerNorm". Each states a rescue against
its own baseline at the same depth.

Measured (configs/claims/deep_no_warmup.py: the atlas's cells at two depths N+N, arms '<method> at <N>+<N>', lrs from
where Post-LN starts to fail upwards, 3 fresh seeds; experiments/claims/shared/training.py): each run's outcome class
and each cell's, read by fractions (a cell fails when at least half its seeds collapsed or diverged, trains when more
than half trained: experiments/claims/shared/cells.py cell_class).

Rules (issue 40, stated before the fresh-seed runs; their history: docs/design_log.md):
  a rescue        at a depth and η, the method's cell trains where its reference's cell fails (`REFERENCES`:
                  DeepNorm and Admin against Post-LN + Xavier, ReZero against the plain residual without a norm);
  reproduced      every method has a rescue at the deeper depth, its deciding cells with ≥ `MIN_SEEDS` = 3 seeds;
  not reproduced  a method's reference fails at the deeper depth at some η of the grid, and at every such η the
                  method fails too (cells with ≥ 3 seeds);
  inconclusive    otherwise, naming what decides it: fewer than two depths, a reference that never fails at the
                  deeper depth (larger lrs), mixed or undertrained cells where the reference fails (more seeds or
                  steps), too few seeds, a crash, or runs without a class. Reported, not judged: the same reading at
                  the shallower depth, and each method's lrs lost with depth.
"""

import re

from experiments import study
from experiments.claims.shared import training
from experiments.claims.shared.training import MIN_SEEDS, fails, few_seeds, lrs_text, show, trains

REFERENCES = {"DeepNorm": "Post-LN + Xavier", "Admin": "Post-LN + Xavier", "ReZero": "plain residual"}
METHODS = tuple(REFERENCES)
ARMS = (*METHODS, "Post-LN + Xavier", "plain residual")
LABEL = re.compile(r"^(?P<method>.+) at (?P<n>\d+)\+(?P=n)$")  # an arm: '<method> at <N>+<N>'
THRESHOLDS = {
    "cells": "a cell (arm, lr) fails when at least half its seeds collapsed or diverged, trains when more than half "
    f"trained (analysis/outcomes.py); a deciding cell needs ≥ {MIN_SEEDS} seeds",
    "a rescue": "the method trains at an η where its reference at the same depth fails (DeepNorm, Admin: Post-LN + "
    "Xavier; ReZero: the plain residual without a norm)",
    "reproduced": "every method has a rescue at the deeper depth (12+12 at cpu)",
    "not reproduced": "a method fails at every η where its reference fails at the deeper depth",
    "inconclusive": "fewer than two depths; a reference that never fails at the deeper depth; a deciding cell mixed, "
    "undertrained or with fewer than 3 seeds; a crash; runs without a class",
}


def label(method: str, n: int) -> str:
  return f"{method} at {n}+{n}"


def measure(results: study.Results) -> dict:
  """The runs by arm and lr (experiments/claims/shared/training.py) for every method and reference at each depth the sweep
  ran; `depths`: those N, ascending."""
  found = [LABEL.match(r.arm) for r in results.runs]
  depths = sorted({int(f["n"]) for f in found if f and f["method"] in ARMS})
  out = training.measure_arms(results, [label(x, n) for n in depths for x in ARMS])
  return {**out, "depths": depths}


def _rescues(m: dict, x: str, n: int) -> tuple[list, list, list]:
  """(η where the reference fails, η where x trains there, η where x fails there) at depth n."""
  c, ref = training.cells(m, label(x, n)), training.cells(m, label(REFERENCES[x], n))
  bad = sorted(lr for lr in ref if fails(ref, lr))
  return bad, [lr for lr in bad if trains(c, lr)], [lr for lr in bad if fails(c, lr)]


def decide(m: dict) -> tuple[str, str, dict]:
  """(verdict, reason, numbers) of the rule (module docstring) on readable cells."""
  depths = m["depths"]
  absent = [label(x, n) for n in depths for x in ARMS if label(x, n) not in m["arms"]]
  if absent:  # a record measured before the references were in the design
    return study.INCONCLUSIVE, f"no runs of {absent}: the design (configs/claims/deep_no_warmup.py) runs them", {}
  numbers: dict = {}
  parts = []
  for n in depths:
    text = []
    for x in METHODS:
      bad, saved, lost = _rescues(m, x, n)
      numbers[f"{x} at {n}+{n}: trains where {REFERENCES[x]} fails at"] = saved
      numbers[f"{REFERENCES[x]} at {n}+{n} fails at"] = bad
      text.append(f"{x} [{show(training.cells(m, label(x, n)))}] against {REFERENCES[x]} "
                  f"[{show(training.cells(m, label(REFERENCES[x], n)))}]: rescues at η {lrs_text(saved)}")  # fmt: skip
    parts.append(f"at {n}+{n}: " + "; ".join(text))
  if len(depths) >= 2:
    for x in METHODS:
      shallow, deep = training.cells(m, label(x, depths[0])), training.cells(m, label(x, depths[-1]))
      lost = sorted(lr for lr in shallow if trains(shallow, lr) and not trains(deep, lr))
      numbers[f"{x}: lrs lost from {depths[0]}+{depths[0]} to {depths[-1]}+{depths[-1]}"] = lost
  reason = f"without warmup, cells by class{training.reference_text(m)}, " + "; ".join(parts)
  if len(depths) < 2:
    return study.INCONCLUSIVE, reason + "; one depth: the statement is about depth, run 6+6 and 12+12", numbers
  n = depths[-1]
  never, refuted, pending, few = [], [], [], []
  for x in METHODS:
    bad, saved, lost = _rescues(m, x, n)
    cs = [training.cells(m, label(x, n)), training.cells(m, label(REFERENCES[x], n))]
    if not bad:
      never.append(f"{REFERENCES[x]} (against {x})")
    elif saved and not few_seeds(cs, saved[:1]):
      continue
    elif saved:
      few += saved[:1]
    elif len(lost) == len(bad) and not few_seeds(cs, bad):
      refuted.append(x)
    else:
      pending.append(x)
  at = f" at {n}+{n}"
  if refuted:
    return study.NOT_REPRODUCED, reason + f"; fails wherever its reference fails{at}: {refuted}", numbers
  if never:
    return study.INCONCLUSIVE, reason + f"; never fails{at}: {never}: extend the lr grid upwards", numbers
  if few:
    return study.INCONCLUSIVE, reason + training.too_few(sorted(set(few)), "deciding cells"), numbers
  if pending:
    why = f"; mixed or undertrained where the reference fails{at}: {pending}: more seeds or steps"
    return study.INCONCLUSIVE, reason + why, numbers
  return study.REPRODUCED, reason, numbers


verdict, summary = training.rule(decide)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  depths = m.get("depths") or []
  panels = [(f"{n}+{n} layers", [label(x, n) for x in ARMS]) for n in depths]
  names = {label(x, n): x for n in depths for x in ARMS}  # one colour per method in every panel
  headline = "Claim 10: do DeepNorm and Admin train where Post-LN fails, ReZero where the plain residual fails?"
  return training.plot_loss_vs_lr(m, panels, out_dir, "deep_no_warmup.png", headline, settings, names)


CLAIM = study.Study(
    name="deep_no_warmup",
    number=10,
    statement="Without warmup, at depth, DeepNorm and Admin train at a learning rate where Post-LN of the same depth "
    "fails, and ReZero where the plain residual without a norm fails.",
    source="Wang et al. 2022, abstract; Liu et al. 2020, abstract; Bachlechner et al. 2020, abstract and §1; "
    "docs/science.md §6, §8",
    paper_scale="12–1000 layers, d ≥ 512, WMT / IWSLT",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
