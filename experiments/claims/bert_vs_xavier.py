"""Claim 9 (Su 2021b): in a Post-LN model BERT's 0.02 init trains without warmup where Xavier's does not; decided per
learning rate by outcome class, with the init scale separated from BERT's embedding setup.

The statement tested (Su 2021b, "Why is BERT's initial standard deviation 0.02?", a blog post in Chinese; its argument
in docs/science.md §6 and §8, paraphrased): BERT's std 0.02 (0.0176 realized after the 2σ truncation) is below
Xavier's d^{-1/2} (0.036 at d = 768), so each Post-LN block x_{l+1} = LN(x_l + F_l(x_l)) starts close to the
identity, the input x_0 is not washed out through the stack, and the early updates do not need the small steps warmup
gives. So: at a learning rate where Post-LN with Xavier's init fails without warmup, the same model with the 0.02
init trains.

The arms (configs/claims/bert_vs_xavier.py), all Post-LN without warmup, are the 2 × 2 of embeddings × init:
                         Xavier                                       0.02
  this project's         'Post-LN + Xavier' (X)                       'Post-LN + 0.02 (this project's embeddings)' (S)
  BERT's                 'Post-LN + Xavier (BERT's embeddings)' (E)   'Post-LN + BERT 0.02' (B)
E against B, the scale alone in BERT's own setting, decides; X against S, X against E and X against B are reported
(why these arms: docs/design_log.md).

Rules (stated before the cpu run; cells read as claim 6's, experiments/claims/shared/training.py):
  0.02 rescues at η   E fails at η (every seed collapsed, or every seed diverged) and B trains at η;
  reproduced      a rescued η whose two cells have ≥ `MIN_SEEDS` = 3 seeds;
  not reproduced  E fails at some η and B fails at every η where E fails, those cells with ≥ 3 seeds;
  inconclusive    otherwise, naming what decides it: E never fails on the grid (extend it upwards: with BERT's
                  embeddings Xavier needs no warmup here, so the scale has nothing to rescue), B mixed or
                  undertrained where E fails (more seeds or steps), fewer than 3 seeds, a crash, runs without a class.
"""

from experiments import study
from experiments.claims.shared import training
from experiments.claims.shared.training import MIN_SEEDS, fails, lrs_text, show, trains

XAVIER = "Post-LN + Xavier"
BERT = "Post-LN + BERT 0.02"
XAVIER_BERT_EMBEDDINGS = "Post-LN + Xavier (BERT's embeddings)"
SCALE_PROJECT_EMBEDDINGS = "Post-LN + 0.02 (this project's embeddings)"
ARMS = (XAVIER, SCALE_PROJECT_EMBEDDINGS, XAVIER_BERT_EMBEDDINGS, BERT)
THRESHOLDS = {
    "cells": "a cell (arm, lr) fails when at least half its seeds collapsed or diverged, trains when more than half "
    f"trained, else is mixed (experiments/claims/shared/cells.py); a deciding cell needs ≥ {MIN_SEEDS} seeds",
    "0.02 rescues at η": "with BERT's embeddings, Xavier fails at η and the 0.02 init (BERT's recipe) trains at η",
    "reproduced": "a rescued η",
    "not reproduced": "with BERT's embeddings Xavier fails at some η and the 0.02 init fails wherever Xavier does",
    "inconclusive": "Xavier with BERT's embeddings never fails; a deciding cell mixed, undertrained or with fewer "
    "than 3 seeds; a crash; runs without a class",
}


def measure(results: study.Results) -> dict:
  return training.measure_arms(results, ARMS)


def _rescues(bad: training.Cells, good: training.Cells) -> list[float]:
  return sorted(lr for lr in bad if fails(bad, lr) and trains(good, lr))


def decide(m: dict) -> tuple[str, str, dict]:
  """(verdict, reason, numbers) of the rule (module docstring) on readable cells."""
  x, s, e, b = (training.cells(m, a) for a in (XAVIER, SCALE_PROJECT_EMBEDDINGS, XAVIER_BERT_EMBEDDINGS, BERT))
  failing = sorted(lr for lr in e if fails(e, lr))
  rescued, carried, embeddings, recipe = _rescues(e, b), _rescues(x, s), _rescues(x, e), _rescues(x, b)
  numbers = {
      "0.02 rescues Xavier (BERT's embeddings) at": rescued,
      "Xavier (BERT's embeddings) fails at": failing,
      "0.02 rescues Xavier (this project's embeddings) at": carried,
      "BERT's embeddings rescue Xavier at": embeddings,
      "BERT's recipe rescues Post-LN + Xavier at": recipe,
      "0.02 fails where Xavier trains (BERT's embeddings) at": sorted(lr for lr in e if trains(e, lr) and fails(b, lr)),
  }
  reason = (
      f"without warmup, cells by class{training.reference_text(m)}: with BERT's embeddings, Xavier [{show(e)}] and "
      f"0.02 [{show(b)}]; with this project's, Xavier [{show(x)}] and 0.02 [{show(s)}]. The 0.02 scale rescues "
      f"Xavier at η {lrs_text(rescued)} with BERT's embeddings (deciding), at {lrs_text(carried)} with this "
      f"project's; BERT's embeddings alone rescue Xavier at η {lrs_text(embeddings)}, BERT's recipe at "
      f"{lrs_text(recipe)}"
  )
  return training.rescue(
      e,
      b,
      failing,
      rescued,
      reason,
      numbers,
      never="; Xavier with BERT's embeddings never fails on this grid, so the 0.02 scale has nothing to rescue: "
      "extend the lr grid upwards",
      unsettled="; the 0.02 cells there are mixed or undertrained: more seeds or steps",
      refuted="; with BERT's embeddings the 0.02 init fails wherever Xavier does",
  )


verdict, summary = training.rule(decide)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  panels = [
      ("(a) BERT's embeddings: Xavier vs 0.02 (deciding)", (XAVIER_BERT_EMBEDDINGS, BERT)),
      ("(b) this project's embeddings: Xavier vs 0.02", (XAVIER, SCALE_PROJECT_EMBEDDINGS)),
  ]
  headline = "Claim 9 (Su 2021b): does BERT's 0.02 init train Post-LN without warmup where Xavier's fails?"
  return training.plot_loss_vs_lr(m, panels, out_dir, "bert_vs_xavier.png", headline, settings)


CLAIM = study.Study(
    name="bert_vs_xavier",
    number=9,
    statement="Su 2021b: in a Post-LN model BERT's 0.02 init trains without warmup where Xavier's does not: with "
    "BERT's embedding setup held fixed, at a learning rate where Xavier's init fails (collapses or diverges) without "
    "warmup, the 0.02 init trains.",
    source="Su 2021b; docs/science.md §6, §8",
    paper_scale="BERT-base (12 layers, d = 768), pre-training",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
