"""Tests for analysis/gradients.py and analysis/signal.py: numbers against direct computations and closed forms."""

import jax
import numpy as np
import pytest

from analysis.gradients import WEIGHT_ROLES, aggregate_grad_norms, grad_norm_profile, per_layer_grad_norms
from analysis.signal import signal_profile, signal_records
from models import get_model
from tests import tiny
from train.loss import make_loss_fn

VOCAB = 11


def _tiny(**kw):
  return tiny.model_config(**{"vocab_size": VOCAB, "num_encoder_layers": 2, "max_len": 8, **kw})


@pytest.fixture(scope="module")
def batch():
  return tiny.batch(2, 6, 5, vocab=VOCAB, target_pad=2)


@pytest.fixture(scope="module")
def pre_ln(batch):
  model = get_model(_tiny(norm_position="pre"))
  variables = jax.jit(model.init)(jax.random.key(0), batch)
  return model, variables


def test_grad_norms_equal_direct_gradient(pre_ln, batch):
  model, variables = pre_ln
  loss_fn = make_loss_fn(model)
  records = per_layer_grad_norms(loss_fn, variables["params"], batch, model=model)
  grads = jax.jit(jax.grad(loss_fn))(variables["params"], batch)
  flat = {"/".join(str(k.key) for k in path): g for path, g in jax.tree_util.tree_leaves_with_path(grads)}
  assert {r["path"] for r in records} == set(flat)
  scale = max(r["norm"] for r in records)
  for r in records:
    np.testing.assert_allclose(
        r["norm"], np.sqrt(np.sum(np.square(np.asarray(flat[r["path"]], np.float64)))), rtol=1e-5, atol=1e-6 * scale
    )
  mlp_out = [r for r in records if r["role"] == "mlp_out"]
  assert sorted((r["stack"], r["layer"]) for r in mlp_out) == [("decoder", 0), ("encoder", 0), ("encoder", 1)]
  weights_only = per_layer_grad_norms(loss_fn, variables["params"], batch, model=model, roles=WEIGHT_ROLES)
  assert {r["role"] for r in weights_only} <= set(WEIGHT_ROLES)
  assert len(weights_only) == sum(r["role"] in WEIGHT_ROLES for r in records) == 1 + 3 * 6 + 4  # emb, 3 layers, x-attn
  with pytest.raises(ValueError, match="valid roles"):
    per_layer_grad_norms(loss_fn, variables["params"], batch, model=model, roles=("kernel",))


def test_aggregate_over_seeds_and_batches(pre_ln, batch):
  model, variables = pre_ln
  loss_fn = make_loss_fn(model)
  other = jax.tree.map(lambda x: 1.5 * x + 0.01, variables["params"])  # a second parameter point
  prof = grad_norm_profile(loss_fn, [variables["params"], other], [batch], model=model)
  assert len(prof["per_pair"]) == 2
  by_pair = [{r["path"]: r["norm"] for r in p["records"]} for p in prof["per_pair"]]
  for agg in prof["aggregate"]:
    v = np.array([d[agg["path"]] for d in by_pair])
    np.testing.assert_allclose(
        [agg["norm_mean"], agg["norm_std"], agg["norm_min"], agg["norm_max"]],
        [v.mean(), v.std(), v.min(), v.max()],
        rtol=1e-12,
    )
    assert agg["count"] == 2
  with pytest.raises(ValueError, match="record_lists is empty"):
    aggregate_grad_norms([])


def _intermediates(model, variables, batch, jit=False):
  apply = lambda v, b: model.apply(v, b, mutable=["intermediates"])
  _, state = (jax.jit(apply) if jit else apply)(variables, batch)
  return jax.device_get(state["intermediates"])


def test_signal_records_equal_hand_computation(pre_ln, batch):
  model, variables = pre_ln
  inter = _intermediates(model, variables, batch, jit=True)
  records = signal_records(inter, batch)
  assert [r["second_moment_out"] for r in signal_profile(model, variables, batch)] == pytest.approx(
      [r["second_moment_out"] for r in records], rel=1e-6
  )
  rec = {(r["stack"], r["layer"], r["sublayer"]): r for r in records}
  m = np.asarray(batch["inputs"]) > 0  # encoder positions
  enc = inter["encoder"]
  x0 = np.asarray(enc["stream_0"][0], np.float64)[m]  # [valid positions, D]
  for layer, sub in ((0, "self_attn"), (1, "mlp")):
    lt = enc[f"layer_{layer}"]
    x_in, f, x_out = (np.asarray(lt[f"{sub}_{k}"][0], np.float64)[m] for k in ("residual_in", "branch", "residual_out"))
    r = rec[("encoder", layer, sub)]
    np.testing.assert_allclose(r["second_moment_in"], np.mean(x_in**2), rtol=1e-6)
    np.testing.assert_allclose(r["branch_ratio"], np.mean(f**2) / np.mean(x_in**2), rtol=1e-6)
    np.testing.assert_allclose(r["x0_coefficient"], np.sum(x_out * x0) / np.sum(x0 * x0), rtol=1e-6)
    np.testing.assert_allclose(
        r["x0_cosine"], np.sum(x_out * x0) / np.linalg.norm(x_out) / np.linalg.norm(x0), rtol=1e-6
    )
  # Pre-LN: x_1 = x_0 + F(Norm(x_0)) exactly, so the coefficient of x_0 is 1 + <F, x_0>/<x_0, x_0>.
  f0 = np.asarray(enc["layer_0"]["self_attn_branch"][0], np.float64)[m]
  np.testing.assert_allclose(
      rec[("encoder", 0, "self_attn")]["x0_coefficient"], 1.0 + np.sum(f0 * x0) / np.sum(x0 * x0), rtol=1e-6
  )
  np.testing.assert_allclose(
      rec[("decoder", 0, "cross_attn")]["attn_entropy"],
      inter["decoder"]["layer_0"]["cross_attn"]["entropy"][0],
      rtol=1e-6,
  )
  assert rec[("decoder", 0, "mlp")]["num_positions"] == int(np.sum(np.asarray(batch["targets"]) > 0))
  # Padding is excluded: changing the stream at padded positions leaves the records unchanged.
  enc["stream_0"] = (np.where(m[..., None], enc["stream_0"][0], 1e3),)
  assert (
      signal_records(inter, batch)[0]["second_moment_out"] == rec[("encoder", None, "embedding")]["second_moment_out"]
  )


@pytest.mark.slow
def test_signal_closed_forms_rezero_and_post_ln(batch):
  """ReZero (α = 0 at init): x_out = x_in, so the coefficient and cosine of x_0 are exactly 1 in every layer.
  Post-LN with unit gain and zero bias: E[x_out²] = var/(var + ε) ≈ 1 at every sublayer output."""
  for kw, check in ((dict(norm_position="pre", residual="rezero"), "rezero"), (dict(norm_position="post"), "post")):
    model = get_model(_tiny(**kw))
    variables = model.init(jax.random.key(0), batch)
    for r in signal_records(_intermediates(model, variables, batch), batch):
      if r["layer"] is None:
        continue
      if check == "rezero":
        np.testing.assert_allclose([r["x0_coefficient"], r["x0_cosine"]], [1.0, 1.0], rtol=1e-6)
      else:
        np.testing.assert_allclose(r["second_moment_out"], 1.0, atol=1e-4)
