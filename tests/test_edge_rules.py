"""Tests for experiments/claims/shared/edge_rules.py, study 11's scoring on hand-made cells whose answer is known: a
perfect, a constant and a reversed λ₀ against the lr and the majority, what is left unscored, warmup's rescue
predicted by the overshoot, and the adaptive grid that extends until each method's boundary is bracketed."""

from analysis import outcomes
from experiments import study
from experiments.claims import edge
from experiments.claims.shared import edge_rules

LRS = [1e-3 * 2**k for k in range(10)]  # a factor-2 grid, 1e-3 … 0.512
LAM = {f"m{i}": 10.0 * 3**i for i in range(8)}  # 8 methods, each with its own λ_max: unstable above η = 2/λ


def _cells(lam_true, warmup=0, seeds=2):
  """Cells whose seeds are all unstable / failed exactly where η·λ > 2 (gradient descent's rule)."""
  out = []
  for method, lam in lam_true.items():
    for lr in LRS:
      bad = lr * lam > 2
      out.append(
          edge_rules.Cell(
              method,
              lr,
              warmup,
              (outcomes.UNSTABLE if bad else outcomes.STABLE,) * seeds,
              (outcomes.COLLAPSED if bad else outcomes.TRAINED,) * seeds,
          )
      )
  return out


def _lam0(values, predictor="gd"):
  return {m: {predictor: v} for m, v in values.items()}


def test_a_perfect_separator_has_auc_1_and_beats_the_lr_and_the_majority():
  s = edge_rules.score(_cells(LAM), _lam0(LAM), "gd", beta1=0.9, n_boot=500)
  assert s["auc"] == 1.0 and s["accuracy"] == 1.0 and s["methods"] == 8 and s["cells"] == 80
  assert s["auc_lr"] < 1.0  # across methods the lr alone cannot separate: the thresholds differ
  assert s["auc_gap_interval"][1] > 0 and s["verdicts"] == {
      "beats the lr": "reproduced",
      "beats the majority": "reproduced",
  }
  final = edge_rules.score(_cells(LAM), _lam0(LAM), "gd", beta1=0.9, which=edge.FINAL, n_boot=500)
  assert final["auc"] == 1.0 and final["verdicts"]["beats the lr"] == study.REPRODUCED


def test_a_constant_curvature_says_nothing_beyond_the_lr():
  """λ₀ the same for every method: the margin orders the cells as log η does, so the gap is 0 in every resample."""
  s = edge_rules.score(_cells(LAM), _lam0({m: 100.0 for m in LAM}), "gd", beta1=0.9, n_boot=300)
  assert s["auc"] == s["auc_lr"] and s["auc_gap_interval"] == (0.0, 0.0, 0.0)
  assert s["verdicts"]["beats the lr"] == study.INCONCLUSIVE
  flat = edge_rules.score(_cells(LAM), _lam0({m: -1.0 for m in LAM}), "gd", beta1=0.9, n_boot=300)
  assert flat["auc"] == 0.5 and flat["accuracy"] == 1 - flat["unstable"] / flat["cells"]  # "stable" everywhere
  assert flat["majority"] == flat["unstable"] / flat["cells"] > 0.5 and flat["verdicts"]["beats the majority"] == (
      study.NOT_REPRODUCED
  )


def test_a_reversed_curvature_loses_to_the_lr():
  reversed_ = {m: 1e4 / v for m, v in LAM.items()}  # the sharpest method measured as the flattest
  s = edge_rules.score(_cells(LAM), _lam0(reversed_), "gd", beta1=0.9, n_boot=500)
  assert s["auc"] < s["auc_lr"] and s["verdicts"]["beats the lr"] == study.NOT_REPRODUCED


def test_what_is_not_scored():
  """Warmup cells, undetermined cells, flagged methods and methods without λ₀ are left out; too few methods is
  inconclusive."""
  cells = _cells(LAM) + _cells(LAM, warmup=100)
  cells.append(edge_rules.Cell("m0", 7e-3, 0, (outcomes.STABLE,), (outcomes.TRAINED, outcomes.UNDERTRAINED)))
  s = edge_rules.score(cells, _lam0(LAM), "gd", beta1=0.9, which=edge.FINAL, flagged={"m1": ["gd"]}, n_boot=200)
  assert s["cells"] == 70 and s["methods"] == 7
  few = {m: LAM[m] for m in ("m0", "m1", "m2")}
  s = edge_rules.score(_cells(few), _lam0(few), "gd", beta1=0.9)
  assert s["auc"] == 1.0 and s["auc_gap_interval"] is None and s["verdicts"]["beats the lr"] == study.INCONCLUSIVE
  none = edge_rules.score(_cells(LAM), _lam0(LAM, "adam"), "gd", beta1=0.9)
  assert none["cells"] == 0 and none["verdicts"]["beats the lr"] == study.INCONCLUSIVE


def test_rescue_is_predicted_by_the_overshoot():
  """Warmup rescues a cell when η·λ ≤ 8 (an overshoot of at most 4× the threshold): the margin predicts which,
  across methods, where the lr alone does not."""
  cells = _cells(LAM)
  for method, lam in LAM.items():
    for lr in LRS:
      ok = lr * lam <= 8
      cells.append(
          edge_rules.Cell(method, lr, 100, (outcomes.STABLE if ok else outcomes.UNSTABLE,), (outcomes.TRAINED,))
      )
  r = edge_rules.rescue_score(cells, _lam0(LAM), "gd", beta1=0.9, warmup=100, n_boot=500)
  assert r["auc"] == 1.0 and r["auc_lr"] < 1.0 and r["verdict"] == study.REPRODUCED
  assert 0 < r["rescued"] < r["unstable without warmup"]
  assert edge_rules.rescue_score(cells, _lam0(LAM), "gd", beta1=0.9, warmup=400)["verdict"] == study.INCONCLUSIVE


def test_the_grid_extends_until_each_method_is_bracketed_and_marks_its_boundary():
  s, u = outcomes.STABLE, outcomes.UNSTABLE
  cell = lambda m, lr, *early: edge_rules.Cell(m, lr, 0, early, ())
  cells = [
      cell("a", 1e-3, s, s), cell("a", 2e-3, s, s), cell("a", 4e-3, u, s), cell("a", 8e-3, u, u),  # bracketed
      cell("b", 1e-3, s, s), cell("b", 2e-3, s, s),  # never unstable: go up
      cell("c", 1e-3, u, u), cell("c", 2e-3, u, u),  # never stable: go down
      cell("d", 1e-3, s, s), cell("d", 2e-3, u, u), cell("d", 1e-3 * 2**-1, s, s),
      edge_rules.Cell("d", 4e-3, 100, (u,), ()),  # a warmup cell: not part of the no-warmup boundary
  ]  # fmt: skip
  plan = edge_rules.extend(cells)
  assert plan["a"] == {"add": [], "boundary": [2e-3, 4e-3], "seeds": {1e-3: 2, 2e-3: 2, 4e-3: 2, 8e-3: 2},
                       "bracketed": True}  # fmt: skip
  assert plan["b"]["add"] == [4e-3] and not plan["b"]["bracketed"] and plan["b"]["boundary"] == []
  assert plan["c"]["add"] == [5e-4] and not plan["c"]["bracketed"]
  assert plan["d"]["boundary"] == [1e-3, 2e-3] and 4e-3 not in plan["d"]["seeds"]
  need = {m: [lr for lr in p["boundary"] if p["seeds"][lr] < edge_rules.BOUNDARY_SEEDS] for m, p in plan.items()}
  assert need == {"a": [2e-3, 4e-3], "b": [], "c": [], "d": [1e-3, 2e-3]}  # a third seed where the boundary is
