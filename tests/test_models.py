"""Behavioural tests of models/: every registry combination runs, jit = no jit; causality, padding, packing; config
errors and presets, on the suite's tiny model and batch (tests/tiny.py)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models import ModelConfig, get_model, param_roles
from models.config import ARCHS, NORM_POSITIONS, PARAMETERIZATIONS
from models.residual import RESIDUALS
from tests import tiny


def combo_kwargs(arch, norm_position, residual, parameterization):
  return dict(
      arch=arch,
      norm_position=norm_position,
      residual=residual,
      parameterization=parameterization,
      norm_type="none" if norm_position == "none" else "layernorm",
      attention_logit_scale="dk" if parameterization == "mup" else "sqrt_dk",
      tie_embeddings=arch == "encoder" or parameterization != "mup",
      position="learned",
  )


def is_valid(norm_position, residual):
  if residual == "completep":  # a branch multiplier on a stream no norm rescales (models/config.py)
    return norm_position in ("pre", "sandwich", "peri", "none")
  return residual not in ("deepnorm", "admin") or norm_position == "post"


def in_fast_tier(arch, norm_position, residual, parameterization):
  """64 of the 576 combinations, every pair of values of any two axes among them: each (norm position, residual)
  once, its arch and parameterization indices (n + r, n + 2r) mod 3 (an invertible map, so every (arch,
  parameterization) pair too). The slow tier runs all 576."""
  n, r = NORM_POSITIONS.index(norm_position), list(RESIDUALS).index(residual)
  return ARCHS.index(arch) == (n + r) % 3 and PARAMETERIZATIONS.index(parameterization) == (n + 2 * r) % 3


@pytest.mark.parametrize(
    "arch,norm_position,residual,parameterization",
    [
        pytest.param(*c, marks=() if in_fast_tier(*c) else pytest.mark.slow)
        for c in itertools.product(ARCHS, NORM_POSITIONS, RESIDUALS, PARAMETERIZATIONS)
    ],
)
def test_every_combination_runs(arch, norm_position, residual, parameterization):
  """Every registry combination: right shapes, finite float32 logits, a role for every parameter.

  Runs eagerly: primitives compile once per shape and are reused across all combinations, where jitting each
  model would compile 200 programs. `test_jit_equals_no_jit` covers the jitted path.
  """
  kw = combo_kwargs(arch, norm_position, residual, parameterization)
  if not is_valid(norm_position, residual):
    with pytest.raises(ValueError, match="model.norm_position"):
      tiny.model_config(**kw)
    return
  model = get_model(tiny.model_config(**kw))
  b = tiny.batch()
  variables = model.init(jax.random.key(0), b)
  logits = model.apply(variables, b)
  length = b["inputs"].shape[1] if arch == "encoder" else b["targets"].shape[1]
  assert logits.shape == (2, length, tiny.VOCAB)
  assert logits.dtype == jnp.float32
  assert bool(jnp.all(jnp.isfinite(logits)))
  assert all(isinstance(r, models.ParamRole) for r in jax.tree.leaves(param_roles(model, variables["params"])))


def test_the_fast_tiers_combinations_hold_every_pair_of_values_of_any_two_axes():
  axes = (ARCHS, NORM_POSITIONS, list(RESIDUALS), PARAMETERIZATIONS)
  fast = [c for c in itertools.product(*axes) if in_fast_tier(*c)]
  assert len(fast) == len(NORM_POSITIONS) * len(RESIDUALS) == 64
  for i, j in itertools.combinations(range(4), 2):
    assert {(c[i], c[j]) for c in fast} == set(itertools.product(axes[i], axes[j])), (i, j)


@pytest.mark.parametrize(
    "arch,norm_position,residual,parameterization",
    [
        (arch, *knobs)
        for arch in ARCHS
        for knobs in [("pre", "rezero", "ntk"), ("post", "admin", "standard"), ("sandwich", "scheduled", "mup")]
    ],
)
def test_jit_equals_no_jit(arch, norm_position, residual, parameterization):
  model = get_model(tiny.model_config(**combo_kwargs(arch, norm_position, residual, parameterization)))
  b = tiny.batch()
  variables = jax.jit(model.init)(jax.random.key(1), b)
  # Make zero-initialized residual scalars count.
  variables = jax.tree.map(lambda x: x + 0.5 if x.ndim == 0 else x, variables)
  np.testing.assert_allclose(model.apply(variables, b), jax.jit(model.apply)(variables, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_decoder_causality_by_gradients(arch):
  """d logits[t] / d (decoder input at position p) is exactly zero for p > t."""
  t_len = 6
  c = tiny.model_config(arch=arch, tie_embeddings=False, num_decoder_layers=2, norm_position="pre")
  model = get_model(c)
  # Distinct tokens per target position so each embedding row belongs to one decoder input position.
  targets = jnp.arange(3, 3 + t_len, dtype=jnp.int32)[None]
  b = {"inputs": jnp.full((1, 4), 11, jnp.int32), "targets": targets}
  params = model.init(jax.random.key(0), b)["params"]

  def logits_per_position(table):
    p = {**params, "token_embedding": {"embedding": table}}
    return model.apply({"params": p}, b)[0].sum(-1)

  jac_TxVxD = np.asarray(jax.jit(jax.jacrev(logits_per_position))(params["token_embedding"]["embedding"]))
  for t in range(t_len):
    # Decoder input at position p is targets[p-1] (shift right); position 0 is BOS = token 0.
    for p in range(1, t_len):
      row = np.abs(jac_TxVxD[t, targets[0, p - 1]]).max()
      if p > t:
        assert row == 0.0, (t, p)
      else:
        assert row > 0.0, (t, p)


@pytest.mark.parametrize("arch", ARCHS)
def test_padding_does_not_leak(arch):
  """Outputs at real positions are identical whatever padding surrounds them."""
  c = tiny.model_config(arch=arch, norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  model = get_model(c)
  b = tiny.batch()
  params = model.init(jax.random.key(0), b)["params"]
  padded = {k: jnp.pad(v, ((0, 0), (0, 3))) for k, v in b.items()}
  out = model.apply({"params": params}, b)
  out_padded = model.apply({"params": params}, padded)
  key = "inputs" if arch == "encoder" else "targets"
  valid = np.asarray(b[key] > 0)
  np.testing.assert_allclose(
      np.asarray(out)[valid], np.asarray(out_padded)[:, : valid.shape[1]][valid], rtol=1e-5, atol=1e-5
  )
  if arch != "decoder":
    # The encoder's outputs at real positions have exactly zero gradient w.r.t. the padding embedding row.
    def enc_sum(table):
      p = {**params, "token_embedding": {"embedding": table}}
      enc = model.apply({"params": p}, b["inputs"], method=model.encode)
      return jnp.sum(enc * (b["inputs"] > 0)[..., None])

    g = jax.jit(jax.grad(enc_sum))(params["token_embedding"]["embedding"])
    assert np.abs(np.asarray(g[0])).max() == 0.0
    assert np.abs(np.asarray(g[3:])).max() > 0.0


def test_packed_equals_separate():
  """Two sequences packed in one row (segmentation + positions) give the logits they give apart."""
  c = tiny.model_config(arch="encoder_decoder", norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  model = get_model(c)
  a_in, a_tg = [4, 5, 6], [7, 8]
  b_in, b_tg = [9, 10], [11, 12, 5]
  sep = {"inputs": jnp.array([a_in, b_in + [0]], jnp.int32), "targets": jnp.array([a_tg + [0], b_tg], jnp.int32)}
  packed = {
      "inputs": jnp.array([a_in + b_in + [0]], jnp.int32),
      "targets": jnp.array([a_tg + b_tg + [0]], jnp.int32),
      "inputs_segmentation": jnp.array([[1, 1, 1, 2, 2, 0]], jnp.int32),
      "inputs_position": jnp.array([[0, 1, 2, 0, 1, 0]], jnp.int32),
      "targets_segmentation": jnp.array([[1, 1, 2, 2, 2, 0]], jnp.int32),
      "targets_position": jnp.array([[0, 1, 0, 1, 2, 0]], jnp.int32),
  }
  params = model.init(jax.random.key(3), sep)["params"]
  out_sep = np.asarray(model.apply({"params": params}, sep))
  out_packed = np.asarray(model.apply({"params": params}, packed))
  np.testing.assert_allclose(out_packed[0, :2], out_sep[0, :2], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out_packed[0, 2:5], out_sep[1, :3], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "key,value,match",
    [
        (
            "norm_position",
            "middle",
            r"model.norm_position='middle' is invalid; valid: \['post', 'pre', 'sandwich', 'peri', 'mix', 'hybrid', 'reordered', 'none'\]",
        ),
        ("residual", "rezero2", r"model.residual='rezero2' is invalid; valid:"),
        ("parameterization", "mu", r"model.parameterization='mu' is invalid; valid:"),
        ("attention_logit_scale", "sqrt", r"model.attention_logit_scale='sqrt' is invalid; valid:"),
        ("activation", "swish", r"model.activation='swish' is invalid; valid:"),
        ("d_model", 0, r"model.d_model=0 is invalid; valid: a positive integer"),
        ("dropout_rate", 1.5, r"model.dropout_rate=1.5 is invalid; valid: a number in"),
        ("embedding_norm", "yes", r"model.embedding_norm='yes' is invalid; valid: True or False"),
    ],
)
def test_bad_config_values_raise_naming_key_value_choices(key, value, match):
  with pytest.raises(ValueError, match=match):
    tiny.model_config(**{key: value})


def test_from_config_presets_and_unknown_keys():
  import ml_collections

  cfg = ml_collections.ConfigDict(
      {
          "preset": "base",
          "d_model": None,
          "num_heads": None,
          "d_ff": None,
          "num_encoder_layers": None,
          "num_decoder_layers": 4,
          "dtype": "bfloat16",
      }
  )
  c = ModelConfig.from_config(cfg, vocab_size=100)
  assert (c.d_model, c.num_heads, c.d_ff, c.num_encoder_layers, c.num_decoder_layers) == (512, 8, 2048, 6, 4)
  assert c.dtype == jnp.bfloat16
  with pytest.raises(ValueError, match="model.preset='huge'"):
    ModelConfig.from_config({"preset": "huge"}, vocab_size=100)
  with pytest.raises(ValueError, match=r"config.model.d_modle=3 is invalid \(unknown key\)"):
    ModelConfig.from_config({"preset": "tiny", "d_modle": 3}, vocab_size=100)
