"""train/loss.py: the z-loss term (Chowdhery et al. 2022, PaLM §5; Wortsman et al. 2023 §3.2) against a hand
computation of its value and gradient, and the train step's loss and update with `train.z_loss` against the
cross-entropy step plus the hand-computed term."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import models
from configs import default
from tests import tiny
from train import config as config_lib
from train import step as step_lib
from train.loss import token_cross_entropy, token_z_loss
from train.state import TrainState


def _logits_and_targets():
  logits = jax.random.normal(jax.random.key(0), (2, 3, 5), jnp.float64) * 3.0 + 1.5
  targets = jnp.asarray([[1, 2, 0], [4, 0, 0]])  # 3 real tokens, 3 padding
  return logits, targets


def test_z_loss_value_and_gradient_are_the_hand_computation():
  """Σ_t log²Z_t over non-padding tokens, Z_t = Σ_v exp(logit_tv); ∂/∂logit_tv = 2·log Z_t·softmax_tv (0 at
  padding)."""
  with jax.enable_x64():
    logits, targets = _logits_and_targets()
    x = np.asarray(logits)
    log_z = np.log(np.exp(x).sum(-1))
    w = (np.asarray(targets) > 0).astype(float)
    np.testing.assert_allclose(float(token_z_loss(logits, targets)), np.sum(w * log_z**2), rtol=1e-12)
    softmax = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    hand = 2.0 * (w * log_z)[..., None] * softmax
    np.testing.assert_allclose(jax.grad(token_z_loss)(logits, targets), hand, rtol=1e-12, atol=1e-15)
    assert float(token_z_loss(logits - jnp.asarray(log_z)[..., None], targets)) == pytest.approx(0.0, abs=1e-20)


@pytest.mark.slow
def test_train_step_adds_z_loss_times_its_mean_to_the_loss_and_its_gradient():
  """With SGD at lr 1 the update is −∇: the z-loss step's loss and update are the plain step's plus c·mean log²Z
  and −c·∇_θ mean log²Z, the latter the hand gradient (2·log Z·softmax) pulled back through the model."""
  c = 1e-2
  mc = tiny.model_config(arch="decoder", num_decoder_layers=1)
  model = models.get_model(mc)
  b = {"targets": tiny.batch()["targets"]}
  params = model.init(jax.random.key(1), b)["params"]
  tx = optax.sgd(1.0)
  state = TrainState(step=jnp.asarray(0), params=params, opt_state=tx.init(params), variables={}, rng=jax.random.key(2))
  plain, m_plain = jax.jit(step_lib.make_train_step(model, tx))(state, b)
  with_z, m_z = jax.jit(step_lib.make_train_step(model, tx, z_loss=c))(state, b)
  logits, pullback = jax.vjp(lambda p: model.apply({"params": p}, b), params)
  targets = b["targets"]
  count = float(jnp.sum(targets > 0))
  x = np.asarray(logits, np.float64)
  log_z = np.log(np.exp(x).sum(-1))
  w = (np.asarray(targets) > 0).astype(float)
  assert float(m_z["loss"]) == pytest.approx(float(m_plain["loss"]) + c * np.sum(w * log_z**2) / count, rel=1e-5)
  softmax = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
  hand_dlogits = c * 2.0 * (w * log_z)[..., None] * softmax / count
  (hand_grad,) = pullback(jnp.asarray(hand_dlogits, jnp.float32))
  for p_plain, p_z, g in zip(jax.tree.leaves(plain.params), jax.tree.leaves(with_z.params), jax.tree.leaves(hand_grad)):
    np.testing.assert_allclose(p_plain - p_z, g, rtol=1e-4, atol=1e-6)  # float32 parameters of size ~1
  ce, _ = token_cross_entropy(logits, targets)
  assert float(m_plain["loss"]) == pytest.approx(float(ce) / count, rel=1e-6)


@pytest.mark.parametrize("value", [-1e-4, float("inf")])
def test_bad_z_loss_is_named(value):
  config = default.get_config()
  config.train.z_loss = value
  with pytest.raises(ValueError, match=r"config.train.z_loss=.* is invalid; valid: a finite number >= 0"):
    config_lib.resolve(config)
