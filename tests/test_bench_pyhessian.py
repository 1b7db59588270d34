"""bench/vs_pyhessian_check.py: the check that the PyTorch port is the JAX model. Its errors are the relative norms
they claim, its verdict fails a quantity past either stage's tolerance, and (where torch is installed, the bench's
venv: bench/requirements-pyhessian.txt) at `tiny` the port agrees with the JAX model to float64 rounding while a
port with LayerNorm's ε ten times too large, which the former float32 comparison of the sides (≤ 1e-3) passed, fails
the float64 stage."""

import numpy as np
import pytest

from bench import vs_pyhessian_check as check

NAMES = ["a", "b", "key_bias"]


def _result(loss, gradient, hvp):
  return {"loss": loss, "gradient": [np.asarray(x, np.float64) for x in gradient], "hvp": [np.asarray(x) for x in hvp]}


def test_errors_are_relative_norms_over_all_leaves_and_name_the_worst_nonzero_leaf():
  reference = _result(4.0, [[3.0, 0.0], [0.0, 4.0], [0.0]], [[1.0, 0.0], [0.0, 0.0], [0.0]])
  # gradient: leaf a off by 0.03 (relative 1e-2), leaf b off by 0.004 (1e-3): whole ‖(0.03, 0.004)‖ / 5.
  # The key bias's reference is exactly 0: its rounding noise counts in the whole, never as the worst leaf.
  result = _result(4.0 + 4e-6, [[3.03, 0.0], [0.0, 4.004], [1e-12]], [[1.0, 2e-3], [0.0, 0.0], [1e-12]])
  e = check.errors(result, reference, NAMES)
  assert e["loss"] == pytest.approx(1e-6)
  assert e["gradient"] == pytest.approx(np.hypot(0.03, 0.004) / 5.0)
  assert e["gradient_leaf"] == ("a", pytest.approx(1e-2))
  assert e["hvp"] == pytest.approx(np.hypot(2e-3, 1e-12))
  assert e["hvp_leaf"] == ("a", pytest.approx(2e-3))


def _report(float64, float32):
  stage = lambda err: {**{q: err for q in check.QUANTITIES}, "gradient_leaf": ("a", err), "hvp_leaf": ("a", err)}
  return {"float64": stage(float64), "jax_float32": stage(float32), "torch_float32": stage(float32)}


def test_verdict_fails_each_stage_past_its_own_tolerance_only():
  assert check.verdict(_report(check.TOL64, check.TOL32)) == []
  failures = check.verdict(_report(10 * check.TOL64, check.TOL32))
  assert [f.split(":")[0] for f in failures] == ["float64 loss", "float64 gradient", "float64 hvp"]
  assert "worst leaf a" in failures[1]
  # A float32 error below the float32 tolerance but far above float64's is rounding, not a port difference.
  assert check.verdict(_report(check.TOL64 / 10, check.TOL32 / 2)) == []
  failures = check.verdict(_report(0.0, 2 * check.TOL32))
  assert len(failures) == 6 and all(f.split()[0] in ("jax_float32", "torch_float32") for f in failures)
  assert check.verdict(_report(float("nan"), 0.0))[0].startswith("float64 loss")


@pytest.mark.slow  # compiles the JAX model's gradient and HVP in two dtypes
def test_the_port_agrees_in_float64_and_a_wrong_layernorm_epsilon_fails_there(tmp_path, monkeypatch):
  pytest.importorskip("torch")
  import torch_transformer  # noqa: PLC0415 (on the path bench/vs_pyhessian_check.py sets)

  path = str(tmp_path / "tiny.npz")
  check.problem.write_problem("tiny", path)
  evaluate_jax, cache = check.evaluate_jax, {}
  monkeypatch.setattr(check, "evaluate_jax", lambda *a: cache.setdefault(a, evaluate_jax(*a)))
  report = check.check_port("tiny", path)
  for q in check.QUANTITIES:
    assert report["float64"][q] < 1e-12  # float64 rounding alone (the tolerance is 1e-9)
    assert report["torch_float32"][q] < 1e-4 and report["jax_float32"][q] < 1e-4

  layer_norm = torch_transformer._layer_norm
  monkeypatch.setattr(torch_transformer, "_layer_norm", lambda x, s, b, eps: layer_norm(x, s, b, 10 * eps))
  with pytest.raises(SystemExit, match="float64 loss: relative error"):
    check.check_port("tiny", path)
  wrong = check.check_port("tiny", path, tol64=1.0)
  assert all(wrong["torch_vs_jax_float32"][q] < 1e-3 for q in check.QUANTITIES)  # the former check passed it
  assert all(wrong["float64"][q] > 1e3 * report["float64"][q] for q in check.QUANTITIES)
