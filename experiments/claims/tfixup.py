"""Claim 8 (Huang et al. 2020, T-Fixup): without LayerNorm and without warmup, T-Fixup trains where Post-LN without
warmup fails; decided per learning rate by outcome class.

The statement tested, quoted (Huang et al. 2020, abstract): "we propose a new weight initialization scheme with
theoretical justification, that enables training without warmup or layer normalization". Their argument (§3;
docs/science.md §7): Post-LN needs warmup because Adam's early updates are large while the norms' gradients are
unstable; scaling the init with depth (init/schemes.py 'tfixup': Xavier, then the value/output/MLP kernels
×0.67·N^{-1/4} in the encoder, ×(9M)^{-1/4} in the decoder and the embeddings) bounds the update of the whole stack,
so neither the norms nor the warmup are needed. The test here: at a learning rate where Post-LN + Xavier without
warmup fails, T-Fixup (no norm, no warmup) trains.

Measured (configs/claims/tfixup.py: the atlas's 'Post-LN + Xavier' and 'T-Fixup' cells without warmup, the atlas's
lrs, ≥ 3 seeds; experiments/claims/shared/training.py): each run's outcome class, each cell's class (all seeds
alike, else mixed; it fails when collapsed or diverged, trains when trained).

Rules (the atlas's reading of claim 8, moved here; their history: docs/design_log.md):
  reproduced      at some η Post-LN fails and T-Fixup trains, both cells with ≥ `MIN_SEEDS` = 3 seeds;
  not reproduced  Post-LN fails at some η and T-Fixup fails at every η where Post-LN fails, those cells with ≥ 3
                  seeds;
  inconclusive    otherwise, naming the change that decides: Post-LN never fails (extend the lr grid upwards), a
                  deciding cell with fewer than 3 seeds (run more), T-Fixup mixed or undertrained where Post-LN fails
                  (more seeds or more steps), a crashed run, or runs without a class (`train.eval_at_init` off).
"""

from experiments import study
from experiments.claims.shared import training
from experiments.claims.shared.training import MIN_SEEDS, fails, lrs_text, show, trains

POST, TFIXUP = "Post-LN + Xavier", "T-Fixup"  # the arms' labels (configs/atlas.py NAMES)
ARMS = (POST, TFIXUP)
THRESHOLDS = {
    "cells": "a cell (arm, lr) fails when at least half its seeds collapsed or diverged, trains when more than half "
    f"trained, else is mixed (experiments/claims/shared/cells.py); a deciding cell needs ≥ {MIN_SEEDS} seeds",
    "reproduced": "at some η, without warmup, Post-LN + Xavier fails and T-Fixup trains",
    "not reproduced": "Post-LN fails at some η and T-Fixup fails wherever Post-LN does",
    "inconclusive": "Post-LN never fails; a deciding cell mixed, undertrained or with fewer than 3 seeds; a crash; "
    "runs without a class",
}


def measure(results: study.Results) -> dict:
  return training.measure_arms(results, ARMS)


def decide(m: dict) -> tuple[str, str, dict]:
  """(verdict, reason, numbers) of the rule (module docstring) on readable cells."""
  ct, cp = training.cells(m, TFIXUP), training.cells(m, POST)
  failing = sorted(lr for lr in cp if fails(cp, lr))
  where = [lr for lr in failing if trains(ct, lr)]
  numbers = {"lrs T-Fixup trains where Post-LN fails": where, "Post-LN fails at": failing}
  reason = (
      f"without warmup, cells by class{training.reference_text(m)}: T-Fixup [{show(ct)}]; Post-LN + Xavier "
      f"[{show(cp)}]; T-Fixup trains where Post-LN fails at η {lrs_text(where)}"
  )
  return training.rescue(
      cp,
      ct,
      failing,
      where,
      reason,
      numbers,
      never="; Post-LN never fails: extend the lr grid upwards",
      unsettled="; T-Fixup's cells there are mixed or undertrained: more seeds or steps",
      refuted="; T-Fixup fails wherever Post-LN does",
  )


verdict, summary = training.rule(decide)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  headline = "Claim 8 (Huang et al. 2020): does T-Fixup (no LayerNorm) train where Post-LN fails, both without warmup?"
  return training.plot_loss_vs_lr(m, [("without warmup", ARMS)], out_dir, "tfixup.png", headline, settings)


CLAIM = study.Study(
    name="tfixup",
    number=8,
    statement="Huang et al. 2020: T-Fixup, without LayerNorm and without warmup, trains where Post-LN without warmup "
    "fails: at a learning rate where Post-LN + Xavier without warmup collapses or diverges, T-Fixup trains.",
    source="Huang et al. 2020, abstract and §3; docs/science.md §7",
    paper_scale="6+6 to 200+200 layers, d = 512, IWSLT14 / WMT, to convergence",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
