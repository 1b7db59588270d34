"""A training run's outcome, classified once by a rule stated before any run: diverged, collapsed, undertrained or
trained.

A reviewer reads a study's runs by class, never off a raw final loss (a run that ended at 9,000 nats did not reach
"a loss of 9,000": it diverged). The rule, fixed here before the runs it classifies:

  diverged   a non-finite loss or gradient (the loop stopped the run: status `diverged`), a non-finite validation
             loss, or a validation loss above the validation loss at init (`init_loss`, the step-0 evaluation:
             `train.eval_at_init`) at any evaluation after step 0;
  collapsed  not diverged, and the final validation loss sits at the unigram model's: within δ of H, the
             cross-entropy on the evaluated targets of the training targets' unigram distribution (nats per token;
             padding excluded, EOS included; add-one smoothed; `train.data.Data.target_unigram_entropy`, written by
             the loop to the run's data_stats.json), the loss of the best model that ignores its input: the plateau
             Post-LN reaches without warmup (Liu et al. 2020 §3.1, Fig. 1);
  undertrained  not diverged, and the final validation loss is still above H + δ: the run has not reached even the
             unigram model's loss at its horizon. Not a failure of stability, and not a success: a verdict that
             needs a run to train or to fail reads it as neither;
  trained    the final validation loss is below H − δ.

δ = COLLAPSE_MARGIN = 0.1 nats, the claims' resolution of a loss difference, small against what the source buys
(docs/design_log.md). Where a record kept only the final loss, `classify_final` applies the same rule at that one
evaluation.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Optional

DIVERGED, COLLAPSED, UNDERTRAINED, TRAINED = "diverged", "collapsed", "undertrained", "trained"
CLASSES = (DIVERGED, COLLAPSED, UNDERTRAINED, TRAINED)
STABLE, UNSTABLE = "stable", "unstable"  # a run's early outcome (`early_class`)
COLLAPSE_MARGIN = 0.1  # δ in nats (module docstring)


@dataclasses.dataclass(frozen=True)
class Outcome:
  """A run's class and the numbers that decided it, in words."""

  cls: str
  reason: str

  def __post_init__(self):
    if self.cls not in (*CLASSES, STABLE, UNSTABLE):
      raise ValueError(f"outcome class {self.cls!r} is not one of {[*CLASSES, STABLE, UNSTABLE]}")


def classify(
    evals: Sequence[tuple[int, float]],
    *,
    init_loss: float,
    unigram_entropy: float,
    stopped_nonfinite: bool = False,
    margin: float = COLLAPSE_MARGIN,
) -> Outcome:
  """The class of one run (module docstring) from its validation losses `evals` = [(step, loss), ...].

  `init_loss` is the validation loss at step 0 (it may be in `evals` too); `stopped_nonfinite` says the loop stopped
  the run on a non-finite loss or gradient. ValueError if the run has no evaluation after step 0 to read.
  """
  if not math.isfinite(init_loss):
    raise ValueError(f"init_loss={init_loss}: the loss at init must be finite to classify against it")
  if stopped_nonfinite:
    return Outcome(DIVERGED, "a non-finite loss or gradient stopped the run")
  later = sorted((int(s), float(v)) for s, v in evals if s > 0)
  if not later:
    raise ValueError("no validation loss after step 0: nothing to classify (evaluate at least at the end)")
  for step, loss in later:
    if not math.isfinite(loss):
      return Outcome(DIVERGED, f"validation loss {loss} at step {step}")
    if loss > init_loss:
      return Outcome(DIVERGED, f"validation loss {loss:.4g} at step {step} above the loss at init {init_loss:.4g}")
  step, final = later[-1]
  return classify_final(final, init_loss=init_loss, unigram_entropy=unigram_entropy, margin=margin, step=step)


def classify_final(
    final: float,
    *,
    init_loss: float,
    unigram_entropy: float,
    margin: float = COLLAPSE_MARGIN,
    step: Optional[int] = None,
) -> Outcome:
  """The class from the final validation loss alone (a record that kept no curve): the rule above at one evaluation."""
  at = f" (step {step})" if step is not None else ""
  if not math.isfinite(final):
    return Outcome(DIVERGED, f"final validation loss {final}{at}")
  if final > init_loss:
    return Outcome(DIVERGED, f"final validation loss {final:.4g}{at} above the loss at init {init_loss:.4g}")
  h = f"the targets' unigram entropy {unigram_entropy:.4g}"
  if final > unigram_entropy + margin:
    return Outcome(UNDERTRAINED, f"final validation loss {final:.4g}{at} still above {h} + δ {margin:g}")
  if final >= unigram_entropy - margin:
    return Outcome(COLLAPSED, f"final validation loss {final:.4g}{at} within δ {margin:g} of {h}")
  return Outcome(TRAINED, f"final validation loss {final:.4g}{at} below {h} − δ {margin:g}")


def classify_run(metrics: Sequence[dict], status: Optional[dict], data_stats: Optional[dict]) -> Optional[Outcome]:
  """The class of a run from its files (metrics.jsonl records, status.json, data_stats.json); None for a run that
  trains no step (an at-init analysis) or that has no step-0 evaluation (`train.eval_at_init` off) to compare with.
  """
  evals = [(r["step"], r["loss"]) for r in metrics if r.get("split") == "eval" and "loss" in r]
  init = [loss for step, loss in evals if step == 0]
  if not init or data_stats is None or not any(step > 0 for step, _ in evals) and not _nonfinite(status):
    return None
  return classify(
      evals,
      init_loss=init[0],
      unigram_entropy=data_stats["target_unigram_entropy"],
      stopped_nonfinite=_nonfinite(status),
  )


def _nonfinite(status: Optional[dict]) -> bool:
  return bool(status) and status.get("status") == "diverged"


# The early outcome of a run (issue 28): what a step-0 model of the loss can speak for. Stated before any run of it.
EARLY_WINDOW = 50  # steps after the warmup ends (T_w + 1 … T_w + W): the lr has reached its peak for W steps
SPIKE = 1.0  # nats above the lowest training loss logged before it: a loss spike


def early_class(
    train: Sequence[tuple[int, float]],
    *,
    warmup_steps: int,
    window: int = EARLY_WINDOW,
    spike: float = SPIKE,
) -> Outcome:
  """Whether a run was `stable` or `unstable` through its first `warmup_steps` + `window` steps, from its logged
  training losses `train` = [(step, loss), ...] (step ≥ 1; log every step or every few: a spike between two logged
  steps is not seen).

  Unstable, the first of: a non-finite training loss; a loss spike, a training loss more than `spike` nats above the
  lowest training loss logged before it (a run that blows up passes this on its way; the first logged loss, the
  loss at init on the first batch, starts the running minimum). Else stable. Each is read on the same batches'
  training losses, not against the validation loss at init (a batch's loss differs from it by sampling noise).
  Collapse is not read here: a run that will sit on the unigram plateau and one that will train both pass through
  the unigram entropy in their first hundred steps (the atlas's Post-LN runs reach ≈ H by step 50), so the loss
  alone cannot tell them apart this early; the final outcome (`classify`) reads it at the horizon. ValueError when
  no loss was logged inside the window (nothing to read).
  """
  if warmup_steps < 0 or window < 1:
    raise ValueError(f"warmup_steps={warmup_steps} must be ≥ 0 and window={window} ≥ 1")
  end = warmup_steps + window
  inside = sorted((int(s), float(v)) for s, v in train if 1 <= s <= end)
  if not inside:
    raise ValueError(f"no training loss logged in steps 1..{end}: log at least every few steps (train.log_every)")
  lowest = math.inf
  for step, loss in inside:
    if not math.isfinite(loss):
      return Outcome(UNSTABLE, f"training loss {loss} at step {step}")
    if loss > lowest + spike:
      return Outcome(UNSTABLE, f"loss spike at step {step}: {loss:.4g}, more than {spike:g} nat above {lowest:.4g}")
    lowest = min(lowest, loss)
  return Outcome(STABLE, f"no non-finite loss and no spike > {spike:g} nat in steps 1..{end}")


# The collapse-aware outcome (issue 40): what "where a rule breaks" means for the boundary a step-0 model predicts.
FAILED_CLASSES = (DIVERGED, COLLAPSED, UNSTABLE)


def failed(cls: Optional[str]) -> Optional[bool]:
  """A run's class read as failure: True for diverged, collapsed or unstable (a spike or a non-finite loss early),
  False for trained, None for undertrained or unknown (neither: a run that has not reached the unigram model's
  loss says nothing about stability)."""
  if cls in FAILED_CLASSES:
    return True
  return False if cls == TRAINED else None


def combine(early: Optional[str], final: Optional[str]) -> Optional[str]:
  """One class from a run's early outcome (`early_class`) and its final class (`classify`): a spike or non-finite
  loss in the early window (`unstable`) wins over a final class that recovered from it (a run that spikes has
  broken, whatever it reaches later); a divergence or a collapse at the horizon wins over an early window that
  looked stable (the collapse the early window cannot see). None when neither is known."""
  if final == DIVERGED:
    return DIVERGED
  return UNSTABLE if early == UNSTABLE else final


def collapse_aware(
    train: Sequence[tuple[int, float]],
    evals: Sequence[tuple[int, float]],
    *,
    init_loss: float,
    unigram_entropy: float,
    warmup_steps: int,
    stopped_nonfinite: bool = False,
) -> Outcome:
  """A run's collapse-aware outcome from its curves: the first of a non-finite loss anywhere (diverged), a spike in
  the warmup + `EARLY_WINDOW` steps (unstable), then the final class of `classify` (diverged, collapsed,
  undertrained or trained). `failed(outcome.cls)` is the boundary's reading of it."""
  if stopped_nonfinite or any(not math.isfinite(v) for _, v in train):
    bad = next(((s, v) for s, v in train if not math.isfinite(v)), None)
    return Outcome(DIVERGED, f"training loss {bad[1]} at step {bad[0]}" if bad else "a non-finite loss stopped it")
  early = early_class(train, warmup_steps=warmup_steps)
  if early.cls == UNSTABLE:
    return early
  return classify(evals, init_loss=init_loss, unigram_entropy=unigram_entropy)
