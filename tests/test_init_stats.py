"""analysis/init_stats.py, the init statistics the claims read: realized parameter statistics against numpy and the
truncated normal's closed forms, and the MLP's second moments against their mean-field closed forms."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import init as init_lib
import models
from analysis import init_stats
from init.math import truncated_normal_std_factor


def test_param_statistics_match_numpy_and_the_truncation_closed_form():
  mc = models.ModelConfig.from_config(
      {"preset": "tiny", "arch": "encoder", "num_encoder_layers": 1, "d_model": 64, "num_heads": 4, "d_ff": 256},
      vocab_size=300,
  )
  model = models.get_model(mc)
  batch = {"targets": jnp.ones((2, 8), jnp.int32)}
  params = init_lib.init_params({"scheme": "bert", "std": 0.02}, model, jax.random.key(0), batch)["params"]
  with jax.enable_x64(True):
    stats = init_stats.param_statistics(jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params), model)
  leaves = jax.tree.leaves(params)
  assert len(stats) == len(leaves)
  for s, leaf in zip(stats, leaves):
    x = np.asarray(leaf, np.float64).ravel()
    assert s["n"] == x.size and s["shape"] == list(np.shape(leaf))
    assert s["mean"] == pytest.approx(x.mean(), abs=1e-12) and s["std"] == pytest.approx(x.std(), rel=1e-9)
    assert s["max_abs"] == pytest.approx(np.abs(x).max(), rel=1e-12)
    if s["std"] > 0:
      c = x - x.mean()
      kurt = np.mean(c**4) / np.mean(c**2) ** 2
      assert s["kurtosis"] == pytest.approx(kurt, rel=1e-9)
      assert s["std_error"] == pytest.approx(x.std() * math.sqrt((kurt - 1) / (4 * x.size)), rel=1e-9)
  kernels = [s for s in stats if s["role"] == "mlp_in"]
  (k,) = kernels
  assert (k["fan_in"], k["fan_out"]) == (64, 256)
  # A ±2σ truncated normal: std 0.8796σ, kurtosis 2.36 (closed forms), every |x| ≤ 2σ.
  assert k["std"] == pytest.approx(0.02 * truncated_normal_std_factor(), rel=0.02) and k["max_abs"] <= 0.04
  assert k["kurtosis"] == pytest.approx(2.36, abs=0.1)


@pytest.mark.slow
def test_mlp_second_moments_follow_the_mean_field_closed_forms():
  # ReLU with LeCun init halves E[x²] per layer: q_l = 2^{-l} exactly in mean field; SELU keeps q = 1.
  assert init_stats.mean_field("relu", 5) == pytest.approx([2.0**-l for l in range(1, 6)], rel=1e-12)
  assert init_stats.mean_field("selu", 3) == pytest.approx([1.0] * 3, abs=1e-4)
  assert init_stats.fixed_point_slope("relu") == pytest.approx(1.0, abs=1e-9)  # homogeneous: neutral
  out = init_stats.mlp_second_moments("relu", width=512, depth=4, rows=128, draws=16, seed=0)
  per_draw = np.asarray(out["second_moment_per_draw"])
  assert per_draw.shape == (16, 4) and len(set(per_draw[:, 0])) == 16  # independent draws
  # A draw's ln E[x_l²] random-walks with variance ~5l/width; 16 draws: std of the mean ≈ 0.05 at l = 4,
  # so 0.2 = 4σ.
  np.testing.assert_allclose(per_draw.mean(0), [2.0**-l for l in range(1, 5)], rtol=0.2)
