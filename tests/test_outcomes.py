"""Run outcomes (analysis/outcomes.py): the classification rule on hand-made curves, and its inputs from the data."""

import math

import numpy as np
import pytest

from analysis import outcomes
from analysis.outcomes import COLLAPSED, DIVERGED, TRAINED, UNDERTRAINED

H = 5.4  # a unigram entropy (nats per token) for the hand-made curves
INIT = 7.7  # the validation loss at init


def _classify(losses, **kw):
  evals = [(0, INIT)] + [(100 * (i + 1), v) for i, v in enumerate(losses)]
  return outcomes.classify(evals, init_loss=INIT, unigram_entropy=H, **kw).cls


@pytest.mark.parametrize(
    "losses, expected",
    [
        ([6.0, float("nan")], DIVERGED),  # NaN at the last evaluation
        ([6.0, float("inf"), 5.0], DIVERGED),
        ([6.0, 5.0, 4.2, 3.9, 9000.0], DIVERGED),  # late blow-up far above the loss at init
        ([6.0, 4.0, INIT + 0.01, 4.0], DIVERGED),  # above init once, then back: still diverged (at any evaluation)
        ([6.2, 5.6, 5.42, 5.41], COLLAPSED),  # plateau at the unigram entropy
        ([6.2, 5.3, 5.35, 5.39], COLLAPSED),  # plateau just below H
        ([6.2, 5.7, 5.6, 5.55], UNDERTRAINED),  # still above the unigram model's loss at the horizon
        ([7.5, 7.0, 6.6], UNDERTRAINED),  # a small lr: slowly down from init
        ([6.2, 5.6, H - outcomes.COLLAPSE_MARGIN + 1e-6], COLLAPSED),  # just inside δ
        ([6.2, 5.6, H + outcomes.COLLAPSE_MARGIN - 1e-6], COLLAPSED),  # just inside δ, above
        ([6.2, 5.6, H + outcomes.COLLAPSE_MARGIN + 1e-6], UNDERTRAINED),  # just outside δ, above
        ([7.6, 7.0, 6.1, 5.5, 5.25], TRAINED),  # slow but training: 0.15 nats below H at the end
        ([6.0, 4.5, 3.6, 3.4], TRAINED),
        ([6.2, 5.6, H - outcomes.COLLAPSE_MARGIN - 1e-6], TRAINED),  # just outside δ
    ],
)
def test_classify_hand_made_curves(losses, expected):
  assert _classify(losses) == expected


def test_stopped_nonfinite_is_diverged_whatever_the_curve():
  assert _classify([3.0], stopped_nonfinite=True) == DIVERGED


def test_reason_names_the_deciding_numbers():
  out = outcomes.classify([(0, INIT), (200, 9000.0)], init_loss=INIT, unigram_entropy=H)
  assert "9000" in out.reason and "step 200" in out.reason and "7.7" in out.reason


def test_classify_refuses_what_it_cannot_read():
  with pytest.raises(ValueError, match="no validation loss after step 0"):
    outcomes.classify([(0, INIT)], init_loss=INIT, unigram_entropy=H)
  with pytest.raises(ValueError, match="init_loss"):
    outcomes.classify([(100, 3.0)], init_loss=float("nan"), unigram_entropy=H)
  with pytest.raises(ValueError, match="not one of"):
    outcomes.Outcome("exploded", "")


def test_classify_run_reads_the_files_records():
  metrics = [
      {"step": 0, "split": "eval", "loss": INIT},
      {"step": 100, "split": "train", "loss": 2.0},  # train records are not read
      {"step": 200, "split": "eval", "loss": 5.41},
  ]
  stats = {"target_unigram_entropy": H}
  assert outcomes.classify_run(metrics, {"status": "finished"}, stats).cls == COLLAPSED
  assert outcomes.classify_final(5.41, init_loss=INIT, unigram_entropy=H).cls == COLLAPSED
  assert outcomes.classify_final(9000.0, init_loss=INIT, unigram_entropy=H).cls == DIVERGED
  assert outcomes.classify_run(metrics, {"status": "diverged"}, stats).cls == DIVERGED
  # No step-0 evaluation (train.eval_at_init off), or no data statistics: no class, rather than a guess.
  assert outcomes.classify_run(metrics[1:], {"status": "finished"}, stats) is None
  assert outcomes.classify_run(metrics, {"status": "finished"}, None) is None
  # An at-init run (evaluated at step 0 only) trained nothing: no class.
  assert outcomes.classify_run(metrics[:1], {"status": "finished"}, stats) is None


class _Tokenizer:
  vocab_size = 6


def test_target_unigram_entropy_closed_form():
  """Cross-entropy of the training targets' add-one-smoothed unigram on the eval targets (padding 0 ignored)."""
  from train.data.build import Data

  train = [{"targets": np.array([2, 2, 3, 1, 0])}, {"targets": np.array([2, 4, 1, 0, 0])}]  # 2:3, 3:1, 1:2, 4:1
  evals = [{"targets": np.array([2, 3, 1, 0])}, {"targets": np.array([5, 1, 0, 0])}]  # 2:1, 3:1, 1:2, 5:1 (unseen)
  data = Data.__new__(Data)
  object.__setattr__(data, "tokenizer", _Tokenizer())
  object.__setattr__(data, "_tokenized_eval", lambda: evals)
  object.__setattr__(data, "_tokenized_train", lambda: train)
  stats = data.target_unigram_entropy()
  q = {i: (c + 1) / (7 + 6) for i, c in {0: 0, 1: 2, 2: 3, 3: 1, 4: 1, 5: 0}.items()}  # add-one over vocab 6
  p = {1: 2 / 5, 2: 1 / 5, 3: 1 / 5, 5: 1 / 5}
  assert stats["tokens"] == 5 and stats["train_tokens"] == 7 and stats["vocab_size"] == 6
  assert stats["target_unigram_entropy"] == pytest.approx(-sum(p[i] * math.log(q[i]) for i in p), rel=1e-12)
  assert stats["eval_self_entropy"] == pytest.approx(-sum(v * math.log(v) for v in p.values()), rel=1e-12)
  assert stats["eval_self_entropy"] < stats["target_unigram_entropy"]  # Gibbs' inequality


@pytest.mark.slow
def test_a_sweep_records_each_runs_class(tmp_path):
  """Through the sweep layer with train.eval_at_init: an eval record at step 0, data_stats.json, and the class."""
  import json

  from experiments import sweep as sweep_lib
  from tests import tiny
  from train import metrics as metrics_lib

  config = tiny.sweep_config(
      **{"sweep.grid": "optim.learning_rate=0.001,1e30", "sweep.seeds": 1, "train.eval_at_init": True}
  )
  finished, diverged = sweep_lib.run_sweep(config, str(tmp_path), emit=lambda _: None)
  assert diverged["outcome"] == "diverged" and diverged["class"] == DIVERGED
  assert "non-finite" in diverged["class_reason"]
  run = tmp_path / finished["workdir"]
  evals = metrics_lib.read_metrics(str(run), split="eval")
  assert [r["step"] for r in evals] == [0, 4]
  stats = json.loads((run / "data_stats.json").read_text())
  assert stats["split"] == "validation" and stats["tokens"] > 0 and 0 < stats["target_unigram_entropy"]
  assert stats["target_unigram_entropy"] <= math.log(stats["vocab_size"])
  expected = outcomes.classify(
      [(r["step"], r["loss"]) for r in evals],
      init_loss=evals[0]["loss"],
      unigram_entropy=stats["target_unigram_entropy"],
  )
  assert (finished["class"], finished["class_reason"]) == (expected.cls, expected.reason)


def _early(losses, warmup=0, **kw):
  """Training losses logged at steps 1, 2, ... (one per step)."""
  return outcomes.early_class(list(enumerate(losses, start=1)), warmup_steps=warmup, **kw)


@pytest.mark.parametrize(
    "losses, expected",
    [
        ([7.6, 7.0, 6.1, 5.5, 5.4, 5.3], outcomes.STABLE),  # down to the unigram plateau: not read as collapse here
        ([7.6, 7.0, 6.1, 6.9, 5.5], outcomes.STABLE),  # up by 0.8 nat: batch noise, below the spike threshold
        ([7.6, 7.0, 6.1, 7.11, 5.5], outcomes.UNSTABLE),  # up by 1.01 nat over the lowest before it: a spike
        ([7.6, 7.0, float("nan")], outcomes.UNSTABLE),
        ([7.6, INIT + 0.01, 6.0], outcomes.STABLE),  # a batch a little above the validation loss at init: noise
        ([7.6, 6.0, 5.0, 9000.0], outcomes.UNSTABLE),  # a blow-up
    ],
)
def test_early_class_hand_made_curves(losses, expected):
  assert _early(losses).cls == expected


def test_early_window_is_the_warmup_plus_w_steps_after_it():
  """Only steps 1 .. T_w + W are read: a blow-up after the window is the final outcome's business."""
  curve = [7.0] * 60 + [float("inf")]  # non-finite at step 61
  assert _early(curve, warmup=10, window=50).cls == outcomes.STABLE  # window ends at step 60
  assert _early(curve, warmup=11, window=50).cls == outcomes.UNSTABLE
  assert "step 61" in _early(curve, warmup=11, window=50).reason
  spike = _early([7.0, 6.0, 7.5], spike=1.0)
  assert spike.cls == outcomes.UNSTABLE and "step 3" in spike.reason and "6" in spike.reason
  with pytest.raises(ValueError, match="no training loss logged in steps 1..5"):
    outcomes.early_class([(10, 5.0)], warmup_steps=0, window=5)
  with pytest.raises(ValueError, match="window=0"):
    outcomes.early_class([(1, 5.0)], warmup_steps=0, window=0)


# The collapse-aware outcome (issue 40): hand-made curves of 200 steps against H = 5.0, the loss at init 7.0.
CA_H, CA_INIT = 5.0, 7.0


def _curve(f, steps=200):
  return [(s, f(s)) for s in range(1, steps + 1)]


@pytest.mark.parametrize(
    "train, final, expected",
    [
        (_curve(lambda s: max(5.0, 7.0 - 0.1 * s)), 5.02, COLLAPSED),  # the unigram plateau, smooth all the way
        (_curve(lambda s: 7.0 - 2.5 * s / 200), 4.6, TRAINED),  # slow but training: below H − δ at the horizon
        (_curve(lambda s: 7.0 - 1.0 * s / 200), 6.0, UNDERTRAINED),  # too slow: above H + δ
        (_curve(lambda s: 9.0 if s == 30 else 6.5 - s / 100), 4.0, outcomes.UNSTABLE),  # a spike, then it recovers
        (_curve(lambda s: math.nan if s > 40 else 6.5), math.nan, DIVERGED),  # NaN
    ],
)
def test_collapse_aware_outcome_on_hand_made_curves(train, final, expected):
  out = outcomes.collapse_aware(
      train, [(0, CA_INIT), (200, final)], init_loss=CA_INIT, unigram_entropy=CA_H, warmup_steps=0
  )
  assert out.cls == expected, out.reason
  assert outcomes.failed(out.cls) is {COLLAPSED: True, TRAINED: False, UNDERTRAINED: None}.get(expected, True)


def test_combine_reads_collapse_the_early_window_cannot_see_and_spikes_that_recover():
  assert outcomes.combine(outcomes.STABLE, COLLAPSED) == COLLAPSED  # early-stable Post-LN that ends collapsed fails
  assert outcomes.combine(outcomes.UNSTABLE, TRAINED) == outcomes.UNSTABLE  # a spike that recovers still failed
  assert outcomes.combine(outcomes.UNSTABLE, DIVERGED) == DIVERGED
  assert outcomes.combine(outcomes.STABLE, TRAINED) == TRAINED
  assert outcomes.combine(None, UNDERTRAINED) == UNDERTRAINED
  assert [outcomes.failed(c) for c in (DIVERGED, COLLAPSED, outcomes.UNSTABLE, TRAINED, UNDERTRAINED, None)] == [
      True, True, True, False, None, None,
  ]  # fmt: skip
