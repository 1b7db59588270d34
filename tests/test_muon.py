"""train/muon.py: which parameters get Muon (by declared role), its updates against optax called directly, the
first update's closed form with the papers' constants, lr multipliers, and the config errors."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from optax import contrib

import models
from configs import default
from models import ParamRole
from train import config as config_lib
from train import muon, optim, optim_config

D, H, K, F, V = 8, 2, 4, 16, 11
SHAPES = {  # a layer's parameters as the model lays them out (models/attention.py, the MLP, norms, embeddings)
    "emb": ((V, D), "embedding", D, V),
    "q": ((D, H, K), "attn_q", D, H * K),
    "o": ((H, K, D), "attn_out", H * K, D),
    "wi": ((D, F), "mlp_in", D, F),
    "wo": ((F, D), "mlp_out", F, D),
    "scale": ((D,), "norm_scale", D, D),
    "bq": ((H, K), "bias", H, K),
    "head": ((D, V), "head", D, V),
}
ROLES = {k: ParamRole(role, "decoder", 0, "x", fi, fo, k) for k, (_, role, fi, fo) in SHAPES.items()}
MUON_LEAVES = ("q", "o", "wi", "wo")


def _cfg(**overrides):
  cfg = default.get_config().optim
  cfg.update({"name": "muon", "schedule": "linear_warmup", "warmup_steps": 2, "learning_rate": 0.02, **overrides})
  return cfg


def _tree(key):
  keys = jax.random.split(key, len(SHAPES))
  return {k: jax.random.normal(kk, SHAPES[k][0]) for kk, k in zip(keys, SHAPES)}


@pytest.mark.parametrize("gated", [False, True])
def test_muon_gets_the_hidden_matrices_of_a_model_and_adam_the_rest(gated):
  """By declared role on the tiny encoder-decoder: attention q/k/v/out (and gate) and MLP in/out (and a gated MLP's
  gate) are Muon's, each one fan_in × fan_out matrix (its dimension numbers give the role's fans); embeddings,
  norms, biases are AdamW's."""
  c = default.get_config()
  c.model.preset = "tiny"
  if gated:
    c.model.mlp, c.model.attention_gate = "swiglu", True
  mc = dataclasses.replace(models.ModelConfig.from_config(c.model), vocab_size=50)
  roles = models.param_roles(mc)
  is_role = lambda x: isinstance(x, ParamRole)
  labels = muon.labels(roles)
  shapes = jax.tree.leaves(
      models.inventory.boxed_param_shapes(mc), is_leaf=lambda x: isinstance(x, models.roles.Declared)
  )
  seen = {"muon": set(), "adam": set()}
  for r, label, box in zip(jax.tree.leaves(roles, is_leaf=is_role), jax.tree.leaves(labels), shapes, strict=True):
    seen[label].add(r.role)
    if label == "muon":
      shape = box.value.shape
      dims = muon.dimension_numbers(r.role, len(shape))
      fans = (math.prod(shape[a] for a in dims.reduction_axis), math.prod(shape[a] for a in dims.output_axis))
      assert fans == (r.fan_in, r.fan_out), r
  gates = {"attn_gate", "mlp_gate"} if gated else set()
  assert seen["muon"] == {"attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out"} | gates
  assert seen["adam"] == {"embedding", "norm_scale", "norm_bias", "bias"}


@pytest.mark.parametrize("rms", [0.2, 0.0])
@pytest.mark.slow
def test_updates_equal_optax_muon_on_matrices_and_optax_adamw_on_the_rest(rms):
  """4 updates under a 2-step warmup with decay λ: the matrices' updates equal `optax.contrib.muon` (Nesterov, the
  same dimension numbers, `consistent_rms` r or None = Jordan's width scale) and the rest's `optax.adamw`, both on the
  full-peak schedule, to float32 rounding (the project applies the peak after the unit schedule)."""
  cfg = _cfg(weight_decay=0.1, muon_consistent_rms=rms)
  tx, schedule = optim.make_optimizer(cfg, param_roles=ROLES)
  c = optim_config.validate_optim_config(cfg)
  numbers = {k: muon.dimension_numbers(SHAPES[k][1], len(SHAPES[k][0])) if k in MUON_LEAVES else None for k in SHAPES}
  ref_muon = contrib.muon(
      schedule, ns_steps=c.muon_ns_steps, beta=c.muon_beta, eps=c.eps, weight_decay=c.weight_decay, nesterov=True,
      muon_weight_dimension_numbers=numbers, consistent_rms=rms or None,
  )  # fmt: skip
  ref_adam = optax.adamw(schedule, b1=c.b1, b2=c.b2, eps=c.eps, weight_decay=c.weight_decay)
  params = ref = _tree(jax.random.key(0))
  state, muon_state, adam_state = tx.init(params), ref_muon.init(ref), ref_adam.init(ref)
  for step in range(4):
    grads = _tree(jax.random.key(step + 1))
    u, state = tx.update(grads, state, params)
    mu_u, muon_state = ref_muon.update(grads, muon_state, ref)
    ad_u, adam_state = ref_adam.update(grads, adam_state, ref)
    want = {k: mu_u[k] if k in MUON_LEAVES else ad_u[k] for k in SHAPES}
    for k in SHAPES:
      np.testing.assert_allclose(u[k], want[k], rtol=2e-5, atol=1e-8, err_msg=f"{k} at step {step}")
    params, ref = optax.apply_updates(params, u), optax.apply_updates(ref, want)


@pytest.mark.parametrize("rms, scale", [(0.2, 0.2 * math.sqrt(6)), (0.0, math.sqrt(1.5))])
def test_first_update_of_a_rank_one_gradient_is_the_scaled_newton_schulz_fixed_map(rms, scale):
  """A rank-1 gradient g = a·bᵀ on a 4×6 matrix: Nesterov's first M̂ is a positive multiple of g, so Muon's first
  update is −η·s·σ₅·a·bᵀ/(|a||b|), σ₅ five steps of σ ← 3.4445σ − 4.7750σ³ + 2.0315σ⁵ from σ₀ = 1 (Jordan et al. 2024)
  and s = 0.2·√max(4, 6) (Liu et al. 2025) or √max(1, 6/4) (Jordan et al.)."""
  a, b = jnp.array([1.0, -2.0, 0.5, 3.0]), jnp.array([0.5, 1.0, -1.0, 2.0, 0.0, 1.5])
  roles = {"w": ParamRole("mlp_in", "shared", 0, "mlp", 4, 6, "w")}
  tx, _ = optim.make_optimizer(_cfg(schedule="constant", learning_rate=0.1, muon_consistent_rms=rms), param_roles=roles)
  params = {"w": jnp.zeros((4, 6))}
  u, _ = tx.update({"w": jnp.outer(a, b)}, tx.init(params), params)
  sigma = 1.0
  for _ in range(5):
    sigma = 3.4445 * sigma - 4.7750 * sigma**3 + 2.0315 * sigma**5
  want = -0.1 * scale * sigma * np.outer(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
  np.testing.assert_allclose(u["w"], want, atol=1e-4 * np.abs(want).max())  # five float32 matrix quintics
  assert 0.6 < sigma < 1.3  # the quintic's band around 1 (Jordan et al.: S' ~ U(0.5, 1.5))


def test_lr_multipliers_compose_and_mup_or_completep_depth_rule_is_refused():
  """A per-leaf multiplier scales Muon's and AdamW's leaves exactly (0.25, a power of two); µP and CompleteP's depth
  lr rule have no Muon column: resolve names both keys."""
  cfg = _cfg(schedule="constant", weight_decay=0.1)
  params, grads = _tree(jax.random.key(0)), _tree(jax.random.key(1))
  ones = {k: 1.0 for k in SHAPES}
  base_tx, _ = optim.make_optimizer(cfg, param_roles=ROLES, lr_multipliers=ones)
  base, _ = base_tx.update(grads, base_tx.init(params), params)
  tx, _ = optim.make_optimizer(cfg, param_roles=ROLES, lr_multipliers={**ones, "wi": 0.25, "emb": 0.25})
  scaled, _ = tx.update(grads, tx.init(params), params)
  for k in SHAPES:
    np.testing.assert_array_equal(scaled[k], (0.25 if k in ("wi", "emb") else 1.0) * base[k])
  for overrides, match in [
      ({"model.parameterization": "mup"}, r"config.model.parameterization='mup' contradicts config.optim.name='muon'"),
      (
          {"model.residual": "completep", "model.depth_alpha": 0.5, "model.norm_position": "pre"},
          r"config.model.residual='completep' contradicts config.optim.name='muon'",
      ),
  ]:
    config = default.get_config()
    config.optim.name = "muon"
    for dotted, value in overrides.items():
      group, key = dotted.split(".")
      config[group][key] = value
    with pytest.raises(ValueError, match=match):
      config_lib.resolve(config)


@pytest.mark.parametrize(
    "overrides, pattern",
    [
        ({"muon_beta": 1.0}, r"config.optim.muon_beta=1.0 is invalid; valid: a number in \[0, 1\)"),
        ({"muon_ns_steps": 0}, r"config.optim.muon_ns_steps=0 is invalid; valid: an integer >= 1"),
        ({"muon_consistent_rms": -0.2}, r"config.optim.muon_consistent_rms=-0.2 is invalid"),
    ],
)
def test_bad_muon_keys_name_the_key(overrides, pattern):
  with pytest.raises(ValueError, match=pattern):
    optim_config.validate_optim_config(_cfg(**overrides))


def test_muon_without_roles_says_what_to_pass():
  tx, _ = optim.make_optimizer(_cfg(name="adam"))  # the other optimizers need none
  with pytest.raises(ValueError, match=r"optim.name='muon'.*param_roles=models.param_roles"):
    optim.make_optimizer(_cfg())
