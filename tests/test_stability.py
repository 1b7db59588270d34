"""Tests for analysis/stability.py: the step-0 stability predictors against closed forms on quadratics (the divergence
boundaries of gradient descent and EMA momentum, run), dense float64 references for Adam's preconditioned Hessian and
the update sharpness, compile-once, and the `run_analysis` integration (stability.json) with its config checks."""

import dataclasses
import functools
import json
import os

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import curvax
from analysis import preconditioner, stability
from analysis.hessian import ggn_vp_fn, hvp_fn
from analysis.run import run_analysis
from configs import default
from models import get_model
from tests import tiny
from tests.conftest import count_compiles
from train.loss import make_logits_fn, make_loss_fn

N = 12


def _spd(seed, lo=1.0, hi=10.0, n=N):
  """A random SPD matrix Q diag(λ) Qᵀ with eigenvalues in [lo, hi] (both attained)."""
  rng = np.random.default_rng(seed)
  q, _ = np.linalg.qr(rng.standard_normal((n, n)))
  lam = np.concatenate([[lo, hi], rng.uniform(lo, hi, n - 2)])
  return (q * lam) @ q.T


def _run_gd(a, lr, steps=600):
  theta = np.random.default_rng(1).standard_normal(a.shape[0])
  norms = [np.linalg.norm(theta)]
  for _ in range(steps):
    theta = theta - lr * (a @ theta)
    norms.append(np.linalg.norm(theta))
  return np.asarray(norms)


def _run_ema_momentum(a, lr, beta1, steps=600):
  """Heavy-ball with EMA momentum as optax's `ema(debias=False)` then `scale(-lr)`: m = β₁m + (1 − β₁)g, θ -= ηm."""
  theta = np.random.default_rng(2).standard_normal(a.shape[0])
  m = np.zeros_like(theta)
  norms = [np.linalg.norm(theta)]
  for _ in range(steps):
    m = beta1 * m + (1 - beta1) * (a @ theta)
    theta = theta - lr * m
    norms.append(np.linalg.norm(theta))
  return np.asarray(norms)


def test_two_over_lambda_max_is_the_exact_divergence_boundary_of_gradient_descent():
  a = _spd(0)
  lam = np.linalg.eigvalsh(a)[-1]
  lr = stability.max_stable_lr_gd(lam)
  assert lr == pytest.approx(2.0 / 10.0, rel=1e-12)  # λ_max = 10 by construction
  below, above = _run_gd(a, 0.99 * lr), _run_gd(a, 1.01 * lr)
  assert np.all(np.diff(below) <= 1e-12) and below[-1] < 1e-3 * below[0]  # every mode contracts: |1 − ηλ| < 1
  assert above[-1] > 1e4 * above[0]  # the top mode grows by |1 − 1.01·2| = 1.02 per step
  assert stability.max_stable_lr_gd(-1.0) == np.inf


@pytest.mark.parametrize("beta1", [0.0, 0.5, 0.9])
def test_ema_momentum_is_stable_just_below_the_adam_edge_of_stability_and_diverges_above(beta1):
  a = _spd(3)
  lam = np.linalg.eigvalsh(a)[-1]
  lr = stability.max_stable_lr_adam(lam, beta1)
  assert lr == pytest.approx((2 + 2 * beta1) / ((1 - beta1) * lam), rel=1e-12)
  below, above = _run_ema_momentum(a, 0.99 * lr, beta1), _run_ema_momentum(a, 1.01 * lr, beta1)
  assert below[-1] < 1e-3 * below[0] and np.max(below) < 10 * below[0]
  assert above[-1] > 1e4 * above[0]
  if beta1 == 0.9:
    assert lr * lam == pytest.approx(38.0)  # Cohen et al. 2022: 38/η for β₁ = 0.9
  for bad in (1.0, -0.1, True):
    with pytest.raises(ValueError, match="beta1=.* must be a number in \\[0, 1\\)"):
      stability.max_stable_lr_adam(lam, bad)


def _quadratic(seed=0):
  """A quadratic loss ½θᵀAθ + bᵀθ on a two-leaf pytree (ravel order: 'b' then 'w'), A in that order, float64."""
  rng = np.random.default_rng(seed)
  a = _spd(seed + 10, lo=-2.0, hi=7.0, n=N)  # indefinite, like a Hessian at init
  b = rng.standard_normal(N)
  params = {"w": jnp.asarray(rng.standard_normal((3, 3))), "b": jnp.asarray(rng.standard_normal(3))}
  _, unravel = jax.flatten_util.ravel_pytree(params)
  a_j, b_j = jnp.asarray(a), jnp.asarray(b)

  def loss_fn(p, batch):
    theta = jax.flatten_util.ravel_pytree(p)[0]
    return 0.5 * theta @ a_j @ theta + b_j @ theta

  theta0 = np.asarray(jax.flatten_util.ravel_pytree(params)[0])
  return loss_fn, params, a, a @ theta0 + b, {"targets": jnp.ones((1, 1), jnp.int32)}


def test_preconditioned_top_eigenvalues_match_numpy_on_a_quadratic():
  with jax.enable_x64(True):
    loss_fn, params, a, grad, batch = _quadratic(1)
    grad[0] = 0.0  # a zero gradient entry: P = ε there
    eps = 1e-3
    g = stability.mean_gradient(loss_fn, params, [batch])
    np.testing.assert_allclose(np.asarray(jax.flatten_util.ravel_pytree(g)[0])[1:], grad[1:], rtol=1e-12)
    g = jax.flatten_util.ravel_pytree(g)[1](jnp.asarray(grad))
    pre = preconditioner.adam_preconditioned_operator(hvp_fn(loss_fn, params, batch), g, eps)
    got = curvax.top_eigenvalues(pre, 3, num_steps=N, key=jax.random.key(0))
  d = 1.0 / np.sqrt(np.abs(grad) + eps)
  want = np.linalg.eigvalsh(d[:, None] * a * d[None, :])[::-1][:3]
  np.testing.assert_allclose(np.asarray(got.values), want, rtol=1e-8)
  # Similar to P⁻¹A: the same (real) eigenvalues, though P⁻¹A is not symmetric.
  p_inv_a = np.linalg.eigvals(a / (np.abs(grad) + eps)[:, None])
  np.testing.assert_allclose(np.sort(p_inv_a.real)[::-1][:3], want, rtol=1e-8)
  assert np.max(np.abs(p_inv_a.imag)) < 1e-6 * want[0]
  assert stability.max_stable_lr_adam(float(got.values[0]), 0.9) == pytest.approx(38.0 / want[0], rel=1e-8)


def test_frozen_preconditioner_momentum_diverges_exactly_past_38_over_the_codes_preconditioned_lambda():
  """Cohen et al. 2022's Adam threshold with P ≠ I: on ½θᵀAθ (A SPD) with P = |g| + ε frozen, EMA momentum on
  P⁻¹-scaled steps (θ -= η·P⁻¹m, m = β₁m + (1 − β₁)Aθ) is `_run_ema_momentum` on P⁻¹A, so it contracts just below
  η = (2 + 2β₁)/((1 − β₁)·λ_max(P⁻¹A)) and diverges just above; λ_max(P⁻¹A) from the code's preconditioned operator
  and Lanczos, P spanning four orders of magnitude."""
  with jax.enable_x64(True):
    _, params, _, _, batch = _quadratic(2)
    a = _spd(7)
    rng = np.random.default_rng(3)
    grad = rng.choice([-1.0, 1.0], N) * 10.0 ** rng.uniform(-4, 0, N)
    eps = 1e-6
    a_j = jnp.asarray(a)

    def loss_fn(p, _):
      theta = jax.flatten_util.ravel_pytree(p)[0]
      return 0.5 * theta @ a_j @ theta

    g = jax.flatten_util.ravel_pytree(params)[1](jnp.asarray(grad))
    pre = preconditioner.adam_preconditioned_operator(hvp_fn(loss_fn, params, batch), g, eps)
    lam = float(curvax.top_eigenvalues(pre, 1, num_steps=N, key=jax.random.key(0)).values[0])
  p_inv_a = a / (np.abs(grad) + eps)[:, None]
  assert lam == pytest.approx(np.max(np.linalg.eigvals(p_inv_a).real), rel=1e-8)
  lr = stability.max_stable_lr_adam(lam, 0.9)
  assert lr * lam == pytest.approx(38.0)
  below, above = _run_ema_momentum(p_inv_a, 0.99 * lr, 0.9), _run_ema_momentum(p_inv_a, 1.01 * lr, 0.9)
  assert below[-1] < 1e-3 * below[0] and np.isfinite(above[-1]) and above[-1] > 1e4 * above[0]


def test_step0_predictors_read_the_preconditioned_lambda_at_a_second_eps_and_flag_where_eps_decides():
  """A zero gradient entry makes P = ε there: at ε = 1e-3 and at ε' = 1e-8·RMS(g) the top eigenvalue of P⁻¹A moves by
  orders of magnitude (flagged); with every entry of g well away from 0 both ε are negligible (not flagged)."""
  with jax.enable_x64(True):
    loss_fn, params, a, grad, batch = _quadratic(1)
    op = hvp_fn(loss_fn, params, batch)
    kw = dict(beta1=0.9, preconditioned_top_k=1, with_update_sharpness=False, num_steps=N, key=jax.random.key(0))
    shift = jax.flatten_util.ravel_pytree(params)[1](jnp.asarray(np.where(np.arange(N) == 0, grad[0], 0.0)))
    flat_at_0 = lambda p, b: loss_fn(p, b) - sum(
        jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(p), jax.tree.leaves(shift))
    )
    zero = stability.step0_predictors(hvp_fn(flat_at_0, params, batch), flat_at_0, params, [batch], eps=1e-3, **kw)
    fine = stability.step0_predictors(op, loss_fn, params, [batch], eps=1e-12, **kw)
  rms = np.sqrt(np.mean(grad[1:] ** 2 * (N - 1) / N))  # g with its first entry removed
  assert zero["eps_probe"] == pytest.approx(1e-8 * rms, rel=1e-8)
  assert (
      zero["preconditioned_lambda_max_at_eps_probe"] > 100 * zero["preconditioned_lambda_max"] and zero["eps_decides"]
  )
  assert fine["preconditioned_lambda_max_at_eps_probe"] == pytest.approx(fine["preconditioned_lambda_max"], rel=1e-3)
  assert not fine["eps_decides"]


@pytest.mark.parametrize("b, flagged", [((1.0, 1e-7), True), ((1.0, 0.5), False)])
def test_the_update_predictor_is_read_at_the_second_eps_and_flagged_where_eps_decides(b, flagged):
  """½θᵀdiag(1, 1e4)θ + bᵀθ at θ = 0, so g = b and d = g/(|g| + ε): λ₀ of the update predictor is dᵀHd/gᵀd (2 over
  the critical first step). With a gradient entry of 1e-7 under ε = 1e-3, d is ~1e-4 there at ε and ~0.93 at
  ε' = 1e-8·RMS(g): that coordinate's curvature 1e4 enters only at ε', so ε decides λ₀ (flagged); with both entries
  far above both ε, the readings agree."""
  h, g = np.array([1.0, 1e4]), np.array(b)
  with jax.enable_x64(True):
    params = {"w": jnp.zeros(2)}
    loss_fn = lambda p, _: 0.5 * jnp.sum(jnp.asarray(h) * p["w"] ** 2) + jnp.vdot(jnp.asarray(g), p["w"])
    batch = {"targets": jnp.ones((1, 1), jnp.int32)}
    kw = dict(beta1=0.9, preconditioned_top_k=0, with_update_sharpness=True, num_steps=2, key=jax.random.key(0))
    rec = stability.step0_predictors(hvp_fn(loss_fn, params, batch), loss_fn, params, [batch], eps=1e-3, **kw)
  lam = lambda e: float(np.sum(h * (g / (np.abs(g) + e)) ** 2) / np.sum(g * g / (np.abs(g) + e)))
  eps_alt = 1e-8 * np.sqrt(np.mean(g**2))
  assert rec["update_lambda"] == pytest.approx(lam(1e-3), rel=1e-10)
  assert rec["update_lambda_at_eps_probe"] == pytest.approx(lam(eps_alt), rel=1e-10)
  assert rec["update_lambda"] == pytest.approx(2.0 / rec["first_step_critical_lr"], rel=1e-10)
  assert rec["update_eps_decides"] is flagged


def test_adam_first_update_is_optax_adams_and_update_sharpness_is_the_rayleigh_quotient():
  with jax.enable_x64(True):
    loss_fn, params, a, grad, batch = _quadratic(2)
    g = jax.flatten_util.ravel_pytree(params)[1](jnp.asarray(grad))
    lr, eps = 0.03, 1e-8
    u = stability.adam_first_update(g, lr, eps)
    opt = optax.adam(lr, b1=0.9, b2=0.98, eps=eps)
    want_u, _ = opt.update(g, opt.init(params), params)
    flat_u = np.asarray(jax.flatten_util.ravel_pytree(u)[0])
    np.testing.assert_allclose(flat_u, np.asarray(jax.flatten_util.ravel_pytree(want_u)[0]), rtol=1e-12)
    np.testing.assert_allclose(flat_u, -lr * grad / (np.abs(grad) + eps), rtol=1e-12)
    sharpness = float(stability.update_sharpness(hvp_fn(loss_fn, params, batch), u))
  assert sharpness == pytest.approx(flat_u @ a @ flat_u / (flat_u @ flat_u), rel=1e-10)
  # A direction along an eigenvector gives its eigenvalue.
  lam, vecs = np.linalg.eigh(a)
  with jax.enable_x64(True):
    v = jax.flatten_util.ravel_pytree(params)[1](jnp.asarray(vecs[:, -1]))
    assert float(stability.update_sharpness(hvp_fn(loss_fn, params, batch), v)) == pytest.approx(lam[-1], rel=1e-10)


VOCAB = 7


def _batches(seed=0):
  rng = np.random.default_rng(seed)
  out = []
  for i in range(2):
    targets = rng.integers(3, VOCAB, (3, 5)).astype(np.int32)
    targets[i, -2:] = 0
    out.append({"targets": jnp.asarray(targets)})
  return out


def _config(**overrides):
  off = dict(top_k=0, bottom_k=0, spectrum=False, trace_probes=0, blocks=False, grad_norms=False, signal=False)
  sizes = dict(num_batches=2, batch_size=3, lanczos_steps=60)
  return {**default.get_config().analysis.to_dict(), **sizes, **off, **overrides}  # a mapping: any type gets through


@functools.partial(jax.jit, static_argnums=0)
def _init(net, key, batch):
  return net.init(key, batch)


@pytest.fixture(scope="module")
def tiny_decoder():
  config = tiny.model_config(vocab_size=VOCAB, arch="decoder", d_model=4, d_ff=4, max_len=256)
  net = get_model(config)
  batches = _batches()
  return net, _init(net, jax.random.key(0), batches[0]), batches


@pytest.mark.slow
def test_preconditioned_predictors_compile_once(tiny_decoder):
  net = tiny_decoder[0]
  results = []
  for seed in (1, 2):  # the first call compiles; the second (new params, batch, gradient, loss object) must not
    with count_compiles() as compiles:
      batch = _batches(seed)[0]
      variables = _init(net, jax.random.key(seed), batch)
      loss_fn = make_loss_fn(net)
      out = stability.step0_predictors(
          hvp_fn(loss_fn, variables["params"], batch),
          loss_fn,
          variables["params"],
          [batch],
          beta1=0.9,
          eps=1e-9,
          preconditioned_top_k=2,
          with_update_sharpness=True,
          num_steps=6,
          key=jax.random.key(seed),
      )
    results.append((len(compiles), out))
  assert results[0][0] > 0
  assert results[1][0] == 0, f"the second call compiled {results[1][0]} programs"
  assert results[0][1]["preconditioned_lambda_max"] != results[1][1]["preconditioned_lambda_max"]


@pytest.mark.slow
def test_run_analysis_writes_stability_json_matching_dense_float64(tiny_decoder, tmp_path):
  net, variables, batches = tiny_decoder
  optim = default.get_config().optim
  optim.eps = 1e-6
  cfg = _config(preconditioned_top_k=2, update_sharpness=True)
  summary = run_analysis(
      cfg,
      model=net,
      variables=variables,
      batches=batches,
      out_dir=str(tmp_path),
      optim_config=optim,
      print_fn=lambda _: None,
  )
  with open(os.path.join(tmp_path, "init", "stability.json")) as f:
    rec = json.load(f)
  assert rec == json.loads(json.dumps(summary["stability"]))
  numbers = [v for v in rec.values() if isinstance(v, float)] + rec["preconditioned_values"]
  assert all(np.isfinite(numbers))
  # Independent dense computation: the Hessian and gradient of the token-mean loss over the union of the batches.
  with jax.enable_x64(True):
    model64 = net.clone(config=dataclasses.replace(net.config, dtype=jnp.float64, param_dtype=jnp.float64))
    params = jax.tree.map(lambda x: x.astype(jnp.float64), variables["params"])
    union = {"targets": jnp.concatenate([b["targets"] for b in batches])}
    loss = make_loss_fn(model64)
    h = np.asarray(curvax.dense_hessian(loss, params, union))
    g = np.asarray(jax.flatten_util.ravel_pytree(jax.grad(loss)(params, union))[0])
  d = 1.0 / np.sqrt(np.abs(g) + 1e-6)
  lam_h = np.linalg.eigvalsh(h)[-1]
  lam_p = np.linalg.eigvalsh(d[:, None] * h * d[None, :])[-1]
  assert abs(rec["lambda_max"] - lam_h) <= rec["lambda_max_bound"] + 1e-8 * abs(lam_h)
  assert abs(rec["preconditioned_lambda_max"] - lam_p) <= rec["preconditioned_lambda_max_bound"] + 1e-8 * lam_p
  assert rec["preconditioned_lambda_max"] == pytest.approx(lam_p, rel=1e-6)
  assert rec["max_stable_lr_gd"] == pytest.approx(2 / rec["lambda_max"], rel=1e-12)
  assert rec["max_stable_lr_adam"] == pytest.approx(38 / rec["preconditioned_lambda_max"], rel=1e-12)
  u = g / (np.abs(g) + 1e-6)
  assert rec["update_sharpness"] == pytest.approx(u @ h @ u / (u @ u), rel=1e-8)
  assert rec["first_step_critical_lr"] == pytest.approx(2 * (g @ u) / (u @ h @ u), rel=1e-8)
  assert rec["beta1"] == 0.9 and rec["eps"] == 1e-6 and rec["operator"] == "hessian"


@pytest.mark.slow
def test_edge_predictors_match_the_dense_gauss_newton_and_each_batchs_rayleigh_quotient(tiny_decoder, tmp_path):
  """analysis.edge_predictors: λ_max of the Gauss–Newton (within its residual bound of the dense GGN's, float64) and
  the batch sharpness, the mean over the analysis batches of g_bᵀH_bg_b/‖g_b‖² (dense per batch); no Adam needed."""
  net, variables, batches = tiny_decoder
  run_analysis(
      _config(top_k=0, edge_predictors=True),
      model=net,
      variables=variables,
      batches=batches,
      out_dir=str(tmp_path),
      print_fn=lambda _: None,
  )
  with open(os.path.join(tmp_path, "init", "stability.json")) as f:
    rec = json.load(f)
  with jax.enable_x64(True):
    model64 = net.clone(config=dataclasses.replace(net.config, dtype=jnp.float64, param_dtype=jnp.float64))
    params = jax.tree.map(lambda x: x.astype(jnp.float64), variables["params"])
    loss = make_loss_fn(model64)
    union = {"targets": jnp.concatenate([b["targets"] for b in batches])}
    ggn = curvax.dense_matrix(ggn_vp_fn(make_logits_fn(model64), params, union))
    quotients = []
    for b in batches:
      h = np.asarray(curvax.dense_hessian(loss, params, b))
      g = np.asarray(jax.flatten_util.ravel_pytree(jax.grad(loss)(params, b))[0])
      quotients.append(g @ h @ g / (g @ g))
  lam = np.linalg.eigvalsh(np.asarray(ggn))[-1]
  assert abs(rec["ggn_lambda_max"] - lam) <= rec["ggn_lambda_max_bound"] + 1e-8 * lam
  np.testing.assert_allclose(rec["batch_sharpness_per_batch"], quotients, rtol=1e-8)
  assert rec["batch_sharpness"] == pytest.approx(np.mean(quotients), rel=1e-8) and rec["operator"] == "hessian"
  assert "lambda_max" not in rec  # the Adam predictors were not asked for


@pytest.mark.parametrize(
    "overrides,optim,match",
    [
        (
            dict(preconditioned_top_k=-1),
            {},
            r"config.analysis.preconditioned_top_k=-1 is invalid; valid: an integer >= 0",
        ),
        (
            dict(preconditioned_top_k=5, lanczos_steps=4),
            {},
            r"config.analysis.preconditioned_top_k=5 contradicts config.analysis.lanczos_steps=4",
        ),
        (dict(update_sharpness="yes"), {}, r"config.analysis.update_sharpness='yes' is invalid; valid: True or False"),
        (dict(update_sharpness=True), dict(b1=1.0), r"config.optim.b1=1.0 is invalid; valid: a number in \[0, 1\)"),
        (dict(preconditioned_top_k=1), dict(eps=-1e-8), r"config.optim.eps=-1e-08 is invalid; valid: a number >= 0"),
        (dict(update_sharpness=True), None, r"pass run_analysis\(optim_config=config.optim\)"),
    ],
)
def test_bad_values_raise_before_compute(tiny_decoder, tmp_path, overrides, optim, match):
  net, variables, batches = tiny_decoder
  optim_config = None if optim is None else {**default.get_config().optim.to_dict(), **optim}
  with count_compiles() as compiles, pytest.raises(ValueError, match=match):
    run_analysis(
        _config(**overrides),
        model=net,
        variables=variables,
        batches=batches,
        out_dir=str(tmp_path),
        optim_config=optim_config,
    )
  assert not compiles and not os.path.exists(os.path.join(tmp_path, "init"))


@pytest.mark.slow
def test_mean_gradient_with_weights_reads_nothing_from_tuple_batches():
  """With `weights=`, batches are any pytrees, as in curvax: (x, y) tuples with label 0, no "targets" key; the
  gradient is the weighted average of the per-batch gradients (float64)."""
  from tests import curvax_mlp as mlp  # noqa: PLC0415

  with jax.enable_x64(True):
    params = mlp.init_params(0)
    batches = [mlp.make_batch(1), mlp.make_batch(2, rows=4)]
    got = stability.mean_gradient(mlp.loss_fn, params, batches, weights=[3.0, 1.0])
    want = jax.tree.map(lambda a, b: 0.75 * a + 0.25 * b, *(jax.grad(mlp.loss_fn)(params, batch) for batch in batches))
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
      np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    one = stability.mean_gradient(mlp.loss_fn, params, batches[0], weights=[1.0])  # a tuple is one batch
    for g, w in zip(jax.tree.leaves(one), jax.tree.leaves(jax.grad(mlp.loss_fn)(params, batches[0]))):
      np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
