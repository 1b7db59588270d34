"""train/schedule_free.py: schedule-free AdamW against optax called directly and against a float64 transcription of
Defazio et al. 2024's algorithm (warmup, weights c = γ²/Σγ², decay at y), the evaluation point x, the peak lr as
state, and the config errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from optax import contrib

from configs import default
from train import optim, optim_config, schedule_free
from train.state import TrainState


def _cfg(**overrides):
  cfg = default.get_config().optim
  cfg.update({"name": "schedule_free_adamw", "schedule": "constant", "warmup_steps": 0, "learning_rate": 0.05})
  cfg.update(overrides)
  return cfg


def _params():
  return {"w": jnp.array([[1.0, -2.0, 0.5], [0.3, 1.5, -1.0]]), "b": jnp.array([1.0, -1.0])}


def _grads(step):
  return jax.tree.map(lambda p: jax.random.normal(jax.random.key(step), p.shape), _params())


def _run(tx, steps, params=None):
  params = _params() if params is None else params
  state, ys = tx.init(params), []
  for step in range(steps):
    u, state = tx.update(_grads(step), state, params)
    params = optax.apply_updates(params, u)
    ys.append(params)
  return ys, state


def test_equals_optax_schedule_free_adamw_without_warmup():
  """5 updates with a constant lr, decay λ = 0.1, β = 0.9, β₂ = 0.98: the same y as `optax.contrib.schedule_free_adamw`
  (to float32 rounding: the peak lr multiplies the unit schedule's step here), and the same x."""
  cfg = _cfg(weight_decay=0.1, b2=0.98, eps=1e-8)
  tx, _ = optim.make_optimizer(cfg)
  ref = contrib.schedule_free_adamw(0.05, b1=0.9, b2=0.98, eps=1e-8, weight_decay=0.1)
  ys, state = _run(tx, 5)
  ref_ys, ref_state = _run(ref, 5)
  for y, ref_y in zip(ys, ref_ys):
    for k in y:
      np.testing.assert_allclose(y[k], ref_y[k], rtol=1e-5, atol=1e-7)
  x, ref_x = schedule_free.eval_params(state, ys[-1]), contrib.schedule_free_eval_params(ref_state, ref_ys[-1])
  for k in x:
    np.testing.assert_allclose(x[k], ref_x[k], rtol=1e-5, atol=1e-6)


def _reference(steps, lr, warmup, b1, b2, eps, decay):
  """Defazio et al. 2024 in float64 (their reference code, r = 0, weight_lr_power 2): y, x, z after each step."""
  y = jax.tree.map(lambda p: np.asarray(p, np.float64), _params())
  z, x = dict(y), dict(y)
  v = {k: np.zeros_like(p) for k, p in y.items()}
  lr_max, weight_sum, out = 0.0, 0.0, []
  for step in range(steps):
    t = step + 1
    g = {k: np.asarray(a, np.float64) for k, a in _grads(step).items()}
    gamma = lr * min(1.0, t / warmup) if warmup else lr
    lr_max = max(lr_max, gamma)
    weight_sum += lr_max**2
    c = lr_max**2 / weight_sum
    for k in y:
      v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
      d = g[k] / (np.sqrt(v[k] / (1 - b2**t)) + eps) + decay * y[k]
      z[k] = z[k] - gamma * d
      x[k] = (1 - c) * x[k] + c * z[k]
      y[k] = (1 - b1) * z[k] + b1 * x[k]
    out.append(({k: a.copy() for k, a in y.items()}, {k: a.copy() for k, a in x.items()}, gamma))
  return out


def test_warmup_steps_and_weights_follow_the_paper_at_the_same_t():
  """A 3-step linear warmup γ_t = η·min(1, t/3): 6 updates equal the float64 transcription of the paper's algorithm
  (z step and weight c_{t+1} = γ_t²/Σγ_i² read at the same 1-based t), x is the γ²-weighted average of the z's, and
  optax's own `schedule_free_adamw(warmup_steps=3)`, which reads the z step one step earlier, makes a zero first
  update where the paper's is −γ₁·d₁."""
  cfg = _cfg(schedule="linear_warmup", warmup_steps=3, weight_decay=0.01, b2=0.99, eps=1e-8)
  tx, _ = optim.make_optimizer(cfg)
  ys, state = _run(tx, 6)
  ref = _reference(6, 0.05, 3, 0.9, 0.99, 1e-8, 0.01)
  for y, (ref_y, _, _) in zip(ys, ref):
    for k in y:
      np.testing.assert_allclose(y[k], ref_y[k], rtol=1e-5, atol=1e-6)
  x = schedule_free.eval_params(state, ys[-1])
  for k in x:
    np.testing.assert_allclose(x[k], ref[-1][1][k], rtol=1e-4, atol=1e-5)
  # x is the weighted average Σ γ_t²·z_{t+1} / Σ γ_t² (z from y and x: z = (y − β·x)/(1 − β)).
  zs = [{k: (y[k] - 0.9 * xx[k]) / 0.1 for k in y} for y, xx, _ in ref]
  w = np.array([g**2 for _, _, g in ref])
  for k in x:
    avg = sum(wi * z[k] for wi, z in zip(w, zs)) / w.sum()
    np.testing.assert_allclose(ref[-1][1][k], avg, rtol=1e-9, atol=1e-12)
  optax_first, _ = _run(contrib.schedule_free_adamw(0.05, warmup_steps=3, b2=0.99, eps=1e-8, weight_decay=0.01), 1)
  for k in optax_first[0]:  # zero up to the rounding of x = (y − (1 − β)·z)/β; the paper's first step is ~γ₁ = η/3
    assert np.abs(np.asarray(optax_first[0][k]) - np.asarray(_params()[k])).max() < 1e-6
    assert np.abs(np.asarray(ys[0][k]) - np.asarray(_params()[k])).min() > 1e-3


def test_evaluation_uses_x_and_the_checkpointed_state_holds_y_and_z():
  """The train state's params are y; its optimizer state holds z; `eval_variables` gives x = (y − (1 − β)·z)/β, which
  differs from y after a step; for any other optimizer it gives the params themselves."""
  tx, _ = optim.make_optimizer(_cfg())
  ys, opt_state = _run(tx, 3)
  (sf,) = [s for s in jax.tree.leaves(opt_state, is_leaf=schedule_free._is_state) if schedule_free._is_state(s)]
  state = TrainState(step=jnp.asarray(3), params=ys[-1], opt_state=opt_state, variables={}, rng=jax.random.key(0))
  x = state.eval_variables()["params"]
  for k in x:
    np.testing.assert_allclose(x[k], (ys[-1][k] - 0.1 * sf.z[k]) / 0.9, rtol=1e-6)
    assert np.abs(np.asarray(x[k]) - np.asarray(ys[-1][k])).max() > 1e-4
  adam, _ = optim.make_optimizer(_cfg(name="adam"))
  plain = state.replace(opt_state=adam.init(ys[-1]))
  assert plain.eval_variables()["params"] is plain.params
  assert state.model_variables()["params"] is state.params


def test_the_peak_lr_is_state_inside_the_wrapper():
  """Two peaks lower to one program (the peak is data, as for the other optimizers), and per-leaf multipliers scale
  the first update exactly (y₁ = z₁ since c₁ = 1)."""
  texts = []
  for lr in (0.05, 0.003):
    tx, _ = optim.make_optimizer(_cfg(learning_rate=lr))
    params = _params()
    texts.append(jax.jit(tx.update).lower(_grads(0), tx.init(params), params).as_text())
  assert texts[0] == texts[1]
  one = lambda m: optim.make_optimizer(_cfg(), lr_multipliers={"w": m, "b": 1.0})[0]
  (base,), _ = _run(one(1.0), 1)
  (scaled,), _ = _run(one(0.25), 1)
  np.testing.assert_allclose(scaled["w"] - _params()["w"], 0.25 * (base["w"] - _params()["w"]), rtol=1e-4)
  np.testing.assert_array_equal(scaled["b"], base["b"])


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        (
            {"schedule": "warmup_cosine", "decay_steps": 100},
            r"config.optim.name='schedule_free_adamw' contradicts config.optim.schedule='warmup_cosine'.*'constant'",
        ),
        ({"b1": 0.0}, r"config.optim.b1=0.0 is invalid; valid: a number in \(0, 1\)"),
    ],
)
def test_bad_config_names_the_keys(overrides, pattern):
  with pytest.raises(ValueError, match=pattern):
    optim_config.validate_optim_config(_cfg(**overrides))
