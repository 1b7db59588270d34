"""Claim 10: ReZero, scheduled α, DeepNorm and Admin train without warmup at depth (Bachlechner et al. 2020; Su 2021a
§6; Wang et al. 2022; Liu et al. 2020); decided per learning rate by outcome class at two depths, against Pre-LN.

The statements, quoted: ReZero (Bachlechner et al. 2020), each residual branch gated by "a single zero-initialized
parameter" (abstract), with which "we are the first to train Transformers over 100 layers without learning rate warmup
or LayerNorm" (§1); DeepNorm (Wang et al. 2022, abstract), a residual rescaling "accompanying with theoretically
derived initialization" with which "model updates can be bounded in a stable way" and "We successfully scale
Transformers up to 1,000 layers"; Admin (Liu et al. 2020, abstract), "Admin (Adaptive model initialization) to
stabilize the early stage's training"; the scheduled α (Su 2021a §6, a blog post in Chinese, paraphrased):
ReZero's x + α·F with α raised from 0 to 1 on a schedule instead of learned. Each keeps the residual branches from
dominating the stream early, the instability warmup otherwise guards against (docs/science.md §6, §8). The reading
tested is the strong one this project's claim states: each trains *without* warmup, and keeps doing so as the model
deepens (ReZero says so; the others do not all drop warmup: Liu et al.'s IWSLT14 recipe warms up for 6000 updates).

Measured (configs/claims/deep_no_warmup.py: the atlas's method cells at two depths N+N, the shallower the atlas's
6+6 and the deeper 12+12 at cpu and paper (1+1 and 2+2 at tiny), arms labelled '<method> at <N>+<N>', the atlas's
lrs, ≥ 3 seeds; experiments/claims/training.py): each run's outcome class and each cell's (all seeds alike, else
mixed; it fails when collapsed or diverged, trains when trained). Pre-LN without warmup is the reference: the lrs
where it trains at a depth are those at which a model of that depth can train in this run length at all.

Rules (the atlas's reading of claim 10 since 2026-11-25, "at every η where Pre-LN trains, does each method train?",
experiments/atlas/claims.py, moved here and now applied at each of two depths):
  at each depth   each method trains at every η where Pre-LN trains at that depth. At the deeper depth (12+12) this
                  is the claim itself; at 6+6 it must hold as well: a method that fails without warmup at the
                  papers' base depth does not train without warmup at any depth in the sense claimed;
  reproduced      it holds at both depths, every deciding cell (Pre-LN's trained cells and the methods' cells at
                  those η) with ≥ `MIN_SEEDS` = 3 seeds;
  not reproduced  at some depth a method fails (every seed collapsed, or every seed diverged) at an η where Pre-LN
                  trains, both cells with ≥ 3 seeds (the reason names the method, depth and η);
  inconclusive    otherwise, naming what decides it: fewer than two depths (run 6+6 and 12+12), Pre-LN trains at no
                  η at a depth (no reference: smaller lrs or more steps), a deciding cell with fewer than 3 seeds
                  (run more), a method mixed or undertrained where Pre-LN trains (more seeds or steps), a crashed
                  run, or runs without a class (`train.eval_at_init` off).
Reported, not judged: each method's lrs lost with depth (trained at the shallower depth, not at the deeper).
"""

import re

from experiments import study
from experiments.claims import training
from experiments.claims.training import MIN_SEEDS, fails, few_seeds, lrs_text, show, trains

METHODS = ("ReZero", "scheduled α", "DeepNorm", "Admin")  # configs/atlas.py NAMES
PRE = "Pre-LN"
LABEL = re.compile(r"^(?P<method>.+) at (?P<n>\d+)\+(?P=n)$")  # an arm: '<method> at <N>+<N>'
THRESHOLDS = {
    "cells": "a cell (arm, lr) fails when all its seeds collapsed, or all diverged, and trains when all trained "
    f"(analysis/outcomes.py); a deciding cell needs ≥ {MIN_SEEDS} seeds",
    "at each depth": "ReZero, scheduled α, DeepNorm and Admin each train, without warmup, at every η where Pre-LN "
    "without warmup trains at that depth",
    "reproduced": "it holds at both depths (6+6 and 12+12 at cpu)",
    "not reproduced": "at some depth a method fails at an η where Pre-LN trains",
    "inconclusive": "fewer than two depths; Pre-LN trains nowhere at a depth; a deciding cell mixed, undertrained or "
    "with fewer than 3 seeds; a crash; runs without a class",
}


def label(method: str, n: int) -> str:
  return f"{method} at {n}+{n}"


def measure(results: study.Results) -> dict:
  """The runs by arm and lr (experiments/claims/training.py) for every method and Pre-LN at each depth the sweep ran;
  `depths`: those N, ascending."""
  found = [LABEL.match(r.arm) for r in results.runs]
  depths = sorted({int(f["n"]) for f in found if f and f["method"] in (*METHODS, PRE)})
  out = training.measure_arms(results, [label(x, n) for n in depths for x in (*METHODS, PRE)])
  return {**out, "depths": depths}


def decide(m: dict) -> tuple[str, str, dict]:
  """(verdict, reason, numbers) of the rule (module docstring) on readable cells."""
  depths = m["depths"]
  numbers: dict = {}
  parts, failures, pending, deciding = [], [], [], []
  for n in depths:
    pre = training.cells(m, label(PRE, n))
    ref = sorted(lr for lr in pre if trains(pre, lr))
    numbers[f"Pre-LN at {n}+{n} trains at"] = ref
    text = [f"Pre-LN trains at η {lrs_text(ref)}"]
    for x in METHODS:
      c = training.cells(m, label(x, n))
      short = [lr for lr in ref if not trains(c, lr)]
      numbers[f"{x} at {n}+{n}: Pre-LN's lrs it does not train at"] = short
      failures += [(x, n, lr) for lr in short if fails(c, lr) and not few_seeds([c, pre], [lr])]
      pending += [(x, n, lr) for lr in short if not fails(c, lr)]
      deciding += [(lr, few_seeds([c, pre], [lr])) for lr in ref]
      text.append(f"{x} [{show(c)}]")
    parts.append(f"at {n}+{n}: " + "; ".join(text))
  if len(depths) >= 2:
    for x in METHODS:
      shallow, deep = training.cells(m, label(x, depths[0])), training.cells(m, label(x, depths[-1]))
      lost = sorted(lr for lr in shallow if trains(shallow, lr) and not trains(deep, lr))
      numbers[f"{x}: lrs lost from {depths[0]}+{depths[0]} to {depths[-1]}+{depths[-1]}"] = lost
  reason = f"without warmup, cells by class{training.reference_text(m)}, " + "; ".join(parts)
  name = lambda xs: ", ".join(f"{x} at {n}+{n} η {lr:g}" for x, n, lr in xs)
  if len(depths) < 2:
    return study.INCONCLUSIVE, reason + "; one depth: the statement is about depth, run 6+6 and 12+12", numbers
  no_ref = [n for n in depths if not numbers[f"Pre-LN at {n}+{n} trains at"]]
  if no_ref:
    where = ", ".join(f"{n}+{n}" for n in no_ref)
    return study.INCONCLUSIVE, reason + f"; Pre-LN trains at no η at {where}: smaller lrs or more steps", numbers
  if failures:
    return study.NOT_REPRODUCED, reason + f"; fails where Pre-LN trains: {name(failures)}", numbers
  few = sorted({lr for lr, f in deciding if f})
  if few:
    return study.INCONCLUSIVE, reason + training.too_few(few, "deciding cells"), numbers
  if pending:
    why = f"; mixed or undertrained where Pre-LN trains: {name(pending)}: more seeds or steps"
    return study.INCONCLUSIVE, reason + why, numbers
  return study.REPRODUCED, reason, numbers


verdict, summary = training.rule(decide)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  panels = [(f"{n}+{n} layers", [label(x, n) for x in (*METHODS, PRE)]) for n in m["depths"]]
  names = {label(x, n): x for n in m["depths"] for x in (*METHODS, PRE)}  # one colour per method in every panel
  headline = "Claim 10: do ReZero, scheduled α, DeepNorm and Admin train without warmup where Pre-LN does, at depth?"
  return training.plot_loss_vs_lr(m, panels, out_dir, "deep_no_warmup.png", headline, settings, names)


CLAIM = study.Study(
    name="deep_no_warmup",
    number=10,
    statement="ReZero, scheduled α, DeepNorm and Admin train without warmup at depth: at 6+6 and at 12+12 layers, "
    "each trains at every learning rate where Pre-LN without warmup trains.",
    source="Bachlechner et al. 2020; Su 2021a §6; Wang et al. 2022; Liu et al. 2020; docs/science.md §6, §8",
    paper_scale="12–1000 layers, d ≥ 512, WMT / IWSLT",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
