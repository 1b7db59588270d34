"""init.initializers: realized std of every registry entry, explicit fans, determinism, errors."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from init import initializers as inits

# Hyper-parameters per registry key. Non-default values where they exist, so a dropped hparam shows.
HPARAMS = {
    "zeros": {},
    "ones": {},
    "constant": {"value": 0.3},
    "normal": {"std": 0.05},
    "uniform": {"bound": 0.1},
    "truncated_normal": {"std": 0.02},
    "truncated_normal_tf": {"std": 0.02},
    "truncated_normal_3sigma": {"std": 0.02},
    "xavier_uniform": {"gain": 0.7},
    "xavier_normal": {"gain": 1.3},
    "lecun_uniform": {},
    "lecun_normal": {},
    "he_uniform": {},
    "he_normal": {},
    "orthogonal": {"gain": 1.5},
}
CONSTANT_VALUE = {"zeros": 0.0, "ones": 1.0, "constant": 0.3}
RANDOM_KEYS = sorted(set(HPARAMS) - set(CONSTANT_VALUE))
KEY = jax.random.key(0)
# Multi-head DenseGeneral kernels: q/k/v [d, h, k] and out [h, k, d], d = 256, h·k = 128.
D, H, K = 256, 4, 32
QKV_SHAPE, OUT_SHAPE = (D, H, K), (H, K, D)


def test_every_registry_key_is_covered():
  assert set(HPARAMS) == set(inits.INITIALIZERS)


def _sample(name, shape, fan_in, fan_out, key=KEY, dtype=jnp.float32):
  init = inits.get_initializer(name, **HPARAMS[name])
  return init(key, shape, dtype, fan_in=fan_in, fan_out=fan_out)


# Closed forms written out independently of init.math, at fan_in = 256, fan_out = 128 (docs/science.md §1-2).
EXPECTED_STD_256_128 = {
    "zeros": 0.0,
    "ones": 0.0,
    "constant": 0.0,
    "normal": 0.05,
    "uniform": 0.1 / math.sqrt(3),
    "truncated_normal": 0.02,
    "truncated_normal_tf": 0.02 * 0.87962566,
    # √(1 − 6φ(3)/(2Φ(3) − 1)) with φ(3) = e^{-4.5}/√(2π), Φ(3) = (1 + erf(3/√2))/2: 0.98658.
    "truncated_normal_3sigma": 0.02
    * math.sqrt(1 - 6 * math.exp(-4.5) / math.sqrt(2 * math.pi) / math.erf(3 / math.sqrt(2))),
    "xavier_uniform": 0.7 * math.sqrt(2 / 384),
    "xavier_normal": 1.3 * math.sqrt(2 / 384),
    "lecun_uniform": 1 / 16,
    "lecun_normal": 1 / 16,
    "he_uniform": math.sqrt(2 / 256),
    "he_normal": math.sqrt(2 / 256),
    "orthogonal": 1.5 / 16,  # gain·√(min/(fan_in·fan_out)) = gain/√max
}


@pytest.mark.parametrize("name", sorted(HPARAMS))
def test_realized_std_closed_forms(name):
  got = inits.realized_std(name, fan_in=256, fan_out=128, **HPARAMS[name])
  assert got == pytest.approx(EXPECTED_STD_256_128[name], rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("name", sorted(HPARAMS))
def test_realized_std_and_mean_on_square_matrix(name):
  w = _sample(name, (256, 256), 256, 256)
  assert w.shape == (256, 256) and w.dtype == jnp.float32
  w = np.asarray(w, np.float64)
  target = inits.realized_std(name, fan_in=256, fan_out=256, **HPARAMS[name])
  if name in CONSTANT_VALUE:
    assert target == 0.0
    np.testing.assert_array_equal(w, np.float32(CONSTANT_VALUE[name]))
    return
  assert w.std() == pytest.approx(target, rel=0.015)
  assert abs(w.mean()) < 0.02 * target  # ~5 standard errors at n = 256²


@pytest.mark.parametrize("name", RANDOM_KEYS)
def test_realized_std_on_rectangular_matrix(name):
  # fan_in ≠ fan_out separates xavier (average) from lecun/he (fan_in) and orthogonal (max).
  w = np.asarray(_sample(name, (256, 128), 256, 128), np.float64)
  target = inits.realized_std(name, fan_in=256, fan_out=128, **HPARAMS[name])
  assert w.std() == pytest.approx(target, rel=0.015)


@pytest.mark.parametrize("name", sorted(HPARAMS))
def test_shape_and_low_precision_dtype_preserved(name):
  # float32 is checked in test_realized_std_and_mean_on_square_matrix.
  w = _sample(name, QKV_SHAPE, D, H * K, dtype=jnp.bfloat16)
  assert w.shape == QKV_SHAPE
  assert w.dtype == jnp.bfloat16


@pytest.mark.parametrize("name", sorted(HPARAMS))
def test_determinism(name):
  a = _sample(name, (256, 256), 256, 256, key=jax.random.key(1))
  b = _sample(name, (256, 256), 256, 256, key=jax.random.key(1))
  c = _sample(name, (256, 256), 256, 256, key=jax.random.key(2))
  np.testing.assert_array_equal(a, b)
  if name in CONSTANT_VALUE:
    np.testing.assert_array_equal(a, c)
  else:
    assert np.mean(np.asarray(a) != np.asarray(c)) > 0.99


def test_fans_multi_head():
  assert inits.fans(QKV_SHAPE, in_axes=(0,), out_axes=(1, 2)) == (256, 128)
  assert inits.fans(OUT_SHAPE, in_axes=(0, 1), out_axes=(2,)) == (128, 256)
  assert inits.fans(OUT_SHAPE, in_axes=(-3, -2), out_axes=(-1,)) == (128, 256)
  assert inits.fans((512, 8, 64), in_axes=(0,), out_axes=(1, 2)) == (512, 512)
  assert inits.fans((768,), in_axes=(), out_axes=(0,)) == (1, 768)  # a bias
  assert inits.fans((), in_axes=(), out_axes=()) == (1, 1)  # a scalar gate (ReZero α)
  # JAX's default (in_axis=-2, out_axis=-1, rest receptive field) would count the q kernel as 256·4 → 32.


@pytest.mark.parametrize(
    "in_axes,out_axes,match",
    [((0,), (1,), "neither"), ((0, 1), (1, 2), "share"), ((0, 0), (1, 2), "repeats"), ((3,), (1, 2), "out of range")],
)
def test_fans_rejects_bad_axes(in_axes, out_axes, match):
  with pytest.raises(ValueError, match=match):
    inits.fans(QKV_SHAPE, in_axes, out_axes)


@pytest.mark.parametrize("name", RANDOM_KEYS)
@pytest.mark.parametrize("shape,axes", [(QKV_SHAPE, ((0,), (1, 2))), (OUT_SHAPE, ((0, 1), (2,)))])
def test_multi_head_kernel_uses_combined_fans(name, shape, axes):
  fan_in, fan_out = inits.fans(shape, *axes)
  w = np.asarray(_sample(name, shape, fan_in, fan_out), np.float64)
  target = inits.realized_std(name, fan_in=fan_in, fan_out=fan_out, **HPARAMS[name])
  assert w.std() == pytest.approx(target, rel=0.02)


def test_multi_head_lecun_is_one_over_sqrt_d_model():
  # Independent number: q kernel [256, 4, 32] with lecun must have std 1/√256, not 1/√(256·4).
  w = _sample("lecun_normal", QKV_SHAPE, D, H * K)
  assert float(jnp.std(w)) == pytest.approx(1 / 16, rel=0.02)


@pytest.mark.parametrize("fan_in,fan_out", [(D * K, H), (D, H), (H * K, D), (D, 2 * H * K)])
def test_fans_inconsistent_with_shape_raise(fan_in, fan_out):
  # Only splits into leading input axes / trailing output axes are accepted. (D·H, K) is such a split and
  # cannot be told from the right one by the shape alone, which is why fans are passed explicitly.
  with pytest.raises(ValueError, match="fan_in"):
    _sample("normal", QKV_SHAPE, fan_in, fan_out)


# --- empirical numbers from docs/science.md §1-2 ---


def test_bert_truncated_normal_tf_768():
  w = _sample("truncated_normal_tf", (768, 768), 768, 768)
  assert float(jnp.std(w)) == pytest.approx(0.0176, rel=0.01)
  assert float(jnp.max(jnp.abs(w))) <= 2 * 0.02  # raw σ
  assert inits.realized_std("truncated_normal_tf", fan_in=768, fan_out=768, std=0.02) == pytest.approx(
      0.017593, abs=5e-7
  )


def test_truncated_normal_tf_is_jax_truncated_normal():
  w = _sample("truncated_normal_tf", (64, 64), 64, 64)
  ref = jax.nn.initializers.truncated_normal(stddev=0.02)(KEY, (64, 64), jnp.float32)
  np.testing.assert_array_equal(w, ref)


def test_truncated_normal_corrected_768():
  w = _sample("truncated_normal", (768, 768), 768, 768)
  assert float(jnp.std(w)) == pytest.approx(0.02, rel=0.01)
  # Truncation at ±2 of the PRE-truncation std, which is 0.02/0.87962566.
  assert float(jnp.max(jnp.abs(w))) <= 2 * 0.02 / 0.87962566 * (1 + 1e-6)
  assert float(jnp.max(jnp.abs(w))) > 2 * 0.02  # wider than the tf variant's range


@pytest.mark.parametrize("name", ["xavier_uniform", "xavier_normal"])
def test_xavier_bert_base_width(name):
  w = inits.get_initializer(name)(KEY, (768, 768), fan_in=768, fan_out=768)
  assert float(jnp.std(w)) == pytest.approx(0.0361, rel=0.01)  # 1/√768, twice BERT's 0.0176


def test_uniform_bounds():
  w = _sample("uniform", (256, 256), 256, 256)
  assert float(jnp.max(jnp.abs(w))) <= 0.1
  w = inits.get_initializer("xavier_uniform")(KEY, (256, 768), fan_in=256, fan_out=768)
  assert float(jnp.max(jnp.abs(w))) <= math.sqrt(6 / 1024) * (1 + 1e-6)
  assert float(jnp.max(jnp.abs(w))) > 0.99 * math.sqrt(6 / 1024)


# --- orthogonal ---


@pytest.mark.parametrize(
    "shape,fan_in,fan_out,gain", [((256, 256), 256, 256, 1.0), ((256, 128), 256, 128, 0.5), (QKV_SHAPE, D, H * K, 1.5)]
)
def test_orthogonal_columns(gain, shape, fan_in, fan_out):
  w = inits.get_initializer("orthogonal", gain=gain)(KEY, shape, fan_in=fan_in, fan_out=fan_out)
  m = np.asarray(w, np.float64).reshape(fan_in, fan_out)
  np.testing.assert_allclose(m.T @ m, gain**2 * np.eye(fan_out), atol=1e-5)


def test_orthogonal_rows_when_fan_in_smaller():
  w = inits.get_initializer("orthogonal")(KEY, OUT_SHAPE, fan_in=H * K, fan_out=D)
  m = np.asarray(w, np.float64).reshape(H * K, D)
  np.testing.assert_allclose(m @ m.T, np.eye(H * K), atol=1e-5)


# --- errors ---


def test_unknown_name_lists_valid():
  with pytest.raises(ValueError, match="'glorot'.*xavier_uniform"):
    inits.get_initializer("glorot")


def test_missing_hparam_named():
  with pytest.raises(ValueError, match="missing.*'std'"):
    inits.get_initializer("normal")
  with pytest.raises(ValueError, match="missing.*'std'"):
    inits.realized_std("truncated_normal", fan_in=4, fan_out=4)


def test_unknown_hparam_named():
  with pytest.raises(ValueError, match="unknown.*'stdd'.*'std'"):
    inits.get_initializer("normal", stdd=0.02)
  with pytest.raises(ValueError, match="unknown.*'gain'.*none"):
    inits.get_initializer("he_normal", gain=2.0)


@pytest.mark.parametrize(
    "name,hparams,match",
    [
        ("normal", {"std": -0.02}, "std"),
        ("normal", {"std": float("nan")}, "std"),
        ("uniform", {"bound": 0.0}, "bound"),
        ("orthogonal", {"gain": 0}, "gain"),
        ("xavier_normal", {"gain": True}, "gain"),
        ("constant", {"value": float("inf")}, "value"),
    ],
)
def test_bad_hparam_value_named(name, hparams, match):
  with pytest.raises(ValueError, match=match):
    inits.get_initializer(name, **hparams)
  with pytest.raises(ValueError, match=match):
    inits.realized_std(name, fan_in=4, fan_out=4, **hparams)


@pytest.mark.parametrize("fan_in,fan_out", [(0, 4), (4, -1), (4.0, 4)])
def test_bad_fans_raise(fan_in, fan_out):
  with pytest.raises(ValueError, match="fan_in|fan_out"):
    inits.realized_std("lecun_normal", fan_in=fan_in, fan_out=fan_out)
  with pytest.raises(ValueError, match="fan_in|fan_out"):
    inits.get_initializer("lecun_normal")(KEY, (4, 4), fan_in=fan_in, fan_out=fan_out)
