"""bench/gpu.sh, the GPU run, unchanged on the CPU at its toy size: every measurement line lands and parses, its
ratios and memory sums are the ones its fields imply, and the certified top-5 of the Hessian agrees with the
eigenvalues of the dense Hessian of the same problem (float32 products within their bounds; bfloat16 products
within bfloat16's rounding). No test needs an accelerator."""

import gc
import json
import os
import pathlib
import subprocess
import sys
import weakref

import jax
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from bench import gpu, problems

REPO = pathlib.Path(__file__).resolve().parents[1]
NAMES = [f"{d}/{r}" for d in gpu.DTYPES for r in gpu.ROUTINES]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("gpu") / "toy.json"
  env = dict(os.environ, PYTHON=sys.executable)
  proc = subprocess.run(
      [str(REPO / "bench" / "gpu.sh"), "--size=toy", "--json", str(out)],
      capture_output=True,
      text=True,
      cwd=REPO,
      env=env,
      timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.splitlines()
  rows = {}
  for line in lines:
    if line.startswith("MEASURED "):
      row = json.loads(line[len("MEASURED ") :])
      assert row["name"] not in rows, f"{row['name']} measured twice"
      rows[row["name"]] = row
  return dict(stdout=proc.stdout, lines=lines, rows=rows, doc=json.loads(out.read_text()))


@pytest.mark.slow
def test_every_measurement_lands_as_a_parsed_line(toy_run):
  assert sorted(toy_run["rows"]) == sorted(NAMES), toy_run["stdout"][-3000:]
  assert not [line for line in toy_run["lines"] if line.startswith(("FAILED", "SKIPPED"))]
  machine = json.loads(next(line for line in toy_run["lines"] if line.startswith("MACHINE "))[len("MACHINE ") :])
  assert machine["backend"] == "cpu" and machine["device_kind"] and machine["jax"] == jax.__version__
  # Each line is printed when it is measured, in the run's order: elapsed times increase line by line.
  elapsed = [toy_run["rows"][n]["elapsed_s"] for n in NAMES]
  assert elapsed == sorted(elapsed)
  # The JSON file holds the same rows and the machine; the table names every measurement.
  assert [r["name"] for r in toy_run["doc"]["rows"]] == NAMES
  assert toy_run["doc"]["machine"]["device_kind"] == machine["device_kind"]
  assert all(f"| {n} |" in toy_run["stdout"] for n in NAMES)


@pytest.mark.slow
def test_ratios_and_peaks_follow_from_the_fields(toy_run):
  rows = toy_run["rows"]
  for dtype in gpu.DTYPES:
    grad = rows[f"{dtype}/gradient"]
    for name in ("hvp", "ggn"):
      build, product = rows[f"{dtype}/{name}_build"], rows[f"{dtype}/{name}"]
      for r in (build, product):
        assert r["ratio_to_gradient"] == pytest.approx(r["time_s"] / grad["time_s"], rel=1e-12)
        assert r["time_min_s"] <= r["time_s"] and r["repeats"] == 2
      scratch = build["ratio_to_gradient"] + product["ratio_to_gradient"]
      assert product["from_scratch_ratio_to_gradient"] == pytest.approx(scratch, rel=1e-12)
      # The product's program takes the built operator and the vector: at most the build's outputs (jit drops the
      # operator's leaves the product does not read, e.g. the loss) plus one params-shaped vector.
      assert grad["output_bytes"] < product["argument_bytes"] <= build["output_bytes"] + grad["output_bytes"]
    for r in (grad, rows[f"{dtype}/hvp"], rows[f"{dtype}/ggn"]):
      assert r["peak_bytes"] == r["temp_bytes"] + r["argument_bytes"] + r["output_bytes"]
      assert r["output_bytes"] == grad["output_bytes"]  # a gradient or a product: one params-shaped float32 tree


@pytest.fixture(scope="module")
def dense_top5():
  """The 5 largest eigenvalues of the dense float32 Hessian of the toy problem (jax.hessian, not curvax)."""
  p = problems.get_problem("decoder", gpu.SIZES["toy"][0])
  flat, unravel = ravel_pytree(p.params)
  h = np.asarray(jax.jit(jax.hessian(lambda f: p.loss_fn(unravel(f), p.batch)))(flat), np.float64)
  return np.linalg.eigvalsh((h + h.T) / 2)[::-1][:5]


@pytest.mark.slow
def test_top5_is_certified_and_matches_the_dense_hessian(toy_run, dense_top5):
  for dtype in gpu.DTYPES:
    top = toy_run["rows"][f"{dtype}/top5"]
    values, bounds = np.array(top["values"]), np.array(top["bounds"])
    assert top["certified"] and top["k"] == 5 and 5 <= top["matvecs"] <= top["num_steps"]
    assert np.all(bounds <= top["tol"] * np.abs(values)) and np.all(np.diff(values) <= 0)
    if dtype == "float32":  # each within its certified bound, plus the dense float32 Hessian's own rounding
      np.testing.assert_array_less(np.abs(values - dense_top5), bounds + 1e-5 * abs(dense_top5[0]))
    else:  # bfloat16 products: the same Hessian to bfloat16's rounding (unit roundoff 2^-8) along the model
      np.testing.assert_allclose(values, dense_top5, rtol=0.02)


def test_no_measurement_starts_after_the_budget(capsys, tmp_path):
  """With the budget spent, each dtype's first measurement is skipped and named, and the table and file still come."""
  gpu.main(["--size=toy", "--budget_s", "0", "--json", str(tmp_path / "out.json")])
  out = capsys.readouterr().out
  assert "MEASURED" not in out
  for dtype in gpu.DTYPES:
    assert f"SKIPPED {dtype}/gradient: over the 0 s budget" in out
  rows = json.loads((tmp_path / "out.json").read_text())["rows"]
  assert rows == [dict(name=f"{d}/gradient", skipped="over the 0 s budget") for d in gpu.DTYPES]
  assert "| float32/gradient | skipped: over the 0 s budget |" in out


@pytest.mark.slow
def test_an_operator_is_freed_before_the_next_is_built(monkeypatch, capsys):
  """On the accelerator two operators' residuals (tens of GB at GPT-2 small) must not be held at once: when a build
  starts, every operator built before is gone (a weak reference to it is dead)."""
  built, alive_at_build = [], []
  real_build = gpu._build

  def build(problem, op_name, grad, args):
    gc.collect()
    alive_at_build.append([ref() is not None for ref in built])
    row, (op, build_row) = real_build(problem, op_name, grad, args)
    built.append(weakref.ref(op))
    return row, (op, build_row)

  monkeypatch.setattr(gpu, "_build", build)
  monkeypatch.setattr(gpu, "_top5", lambda run, args, op, n, product: (dict(time_s=0.0), None))
  gpu.main(["--size=toy", "--repeats", "1"])
  assert "FAILED" not in capsys.readouterr().out
  assert alive_at_build == [[], [False], [False, False], [False, False, False]]


def test_a_failed_measurement_is_named_and_the_run_goes_on(monkeypatch, capsys):
  real_build = gpu._build

  def build(problem, op_name, grad, args):
    if op_name == "ggn":
      raise RuntimeError("RESOURCE_EXHAUSTED: out of memory\nallocator details")
    return real_build(problem, op_name, grad, args)

  monkeypatch.setattr(gpu, "_build", build)
  monkeypatch.setattr(gpu, "_top5", lambda run, args, op, n, product: (dict(time_s=0.0), None))
  gpu.main(["--size=toy", "--repeats", "1", "--dtypes", "float32"])
  out = capsys.readouterr().out
  assert "FAILED float32/ggn_build: RuntimeError: RESOURCE_EXHAUSTED: out of memory\n" in out
  assert "SKIPPED float32/ggn: no ggn operator" in out
  measured = [json.loads(line[len("MEASURED ") :])["name"] for line in out.splitlines() if line.startswith("MEASURED ")]
  assert measured == ["float32/gradient", "float32/hvp_build", "float32/hvp", "float32/top5"]
