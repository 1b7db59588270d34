"""`train.curvature_every`: λ_max of the training loss's Hessian recorded every k steps (analysis/tracking.py through
experiments/hooks.py): the records equal an independent Lanczos run on the saved checkpoints within their bounds,
compile nothing after the first, appear once per step across a resume, and bad values fail before compute."""

import collections
import dataclasses

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
import experiments
from analysis import hessian
from tests import tiny
from tests.conftest import count_compiles
from train import loop
from train.loss import make_loss_fn
from train.metrics import read_metrics

NAMES = (
    "curvature/lambda_max",
    "curvature/lambda_max_bound",
    "curvature/learning_rate",
    "curvature/lr_times_lambda_max",
)


def _config(**overrides):
  base = {
      "model.preset": "tiny",
      "model.num_encoder_layers": 1,
      "model.num_decoder_layers": 1,
      "model.d_model": 16,
      "model.num_heads": 2,
      "model.d_ff": 32,
      "data.batch_size": 8,
      "data.eval_batch_size": 8,
      "data.embedded.num_train": 400,
      "data.embedded.num_eval": 16,
      "data.max_eval_loss_examples": 16,
      "data.max_source_length": 12,
      "data.max_target_length": 12,
      "optim.warmup_steps": 3,
      "train.num_decode_examples": 0,
      "train.log_every": 3,
      "train.eval_every": 1000,
      "train.checkpoint_every": 2,
      "train.keep_checkpoints": 10,
      "train.curvature_every": 2,
      "analysis.batch_size": 4,
      "analysis.lanczos_steps": 40,
      "analysis.dtype": "float64",
  }
  return tiny.run_config(**{**base, **overrides})


def _train(config, workdir):
  exp = loop.setup(config, str(workdir))
  return loop.train_and_evaluate(exp, experiments.step_hooks(exp))


def _curvature_steps(workdir):
  records = read_metrics(str(workdir), split="train")
  steps = [r["step"] for r in records]
  assert len(steps) == len(set(steps)), steps  # one train record per step
  return {r["step"]: r for r in records if NAMES[0] in r}


@pytest.mark.slow
def test_records_equal_an_independent_lanczos_on_the_checkpoints_warm_started_in_fewer_matvecs(tmp_path):
  """Steps 2, 4, 6 carry λ_max (and steps 3 only the train metrics); with analysis.tracking_tol each record after
  the first starts from the previous record's Ritz vector and stops at its bound. Each equals a cold certified
  Lanczos from another start on the checkpoint of that step and the analysis batch, within both bounds, in far fewer
  matvecs than the fixed cold run of `analysis.lanczos_steps` = 40 (counted, `curvature/lanczos_steps`: 21, 12, 10)
  and no more than a cold start stopped at the same tolerance (19, 13, 11: this early λ_max moves from 2.7 to 5.4
  between two records, so the previous Ritz vector helps little; the stop on the bound saves the products). The
  cold path (tracking_tol = 0) is checked against a hand-built operator below."""
  tol = 1e-6
  config = _config(**{"train.num_steps": 6, "analysis.tracking_tol": tol})
  _train(config, tmp_path)
  records = _curvature_steps(tmp_path)
  assert sorted(records) == [2, 4, 6]
  assert sorted(r["step"] for r in read_metrics(str(tmp_path), split="train")) == [2, 3, 4, 6]
  for step, record in records.items():
    exp = loop.setup(config, str(tmp_path), restore_step=step)
    batch = exp.batches(1, 4)[0]  # the analysis batch: first 4 rows of a fresh pass over the train split
    with jax.enable_x64(True):
      model = exp.model.clone(config=dataclasses.replace(exp.model.config, dtype=jnp.float64, param_dtype=jnp.float64))
      variables = jax.tree.map(lambda x: x.astype(jnp.float64), exp.state.model_variables())
      op = hessian.hvp_fn(make_loss_fn(model, variables=variables), variables["params"], batch)
      cold = curvax.top_eigenvalues(op, 1, num_steps=40, key=jax.random.key(123), tol=tol)
    lam, bound = float(cold.values[0]), float(cold.bounds[0])
    assert record["curvature/lambda_max_bound"] <= tol * abs(record["curvature/lambda_max"]) * (1 + 1e-9), record
    assert abs(record["curvature/lambda_max"] - lam) <= record["curvature/lambda_max_bound"] + bound + 1e-9, step
    assert record["curvature/lanczos_steps"] < 40
    if step > 2:  # warm: no more products than a cold start to the same tolerance
      assert record["curvature/lanczos_steps"] <= int(cold.lanczos.num_steps_taken), (step, record)
    lr = float(exp.schedule(step))
    assert record["curvature/learning_rate"] == pytest.approx(lr, rel=1e-6)
    assert record["curvature/lr_times_lambda_max"] == pytest.approx(lr * record["curvature/lambda_max"], rel=1e-6)
  assert len({r["curvature/lambda_max"] for r in records.values()}) == 3  # the parameters moved


@pytest.mark.slow
def test_a_random_part_as_small_as_the_tolerance_reaches_the_bound_in_no_more_products(tmp_path):
  """`analysis.tracking_mix` is the warm start's random part: at tracking_tol = tracking_mix = 1% every record is
  certified to 1% in no more products than with the default tenth (here the same: this early λ_max doubles between
  records, so the drift, not the random part, sets the count; the drifting quadratic of tests/test_curvax_warm.py
  measures the saving), and the records after the first start elsewhere (the mix reaches the hook)."""
  runs = {}
  for mix in (0.1, 0.01):
    overrides = {"train.num_steps": 8, "analysis.tracking_tol": 1e-2, "analysis.tracking_mix": mix}
    _train(_config(**overrides), tmp_path / str(mix))
    runs[mix] = _curvature_steps(tmp_path / str(mix))
    assert sorted(runs[mix]) == [2, 4, 6, 8]
    for r in runs[mix].values():
      assert r["curvature/lambda_max_bound"] <= 1e-2 * abs(r["curvature/lambda_max"]) * (1 + 1e-9), r
  small, default = runs[0.01], runs[0.1]
  assert small[2] == default[2]  # the first record is cold: the mix does not enter
  for step in (4, 6, 8):
    assert small[step]["curvature/lanczos_steps"] <= default[step]["curvature/lanczos_steps"], (small, default)
    assert small[step]["curvature/lambda_max"] != default[step]["curvature/lambda_max"]
    gap = small[step]["curvature/lambda_max_bound"] + default[step]["curvature/lambda_max_bound"]
    assert abs(small[step]["curvature/lambda_max"] - default[step]["curvature/lambda_max"]) <= gap


@pytest.mark.parametrize("preconditioned", [0, 1])
@pytest.mark.slow
def test_records_after_the_first_compile_nothing(tmp_path, preconditioned):
  """The first record compiles (a width no other test here uses, so no program is cached yet), the next three
  compile nothing: the operator is data and the Lanczos program is cached by its structure (with the preconditioned
  λ_max too: H and P_t⁻¹H run one program, and P_t is data)."""
  overrides = {
      "train.num_steps": 4,
      "train.curvature_every": 1,
      "train.checkpoint_every": 100,
      "model.d_ff": 24 + 4 * preconditioned,
      "analysis.preconditioned_top_k": preconditioned,
  }
  config = _config(**overrides)
  exp = loop.setup(config, str(tmp_path))
  compiles = []

  def counted(hook):
    def fn(step, state, batch):
      with count_compiles() as seen:
        out = hook.fn(step, state, batch)
      compiles.append(len(seen))
      return out

    return loop.StepHook(hook.every, fn)

  loop.train_and_evaluate(exp, [counted(h) for h in experiments.step_hooks(exp)])
  assert len(compiles) == 4 and compiles[0] > 0 and compiles[1:] == [0, 0, 0], compiles
  assert sorted(_curvature_steps(tmp_path)) == [1, 2, 3, 4]


@pytest.mark.slow
def test_a_resumed_run_has_one_record_per_curvature_step(tmp_path):
  """Stopped at step 3 (checkpoint 2 and the final 3), resumed to 6: records at 2, 4, 6, once each, and the values
  of an uninterrupted run (the curvature batch is fixed, the resume is bitwise)."""
  _train(_config(**{"train.num_steps": 6}), tmp_path / "straight")
  _train(_config(**{"train.num_steps": 3}), tmp_path / "resumed")
  _train(_config(**{"train.num_steps": 6}), tmp_path / "resumed")
  straight, resumed = _curvature_steps(tmp_path / "straight"), _curvature_steps(tmp_path / "resumed")
  assert sorted(resumed) == sorted(straight) == [2, 4, 6]
  for step in straight:
    np.testing.assert_allclose(resumed[step]["curvature/lambda_max"], straight[step]["curvature/lambda_max"], 1e-9)


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"train.curvature_every": -1}, r"config.train.curvature_every=-1 is invalid; valid: an integer >= 0"),
        ({"train.curvature_every": 2.5}, r"curvature_every"),  # the ConfigDict refuses it, as on the command line
        ({"analysis.max_basis_bytes": 1}, r"max_basis_bytes"),  # the Lanczos basis cannot fit: before training
        ({"analysis.tracking_mix": 0.0}, r"config.analysis.tracking_mix=0.0 is invalid; valid: a number in \(0, 1\]"),
    ],
)
def test_bad_values_fail_before_compute(tmp_path, overrides, match, monkeypatch):
  def no_training(*args, **kwargs):
    raise AssertionError("a train step was built")

  monkeypatch.setattr(loop.step_lib, "jit_train_step", no_training)
  monkeypatch.setattr(loop.programs, "_BUILT", collections.OrderedDict())  # no step built by an earlier test
  with pytest.raises((ValueError, TypeError), match=match):
    _train(_config(**overrides), tmp_path)


@pytest.mark.slow
def test_preconditioned_records_equal_a_hand_built_operator_on_the_checkpoints(tmp_path):
  """With analysis.preconditioned_top_k = 1 the records add λ_max(P_t⁻¹H), P_t = diag(√(ν_t/(1 − β₂ᵗ)) + ε) read
  from the checkpoint's Adam state: each equals a 60-step Lanczos on v ↦ D·H(D·v), D = P_t^{-1/2} built here in
  numpy from the restored ν and count, within the sum of both bounds; η·λ_P is the product; λ_max is unchanged."""
  config = _config(**{"train.num_steps": 2, "analysis.preconditioned_top_k": 1, "optim.eps": 1e-6})
  _train(config, tmp_path)
  records = _curvature_steps(tmp_path)
  assert sorted(records) == [2]  # t = 2: the bias correction 1 − β₂² is not step 1's
  for step, record in records.items():
    exp = loop.setup(config, str(tmp_path), restore_step=step)
    batch = exp.batches(1, 4)[0]
    adam = [s for s in jax.tree.leaves(exp.state.opt_state, is_leaf=lambda x: hasattr(x, "nu")) if hasattr(s, "nu")]
    assert len(adam) == 1 and int(adam[0].count) == step
    nu = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(adam[0].nu)])
    b2 = config.optim.b2
    d = 1.0 / np.sqrt(np.sqrt(nu / (1.0 - b2**step)) + 1e-6)
    with jax.enable_x64(True):
      model = exp.model.clone(config=dataclasses.replace(exp.model.config, dtype=jnp.float64, param_dtype=jnp.float64))
      variables = jax.tree.map(lambda x: x.astype(jnp.float64), exp.state.model_variables())
      params = variables["params"]
      flat, unravel = jax.flatten_util.ravel_pytree(params)
      hvp = hessian.hvp_fn(make_loss_fn(model, variables=variables), params, batch)
      scale = jnp.asarray(d)

      def preconditioned(v):
        return unravel(
            scale * jax.flatten_util.ravel_pytree(hvp(unravel(scale * jax.flatten_util.ravel_pytree(v)[0])))[0]
        )

      ref = curvax.top_eigenvalues(curvax.as_operator(preconditioned, params), 1, num_steps=60, key=jax.random.key(7))
      lam, bound = float(ref.values[0]), float(ref.bounds[0])
    assert flat.size == nu.size
    got, got_bound = record["curvature/preconditioned_lambda_max"], record["curvature/preconditioned_lambda_max_bound"]
    assert bound < 1e-6 * abs(lam) and got_bound < 1e-3 * abs(lam), (step, record, bound)
    assert abs(got - lam) <= got_bound + bound + 1e-9 * abs(lam), (step, got, lam)
    assert lam > 10 * record["curvature/lambda_max"]  # P⁻¹ with |√v̂| ≪ 1 magnifies H: the two are not the same number
    assert record["curvature/lr_times_preconditioned_lambda_max"] == pytest.approx(
        record["curvature/learning_rate"] * got, rel=1e-6
    )


def test_preconditioned_records_need_adam_before_training(tmp_path, monkeypatch):
  def no_training(*args, **kwargs):
    raise AssertionError("a train step was built")

  monkeypatch.setattr(loop.step_lib, "jit_train_step", no_training)
  monkeypatch.setattr(loop.programs, "_BUILT", collections.OrderedDict())  # no step built by an earlier test
  config = _config(**{"analysis.preconditioned_top_k": 1, "optim.name": "sgd"})
  with pytest.raises(ValueError, match=r"config.analysis.preconditioned_top_k=1 contradicts config.optim.name='sgd'"):
    _train(config, tmp_path)
