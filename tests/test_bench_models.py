"""bench/problems.py and bench/models_timing.py: every benchmarked model's three curvature functions are of one loss;
a timing entry's ratios, memory sums and certified top-5 are what its fields and a dense Hessian imply; and the
committed files (reports/curvax_models/<model>.json) hold every model at every size, consistent the same way."""

import copy
import json
import pathlib

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bench import models_timing, problems, timing

REPO = pathlib.Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports" / "curvax_models"


def _log_softmax_ce(logits, labels, weights):
  """Σ w·(logsumexp(z) − z_y) / Σ w in float64 numpy: the loss, computed apart from optax and train.loss."""
  z = np.asarray(logits, np.float64)
  m = z.max(-1, keepdims=True)
  lse = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[..., 0]
  picked = np.take_along_axis(z, np.asarray(labels)[..., None], -1)[..., 0]
  w = np.asarray(weights, np.float64)
  return float(np.sum(w * (lse - picked)) / np.sum(w))


@pytest.mark.parametrize("model", sorted(problems.MODELS))
def test_loss_outputs_and_per_example_losses_are_one_objective(model):
  """The Hessian's loss, the Gauss–Newton's outputs (softmax cross-entropy, position weights) and the empirical
  Fisher's per-example losses describe the same objective: loss = CE(outputs) = mean(per-example losses)."""
  p = problems.get_problem(model, "tiny")
  loss = float(p.loss_fn(p.params, p.batch))
  logits = p.outputs_fn(p.params, p.batch)
  labels = p.batch[1] if isinstance(p.batch, tuple) else p.batch["targets"]
  weights = np.ones(labels.shape) if p.output_weights is None else p.output_weights(p.batch)
  assert _log_softmax_ce(logits, labels, weights) == pytest.approx(loss, rel=1e-5)
  per_example = np.asarray(p.per_example_fn(p.params, p.batch))
  assert per_example.shape == (problems.SIZES[model]["tiny"]["batch"],)
  assert float(np.mean(per_example)) == pytest.approx(loss, rel=1e-5)


def test_unknown_model_or_size_is_refused_with_the_valid_names():
  with pytest.raises(ValueError, match=r"model='gpt'.*\['cnn', 'decoder', 'encoder_decoder', 'mlp'\]"):
    problems.get_problem("gpt", "tiny")
  with pytest.raises(ValueError, match=r"size='huge'.*\['mini', 'tiny'\]"):
    problems.get_problem("mlp", "huge")


def _classifier_params(model, s):
  """Closed-form parameter counts: Dense in·out + out; Conv 3·3·in·out + out; two 2×2 pools take 32 to 8."""
  if model == "mlp":
    widths = [s["features"]] + [s["width"]] * s["depth"] + [problems.CLASSES]
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:]))
  c1, c2 = s["channels"]
  return 9 * 3 * c1 + c1 + 9 * c1 * c2 + c2 + 8 * 8 * c2 * problems.CLASSES + problems.CLASSES


def check_entry(entry):
  """The relations every timing entry's fields must satisfy."""
  grad = entry["gradient"]
  assert grad["time_min_s"] <= grad["time_s"] and grad["peak_bytes"] > 0
  for name in timing.OPERATORS:
    row, build = entry[name], entry[name]["build"]
    for r in (row, build):  # against the gradient runs interleaved with the routine's
      assert r["ratio_to_gradient"] == pytest.approx(r["time_s"] / r["gradient_time_s"], rel=1e-12)
      assert r["flops_ratio_to_gradient"] == pytest.approx(r["flops"] / grad["flops"], rel=1e-12)
    scratch = build["ratio_to_gradient"] + row["ratio_to_gradient"]
    assert row["from_scratch_ratio_to_gradient"] == pytest.approx(scratch, rel=1e-12)
    peak = max(build["peak_bytes"], row["peak_bytes"]) / grad["peak_bytes"]
    assert row["peak_ratio_to_gradient"] == pytest.approx(peak, rel=1e-12)
    for r in (grad, row, build):
      assert r["peak_bytes"] == r["temp_bytes"] + r["argument_bytes"] + r["output_bytes"]
    assert row["output_bytes"] == grad["output_bytes"]  # one params-shaped float32 tree
  top = entry["top5"]
  values, bounds = np.array(top["values"]), np.array(top["bounds"])
  assert top["certified"] == bool(np.all(bounds <= top["tol"] * np.abs(values)))
  assert np.all(np.diff(values) <= 0) and 5 <= top["matvecs"] <= top["num_steps"] == min(150, entry["params"])
  assert top["basis_bytes"] == (top["num_steps"] + 1) * entry["params"] * 4
  assert entry["load_average_at_start"] and entry["dtype"] == "float32"


@pytest.mark.slow
def test_a_timing_entry_against_a_dense_hessian(monkeypatch, tmp_path):
  monkeypatch.setitem(problems.SIZES["mlp"], "tiny", dict(features=8, width=16, depth=2, batch=32))
  entry = models_timing.measure("mlp", "tiny", repeats=2)
  check_entry(entry)
  assert entry["params"] == _classifier_params("mlp", problems.SIZES["mlp"]["tiny"]) == 586
  p = problems.get_problem("mlp", "tiny")
  flat, unravel = ravel_pytree(p.params)
  h = np.asarray(jax.jit(jax.hessian(lambda f: p.loss_fn(unravel(f), p.batch)))(flat), np.float64)
  dense = np.linalg.eigvalsh((h + h.T) / 2)[::-1][:5]
  top = entry["top5"]
  assert top["certified"] and top["converged"]
  slack = 1e-5 * abs(dense[0])  # the dense float32 Hessian's own rounding
  np.testing.assert_array_less(np.abs(np.array(top["values"]) - dense), np.array(top["bounds"]) + slack)
  # The file: one per model, its sizes in order, each with the machine; a second size keeps the first.
  other = dict(copy.deepcopy(entry), size="mini")
  path = models_timing.write(other, str(tmp_path))
  assert models_timing.write(entry, str(tmp_path)) == path == str(tmp_path / "mlp.json")
  doc = json.loads(pathlib.Path(path).read_text())
  assert list(doc["sizes"]) == ["tiny", "mini"] and doc["model"] == "mlp"
  assert doc["sizes"]["tiny"]["machine"]["device_kind"] == jax.devices()[0].device_kind
  assert doc["sizes"]["tiny"]["top5"] == json.loads(json.dumps(top))


@pytest.mark.parametrize("model", sorted(problems.MODELS))
def test_committed_timing_file(model):
  doc = json.loads((REPORTS / f"{model}.json").read_text())
  assert doc["model"] == model and list(doc["sizes"]) == list(problems.TIMING_SIZES)
  assert set(doc["definitions"]) >= {"time_s", "ratio_to_gradient", "peak_bytes", "top5"}
  for size, entry in doc["sizes"].items():
    spec = problems.SIZES[model][size]
    assert {k: entry["shape"][k] for k in spec} == json.loads(json.dumps(spec)), "stale: rerun the bench"
    assert entry["batch"] == spec["batch"]
    if model in ("mlp", "cnn"):
      assert entry["params"] == _classifier_params(model, spec)
    machine = entry["machine"]
    assert machine["cpu"] and machine["device_kind"] and machine["jax"] and machine["jaxlib"]
    assert len(machine["load_average_1_5_15min"]) == 3
    check_entry(entry)
  assert doc["sizes"]["mini"]["params"] > doc["sizes"]["tiny"]["params"]


def test_restart_option_is_read_from_the_signature(monkeypatch):
  """`max_vectors` is passed to curvax only where its top_eigenvalues (or the Lanczos it forwards to) takes it."""
  import curvax

  def with_restart(op, k, *, num_steps, key=None, tol=None, max_vectors=None):
    raise AssertionError("not called")

  assert timing.restart_option() in (None, "max_vectors")
  monkeypatch.setattr(curvax, "top_eigenvalues", with_restart)
  assert timing.restart_option() == "max_vectors"
  monkeypatch.setattr(curvax, "top_eigenvalues", lambda op, k, *, num_steps, **kw: None)
  monkeypatch.setattr(curvax, "lanczos", lambda op, *, num_steps, **kw: None)
  assert timing.restart_option() is None
