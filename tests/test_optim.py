"""train/optim.py, train/optimizers.py and train/optim_config.py: optimizers on a quadratic; multipliers, clipping,
weight-decay mask and config validation. The schedules (train/schedules.py): tests/test_schedules.py."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import default
from models import ParamRole
from train import optim, optim_config, optimizers


def _cfg(**overrides):
  cfg = default.get_config().optim
  cfg.update(overrides)
  return cfg


def _lrs(cfg, counts, total_steps=None):
  schedule = optim.make_schedule(cfg, total_steps=total_steps)
  return [float(schedule(jnp.asarray(c, jnp.int32))) for c in counts]


# ------------------------------------------------------------------------------ optimizers


def _quadratic(params):
  # Diagonal quadratic with different curvatures; a 2-D leaf so adafactor factors it.
  return 0.5 * jnp.sum(jnp.arange(1.0, 7.0).reshape(2, 3) * params["w"] ** 2) + 2.0 * jnp.sum(params["b"] ** 2)


def _params():
  return {"w": jnp.array([[1.0, -2.0, 0.5], [0.3, 1.5, -1.0]]), "b": jnp.array([1.0, -1.0])}


# The toy's roles (what `models.param_roles` gives a model): w a hidden matrix (Muon's), b a bias (AdamW's).
ROLES = {"w": ParamRole("mlp_in", "shared", 0, "mlp", 2, 3, "w"), "b": ParamRole("bias", "shared", 0, "mlp", 2, 2, "b")}


@pytest.mark.parametrize("name", sorted(optimizers.OPTIMIZERS))
def test_every_optimizer_decreases_a_quadratic(name):
  lr = 0.25 if name == "muon" else 0.05  # Muon's update RMS is 0.2·η (Liu et al. 2025), Adam's about η
  cfg = _cfg(name=name, schedule="constant", learning_rate=lr, weight_decay=0.0, adafactor_min_dim_size_to_factor=2)
  tx, _ = optim.make_optimizer(cfg, param_roles=ROLES)
  params = _params()
  state = tx.init(params)
  loss0 = _quadratic(params)
  for _ in range(3):
    grads = jax.grad(_quadratic)(params)
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  assert float(_quadratic(params)) < 0.9 * float(loss0)


def _one_update(cfg, params, lr_multipliers=None, weight_decay_mask=None):
  tx, _ = optim.make_optimizer(
      cfg, lr_multipliers=lr_multipliers, weight_decay_mask=weight_decay_mask, param_roles=ROLES
  )
  grads = jax.grad(_quadratic)(params)
  updates, _ = tx.update(grads, tx.init(params), params)
  return updates


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw", "muon"])
def test_lr_multiplier_scales_update_exactly(name):
  cfg = _cfg(name=name, schedule="constant", learning_rate=0.1, weight_decay=0.01 if name == "adamw" else 0.0)
  params = _params()
  base = _one_update(cfg, params, lr_multipliers={"w": 1.0, "b": 1.0})
  scaled = _one_update(cfg, params, lr_multipliers={"w": 0.25, "b": 1.0})
  # 0.25 is a power of two: the ratio is exact in float32, weight decay included.
  np.testing.assert_array_equal(np.asarray(scaled["w"]), 0.25 * np.asarray(base["w"]))
  np.testing.assert_array_equal(np.asarray(scaled["b"]), np.asarray(base["b"]))
  assert np.all(np.asarray(base["w"]) != 0.0)


def test_lr_multipliers_validation():
  cfg = _cfg(schedule="constant")
  with pytest.raises(ValueError, match=r"lr_multipliers\['w'\]=-1.0"):
    optim.make_optimizer(cfg, lr_multipliers={"w": -1.0, "b": 1.0})
  tx, _ = optim.make_optimizer(cfg, lr_multipliers={"w": 1.0})
  with pytest.raises(ValueError, match="structure of the params"):
    tx.init(_params())


def test_sgd_update_closed_form_with_decay_mask():
  # Plain SGD with decoupled decay λ on w only: Δw = -η(g + λw), Δb = -η g.
  cfg = _cfg(name="sgd", schedule="constant", learning_rate=0.1, momentum=0.0, weight_decay=0.5)
  params = _params()
  updates = _one_update(cfg, params, weight_decay_mask={"w": True, "b": False})
  g = jax.grad(_quadratic)(params)
  np.testing.assert_allclose(updates["w"], -0.1 * (g["w"] + 0.5 * params["w"]), rtol=1e-6)
  np.testing.assert_allclose(updates["b"], -0.1 * g["b"], rtol=1e-6)


@pytest.mark.parametrize("name", optimizers.WEIGHT_DECAY_OPTIMIZERS)
def test_weight_decay_is_decoupled_lr_scaled_and_masked(name):
  # Every optimizer: update(λ) - update(0) = -η·λ·θ on decayed leaves, 0 on masked ones.
  cfg = _cfg(name=name, schedule="constant", learning_rate=0.1, weight_decay=0.0, adafactor_min_dim_size_to_factor=2)
  params = _params()
  mask = {"w": True, "b": False}
  plain = _one_update(cfg, params, weight_decay_mask=mask)
  cfg.weight_decay = 0.5
  decayed = _one_update(cfg, params, weight_decay_mask=mask)
  np.testing.assert_allclose(decayed["w"] - plain["w"], -0.1 * 0.5 * params["w"], rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(decayed["b"], plain["b"])


def test_first_adam_update_is_lr_times_sign():
  # Adam's first bias-corrected update is -η·g/(|g| + ε) ≈ -η·sign(g) (docs/science.md §8: O(η)).
  cfg = _cfg(name="adam", schedule="constant", learning_rate=0.01)
  params = _params()
  updates = _one_update(cfg, params)
  g = jax.grad(_quadratic)(params)
  np.testing.assert_allclose(updates["w"], -0.01 * np.sign(g["w"]), rtol=1e-5)


def test_clipping_bounds_update_norm():
  cfg = _cfg(name="sgd", schedule="constant", learning_rate=0.1, momentum=0.0, grad_clip_norm=0.5)
  params = _params()
  g_norm = float(optax.global_norm(jax.grad(_quadratic)(params)))
  assert g_norm > 0.5
  updates = _one_update(cfg, params)
  np.testing.assert_allclose(float(optax.global_norm(updates)), 0.1 * 0.5, rtol=1e-6)
  cfg.grad_clip_norm = 0.0  # off: the update is the full gradient step
  np.testing.assert_allclose(float(optax.global_norm(_one_update(cfg, params))), 0.1 * g_norm, rtol=1e-6)


def test_sgd_nesterov_second_step_closed_form():
  # Nesterov (optax.trace): m_t = g_t + μ m_{t-1}; direction = g_t + μ m_t.
  cfg = _cfg(name="sgd", schedule="constant", learning_rate=1.0, momentum=0.5, nesterov=True)
  tx, _ = optim.make_optimizer(cfg)
  p = {"w": jnp.ones((2, 3)), "b": jnp.ones(2)}
  state = tx.init(p)
  g1 = jax.tree.map(lambda x: 1.0 * x, p)
  g2 = jax.tree.map(lambda x: 3.0 * x, p)
  _, state = tx.update(g1, state, p)
  u2, _ = tx.update(g2, state, p)
  np.testing.assert_allclose(u2["b"], -(3.0 + 0.5 * (3.0 + 0.5 * 1.0)) * np.ones(2), rtol=1e-6)


def test_optimizer_registry_getter():
  for name in optimizers.OPTIMIZERS:
    assert optimizers.get_optimizer(name) is optimizers.OPTIMIZERS[name]
  with pytest.raises(ValueError, match=r"config.optim.name='lamb' is invalid; valid: .*adafactor"):
    optimizers.get_optimizer("lamb")


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        ({"name": "lion"}, r"optim\.name='lion'.*'adam'"),
        ({"schedule": "step"}, r"optim\.schedule='step'.*'rsqrt'"),
        ({"warmup_steps": -1}, r"optim\.warmup_steps=-1.*integer >= 0"),
        ({"learning_rate": 0.0}, r"optim\.learning_rate=0\.0.*\(0, inf\]"),
        ({"learning_rate": -1e-3}, r"optim\.learning_rate=-0\.001"),
        ({"b2": 1.0}, r"optim\.b2=1\.0"),
        ({"min_lr_ratio": 1.5}, r"optim\.min_lr_ratio=1\.5"),
        ({"grad_clip_norm": -1.0}, r"optim\.grad_clip_norm=-1\.0"),
        ({"weight_decay": 0.1}, r"optim\.weight_decay=0\.1.*'adam'.*adamw"),
        ({"schedule": "warmup_cosine"}, r"optim\.decay_steps=0.*total_steps"),
        ({"schedule": "warmup_cosine", "decay_steps": 1000}, r"optim\.decay_steps=1000.*> optim"),
        ({"adafactor_clipping_threshold": 0.5}, r"optim\.adafactor_clipping_threshold=0\.5"),
    ],
)
def test_bad_config_raises_naming_key(overrides, pattern):
  cfg = _cfg(**overrides)
  with pytest.raises(ValueError, match=pattern):
    optim_config.validate_optim_config(cfg)
  with pytest.raises(ValueError, match=pattern):  # make_optimizer validates before building
    optim.make_optimizer(cfg)


def test_unknown_key_and_total_steps_horizon():
  cfg = _cfg()
  cfg.unlock()
  cfg.warmup = 10
  with pytest.raises(ValueError, match=r"config.optim\.warmup=10 is invalid \(unknown key\); valid: a key of "):
    optim_config.validate_optim_config(cfg)
  cfg = _cfg(schedule="warmup_linear_decay", warmup_steps=2, min_lr_ratio=0.0)
  optim_config.validate_optim_config(cfg, total_steps=10)  # total_steps supplies the horizon
  np.testing.assert_allclose(_lrs(cfg, [9], total_steps=10), [0.0], atol=1e-7)


def test_default_config_is_valid():
  optim_config.validate_optim_config(default.get_config().optim)


@pytest.mark.parametrize(
    "schedule,extra",
    [
        ("linear_warmup", {"warmup_steps": 3}),
        ("rsqrt", {"warmup_steps": 3, "rsqrt_d_model": 64}),
        ("warmup_cosine", {"warmup_steps": 2, "decay_steps": 6, "min_lr_ratio": 0.1}),
    ],
)
@pytest.mark.parametrize("name", ["adam", "adamw", "sgd", "adafactor"])
def test_the_peak_lr_is_optimizer_state_and_the_updates_are_the_schedules(name, schedule, extra):
  """The peak lr is a float32 of the optimizer state, not a constant of the compiled update: the two peaks' updates
  lower to the same program text (so they share a compilation and its persistent-cache entry), and over 5 steps the
  updates equal those of the optimizer built directly on the peak's schedule (the formulation before the peak became
  state), to float32 rounding, weight decay included."""
  decay = 0.0 if name == "adam" else 0.01
  cfgs = [
      _cfg(name=name, schedule=schedule, learning_rate=lr, weight_decay=decay, adafactor_min_dim_size_to_factor=2)
      for lr in (0.1, 0.003)
  ]
  for cfg in cfgs:
    for key, value in extra.items():
      setattr(cfg, key, value)
  programs = []
  for cfg in cfgs:
    tx, sched = optim.make_optimizer(cfg, total_steps=6)
    reference = optimizers.get_optimizer(name)(
        optim.make_schedule(cfg, total_steps=6), optim_config.validate_optim_config(cfg)
    )
    state, ref_state = tx.init(_params()), reference.init(_params())
    (peak,) = [s for s in state if isinstance(s, optim.PeakLRState)]
    assert peak.peak.dtype == jnp.float32 and float(peak.peak) == np.float32(cfg.learning_rate)
    params = ref_params = _params()
    update = jax.jit(tx.update)
    programs.append(update.lower(jax.grad(_quadratic)(params), state, params).as_text())
    for _ in range(5):
      u, state = update(jax.grad(_quadratic)(params), state, params)
      ref_u, ref_state = reference.update(jax.grad(_quadratic)(ref_params), ref_state, ref_params)
      for k in u:
        np.testing.assert_allclose(u[k], ref_u[k], rtol=2e-5, atol=1e-9 * cfg.learning_rate)
      params, ref_params = optax.apply_updates(params, u), optax.apply_updates(ref_params, ref_u)
    assert float(sched(2)) == pytest.approx(float(optim.make_schedule(cfg, total_steps=6)(2)), rel=1e-7)
  assert programs[0] == programs[1]  # before the peak became state, the peak was a constant of each program


# ------------------------------------------------------------------- the warmup question's options


@pytest.mark.parametrize("name", ["adam", "adamw", "radam"])
def test_gi_adam_is_optax_started_from_nu0_equal_g0_squared(name):
  """GI-Adam (Kalra & Barkeshli 2024 §6): 4 updates on the quadratic equal those of optax's own direction
  (`scale_by_adam` / `scale_by_radam`) whose state was started by hand from ν₀ = g₀² (the first gradient), times the
  peak lr; for Adam the first update is √(1 − β₂)·η·sign(g₀) (ν̂₁ = g₀²/(1 − β₂)), Adam's own being η·sign(g₀)."""
  lr, b2 = 0.1, 0.98
  cfg = _cfg(name=name, schedule="constant", learning_rate=lr, b2=b2, eps=1e-12, second_moment_init="gradient")
  tx, _ = optim.make_optimizer(cfg)
  direction = (optax.scale_by_radam if name == "radam" else optax.scale_by_adam)(b1=cfg.b1, b2=b2, eps=1e-12)
  params = ref_params = _params()
  g0 = jax.grad(_quadratic)(params)
  state = tx.init(params)
  ref_state = direction.init(params)._replace(nu=jax.tree.map(jnp.square, g0))
  for step in range(4):
    u, state = tx.update(jax.grad(_quadratic)(params), state, params)
    ref_u, ref_state = direction.update(jax.grad(_quadratic)(ref_params), ref_state, ref_params)
    ref_u = jax.tree.map(lambda x: -lr * x, ref_u)
    for k in u:
      np.testing.assert_allclose(u[k], ref_u[k], rtol=1e-5, atol=1e-9)
    if step == 0 and name != "radam":
      expected = -lr * math.sqrt(1 - b2) * np.sign(g0["w"])
      np.testing.assert_allclose(u["w"], expected, rtol=1e-5)
    params, ref_params = optax.apply_updates(params, u), optax.apply_updates(ref_params, ref_u)
  plain, _ = optim.make_optimizer(_cfg(name=name, schedule="constant", learning_rate=lr, b2=b2, eps=1e-12))
  u_plain, _ = plain.update(g0, plain.init(_params()), _params())
  if name != "radam":  # RAdam's first steps are SGD-like, ν unused
    np.testing.assert_allclose(u_plain["w"], -lr * np.sign(g0["w"]), rtol=1e-5)


@pytest.mark.parametrize("b2,steps", [(0.98, 100), (0.999, 2000), (0.95, 40)])
def test_untuned_warmup_lasts_two_over_one_minus_beta2(b2, steps):
  """Ma & Yarats 2021 §4: ω_t = min(1, (1 − β₂)·t/2), a linear warmup of 2/(1 − β₂) updates, derived from optim.b2
  (warmup_steps 0 or that value; another value is a contradiction naming both keys)."""
  cfg = optim_config.validate_optim_config(_cfg(untuned_warmup=True, b2=b2, warmup_steps=0, learning_rate=1.0))
  assert cfg.warmup_steps == steps
  counts = [0, steps // 4 - 1, steps - 1, 3 * steps]
  expected = [min(1.0, (1 - b2) * (c + 1) / 2) for c in counts]
  np.testing.assert_allclose(_lrs(cfg, counts), expected, rtol=1e-4)  # float32 schedule
  assert optim_config.validate_optim_config(cfg).warmup_steps == steps  # idempotent
  with pytest.raises(ValueError, match=r"config.optim.untuned_warmup=True contradicts config.optim.warmup_steps=7"):
    optim_config.validate_optim_config(_cfg(untuned_warmup=True, b2=b2, warmup_steps=7))


def test_second_moment_init_errors_name_the_keys():
  with pytest.raises(
      ValueError, match=r"config.optim.second_moment_init='ones' is invalid; valid: \['zero', 'gradient'"
  ):
    optim_config.validate_optim_config(_cfg(second_moment_init="ones"))
  with pytest.raises(ValueError, match=r"second_moment_init='gradient' contradicts config.optim.name='sgd'"):
    optim_config.validate_optim_config(_cfg(second_moment_init="gradient", name="sgd"))


# ------------------------------------------------------------------------------ what decays (optim.weight_decay_on)


@pytest.mark.parametrize("name", optimizers.WEIGHT_DECAY_OPTIMIZERS)
def test_weight_decay_on_weights_leaves_the_bias_undecayed_and_all_decays_both(name):
  """Without an explicit mask the optimizer reads `optim.weight_decay_on` on the roles: 'weights' decays w (a hidden
  matrix) alone, 'all' both, each by −η·λ·θ."""
  cfg = _cfg(name=name, schedule="constant", learning_rate=0.1, weight_decay=0.0, adafactor_min_dim_size_to_factor=2)
  params = _params()
  plain = _one_update(cfg, params)
  cfg.weight_decay = 0.5
  for on, decays_b in (("weights", False), ("all", True)):
    cfg.weight_decay_on = on
    decayed = _one_update(cfg, params)
    np.testing.assert_allclose(decayed["w"] - plain["w"], -0.05 * params["w"], rtol=1e-5, atol=1e-7)
    want_b = plain["b"] - 0.05 * params["b"] if decays_b else plain["b"]
    np.testing.assert_allclose(decayed["b"], want_b, rtol=1e-5, atol=1e-7)


def test_a_models_weights_decay_and_its_norms_biases_and_residual_scales_do_not():
  """On a tiny Pre-LN Transformer with biases and LayerScale's residual scales (ε = 0.1), through the trainer's own builder
  (`train.programs.optimizer`): one AdamW update at zero gradient moves exactly the decayed leaves, by −η·λ·θ
  (Adam's part is 0/(0 + ε)); which leaves those are is read independently of the roles, by Flax's leaf names: the
  linear maps' `kernel`s and the `embedding` table decay; norms' `scale`/`bias`, the linear biases (multi-head ones of
  2 axes among them) and LayerScale's `gamma` do not."""
  from tests import tiny  # noqa: PLC0415 (the tiny model)
  from train import programs  # noqa: PLC0415 (the trainer's optimizer builder)

  config = tiny.model_config(use_bias=True, residual="layerscale", layerscale_init=0.1)
  _, variables = tiny.init(config, tiny.batch())
  params = variables["params"]
  cfg = _cfg(name="adamw", schedule="constant", learning_rate=0.1, weight_decay=0.5, weight_decay_on="weights")
  tx, _ = programs.optimizer(optim_config.OptimConfig.from_config(cfg), config, params, 10)
  updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
  moved = jax.tree.map(lambda u, p: bool(jnp.any(u != 0)), updates, params)
  flat = jax.tree_util.tree_leaves_with_path(params)
  weight = lambda path: path[-1].key in ("kernel", "embedding")
  assert {path[-1].key for path, _ in flat} == {"kernel", "embedding", "bias", "scale", "gamma"}
  for (path, p), m, u in zip(flat, jax.tree.leaves(moved), jax.tree.leaves(updates)):
    assert m == weight(path), jax.tree_util.keystr(path)
    np.testing.assert_allclose(u, -0.05 * p if m else 0.0, rtol=1e-6, atol=1e-8)
  assert optim.decay_mask("all", None) is None


def test_weight_decay_on_is_validated_with_its_choices():
  with pytest.raises(
      ValueError, match=r"config\.optim\.weight_decay_on='norms' is invalid; valid: \['all', 'weights'\]"
  ):
    optim_config.OptimConfig.from_config(_cfg(weight_decay_on="norms"))
