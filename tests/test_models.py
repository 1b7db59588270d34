"""Behavioural tests of models/: every registry combination runs; causality, padding, packing, NTK = SP,
attention logit scale, Post-LN / Pre-LN signal propagation, roles, µP multipliers, bfloat16."""

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models import ModelConfig, get_model, param_roles
from models.config import ARCHS, NORM_POSITIONS, PARAMETERIZATIONS
from models.dense import Dense
from models.residual import RESIDUALS

VOCAB = 13


def tiny(**kw):
  base = dict(
      vocab_size=VOCAB,
      scale_embeddings=False,
      num_encoder_layers=1,
      num_decoder_layers=1,
      d_model=8,
      num_heads=2,
      d_ff=8,
      max_len=16,
  )
  base.update(kw)
  return ModelConfig(**base)


def batch(b=2, s=5, t=4, seed=0):
  rng = np.random.default_rng(seed)
  inputs = rng.integers(3, VOCAB, (b, s)).astype(np.int32)
  targets = rng.integers(3, VOCAB, (b, t)).astype(np.int32)
  inputs[0, -2:] = 0  # some padding
  targets[1, -1:] = 0
  return {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}


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
  return residual not in ("deepnorm", "admin") or norm_position == "post"


@pytest.mark.parametrize(
    "arch,norm_position,residual,parameterization",
    list(itertools.product(ARCHS, NORM_POSITIONS, RESIDUALS, PARAMETERIZATIONS)),
)
def test_every_combination_runs(arch, norm_position, residual, parameterization):
  """Every registry combination: right shapes, finite float32 logits, a role for every parameter.

  Runs eagerly: primitives compile once per shape and are reused across all combinations, where jitting each
  model would compile 200 programs. `test_jit_equals_no_jit` covers the jitted path.
  """
  kw = combo_kwargs(arch, norm_position, residual, parameterization)
  if not is_valid(norm_position, residual):
    with pytest.raises(ValueError, match="model.norm_position"):
      tiny(**kw)
    return
  model = get_model(tiny(**kw))
  b = batch()
  variables = model.init(jax.random.key(0), b)
  logits = model.apply(variables, b)
  length = b["inputs"].shape[1] if arch == "encoder" else b["targets"].shape[1]
  assert logits.shape == (2, length, VOCAB)
  assert logits.dtype == jnp.float32
  assert bool(jnp.all(jnp.isfinite(logits)))
  assert all(isinstance(r, models.ParamRole) for r in jax.tree.leaves(param_roles(model, variables["params"])))


@pytest.mark.parametrize(
    "arch,norm_position,residual,parameterization",
    [
        (arch, *knobs)
        for arch in ARCHS
        for knobs in [("pre", "rezero", "ntk"), ("post", "admin", "standard"), ("sandwich", "scheduled", "mup")]
    ],
)
def test_jit_equals_no_jit(arch, norm_position, residual, parameterization):
  model = get_model(tiny(**combo_kwargs(arch, norm_position, residual, parameterization)))
  b = batch()
  variables = jax.jit(model.init)(jax.random.key(1), b)
  # Make zero-initialized residual scalars count.
  variables = jax.tree.map(lambda x: x + 0.5 if x.ndim == 0 else x, variables)
  np.testing.assert_allclose(model.apply(variables, b), jax.jit(model.apply)(variables, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["decoder", "encoder_decoder"])
def test_decoder_causality_by_gradients(arch):
  """d logits[t] / d (decoder input at position p) is exactly zero for p > t."""
  t_len = 6
  c = tiny(arch=arch, tie_embeddings=False, num_decoder_layers=2, norm_position="pre")
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
  c = tiny(arch=arch, norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  model = get_model(c)
  b = batch()
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
  c = tiny(arch="encoder_decoder", norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
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


@pytest.mark.parametrize("arch,tied", [("encoder_decoder", False), ("decoder", True), ("encoder", True)])
def test_ntk_equals_standard_with_rescaled_kernels(arch, tied):
  """NTK computes the SP function when W_ntk = W_sp·√fan_in (docs/science.md §3)."""
  kw = dict(arch=arch, tie_embeddings=tied, norm_position="pre", num_encoder_layers=2, num_decoder_layers=2)
  sp = get_model(tiny(**kw, tied_readout_scale="rsqrt_d" if tied else "none"))
  ntk = get_model(tiny(**kw, parameterization="ntk"))
  b = batch()
  params = sp.init(jax.random.key(0), b)["params"]
  roles = param_roles(sp, params)
  scaled = {"attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "head"}
  params_ntk = jax.tree.map(lambda p, r: p * np.sqrt(r.fan_in) if r.role in scaled else p, params, roles)
  np.testing.assert_allclose(
      sp.apply({"params": params}, b), ntk.apply({"params": params_ntk}, b), rtol=1e-4, atol=1e-5
  )


def _attention_stats(scale):
  """Logit std of one head, d_k = 64, queries and keys = unit-variance inputs (identity projections)."""
  from models.attention import MultiHeadAttention

  c = tiny(d_model=64, num_heads=1, attention_logit_scale=scale, use_bias=False)
  attn = MultiHeadAttention(c, "self_attn")
  # Independent queries and keys (as cross-attention): self-attention would put |x|² on the diagonal.
  xq, xk = jax.random.normal(jax.random.key(0), (2, 4, 64, 64))
  mask = jnp.ones((4, 1, 64, 64), bool)
  params = attn.init(jax.random.key(1), xq, xk, mask)["params"]
  eye = jnp.eye(64).reshape(64, 1, 64)
  params = {**params, "query": {"kernel": eye}, "key": {"kernel": eye}}
  _, state = attn.apply({"params": params}, xq, xk, mask, mutable=["intermediates"])
  return float(state["intermediates"]["logit_std"][0][0]), float(state["intermediates"]["entropy"][0][0])


def test_attention_logit_scale():
  """Unscaled logits of unit-variance q, k with d_k = 64 have std √64 = 8; /√d_k gives 1 (Su 2021a §5;
  docs/science.md §4)."""
  std_none, ent_none = _attention_stats("none")
  std_sqrt, ent_sqrt = _attention_stats("sqrt_dk")
  std_dk, _ = _attention_stats("dk")
  assert abs(std_none - 8.0) < 0.4
  assert abs(std_sqrt - 1.0) < 0.05
  assert abs(std_dk - 1.0 / 8.0) < 0.01
  # Entropy collapses without the scale: uniform over 64 keys is ln 64 = 4.16.
  assert ent_none < 2.0 < ent_sqrt < np.log(64)


def _stream_coefficients(norm_position, num_layers=6, d=512):
  """cos-like coefficient <x_l, x_0>/<x_0, x_0> after each layer, with attention branches zeroed and unit-variance
  MLP branches (normalized ReLU, LeCun init) — the σ = 1 setting of Su 2021a §6 / Su 2021b (docs/science.md §6)."""
  c = tiny(
      arch="encoder",
      num_encoder_layers=num_layers,
      d_model=d,
      num_heads=4,
      d_ff=d,
      use_bias=False,
      norm_position=norm_position,
      activation="normalized_relu",
      max_len=64,
  )
  model = get_model(c)
  tokens = jax.random.randint(jax.random.key(0), (4, 64), 3, VOCAB)
  params = model.init(jax.random.key(1), {"inputs": tokens})["params"]
  for i in range(num_layers):
    attn = params["encoder"][f"layer_{i}"]["self_attn"]
    params["encoder"][f"layer_{i}"]["self_attn"] = {**attn, "out": {"kernel": jnp.zeros_like(attn["out"]["kernel"])}}
  _, state = model.apply({"params": params}, {"inputs": tokens}, mutable=["intermediates"])
  inter = state["intermediates"]["encoder"]
  # The derivation's x_0 is the normalized input: in Post-LN the first norm (after the zeroed attention branch)
  # rescales the embeddings, so measure against the first MLP sublayer's input.
  x0 = inter["layer_0"]["mlp_residual_in"][0].reshape(-1, d)
  coeffs, branch_var = [], []
  for i in range(num_layers):
    layer = inter[f"layer_{i}"]
    x = layer["mlp_residual_out"][0].reshape(-1, d)
    coeffs.append(float(jnp.sum(x * x0) / jnp.sum(x0 * x0)))
    h = layer["mlp_branch"][0].reshape(-1, d)
    xin = layer["mlp_residual_in"][0].reshape(-1, d)
    branch_var.append(float(jnp.mean(h * h) / jnp.mean(xin * xin)))
  return np.array(coeffs), np.array(branch_var)


def test_post_ln_identity_path_decays_like_two_to_minus_half_l():
  coeffs, branch_var = _stream_coefficients("post")
  np.testing.assert_allclose(branch_var, 1.0, atol=0.1)  # σ² ≈ 1: the setting of the derivation
  predicted = 2.0 ** (-np.arange(1, 7) / 2)
  np.testing.assert_allclose(coeffs, predicted, rtol=0.15, atol=0.02)
  # The general form with the measured σ_k²: Π_k (1 + σ_k²)^{-1/2}.
  np.testing.assert_allclose(coeffs, np.cumprod(1 / np.sqrt(1 + branch_var)), rtol=0.15, atol=0.02)


def test_pre_ln_keeps_the_identity_path():
  coeffs, _ = _stream_coefficients("pre")
  np.testing.assert_allclose(coeffs, 1.0, atol=0.1)


def test_roles_and_fans():
  c = tiny(
      arch="encoder_decoder",
      d_model=16,
      num_heads=4,
      head_dim=3,
      d_ff=24,
      tie_embeddings=False,
      residual="admin",
      num_decoder_layers=2,
  )
  params = get_model(c).init(jax.random.key(0), batch())["params"]
  roles = param_roles(c, params)
  q = roles["decoder"]["layer_1"]["cross_attn"]["query"]["kernel"]
  assert (q.role, q.stack, q.layer, q.sublayer, q.fan_in, q.fan_out) == ("attn_q", "decoder", 1, "cross_attn", 16, 12)
  o = roles["encoder"]["layer_0"]["self_attn"]["out"]["kernel"]
  assert (o.role, o.fan_in, o.fan_out) == ("attn_out", 12, 16)
  assert roles["decoder"]["layer_0"]["mlp"]["wo"]["kernel"].role == "mlp_out"
  assert roles["decoder"]["layer_0"]["mlp_residual"]["omega"].role == "residual_scale"
  assert roles["head"]["kernel"].role == "head"
  assert roles["token_embedding"]["embedding"].stack == "shared"
  assert param_roles(get_model(c)) is roles  # read once per model config
  with pytest.raises(ValueError, match=r"missing \['decoder/layer_0/cross_attn/key/bias'"):
    param_roles(c, {**params, "decoder": {**params["decoder"], "layer_0": {}}})
  with pytest.raises(ValueError, match="has shape"):
    param_roles(c, jax.tree.map(lambda x: x[..., None], params))


def test_roles_are_declared_where_parameters_are_created_not_read_from_names():
  """A role comes from the `declare` box the parameter was created with, whatever the module is called; a parameter
  created without one is named in the error, and a role outside ROLES is refused when declared."""

  class Renamed(nn.Module):
    declared: bool = True

    @nn.compact
    def __call__(self, x):
      y = Dense(3, role="attn_v", sublayer="mlp", axes=("embed", "kv"), name="mystery")(x)
      init = nn.initializers.zeros
      if self.declared:
        init = models.roles.declare(init, ("embed",), role="norm_bias", sublayer="final_norm")
      return y.sum() + self.param("whatever", init, (x.shape[-1],)).sum()

  x = jnp.ones((2, 4))
  roles = models.roles.declared_roles(Renamed().init(jax.random.key(0), x)["params"])
  kernel, bias, other = roles["mystery"]["kernel"], roles["mystery"]["bias"], roles["whatever"]
  assert (kernel.role, kernel.sublayer, kernel.fan_in, kernel.fan_out, kernel.path) == (
      "attn_v",
      "mlp",
      4,
      3,
      "mystery/kernel",
  )
  assert (bias.role, bias.sublayer) == ("bias", "mlp")
  assert (other.role, other.sublayer, other.stack, other.layer) == ("norm_bias", "final_norm", "shared", None)
  with pytest.raises(ValueError, match="'whatever' has no declared role"):
    models.roles.declared_roles(Renamed(declared=False).init(jax.random.key(0), x)["params"])
  with pytest.raises(ValueError, match="role='gain' is not one of"):
    models.roles.declare(nn.initializers.ones, ("embed",), role="gain", sublayer="mlp")


@pytest.mark.parametrize("arch", ARCHS)
def test_embedding_norm_gives_unit_variance_tokens_with_norm_roles(arch):
  """model.embedding_norm (BERT, Devlin et al. 2019 §3): x_0 = LayerNorm(token + position embeddings) in every
  stack: a [D] gain and bias per stack with norm roles, and at init (gain 1, bias 0) each token of x_0 has mean 0
  and variance v/(v + ε), v the variance of its token + position sum computed here from the tables."""
  c = tiny(arch=arch, position="learned", embedding_norm=True, d_model=16, num_heads=2, d_ff=8)
  model = get_model(c)
  b = batch()
  variables = model.init(jax.random.key(0), b)
  params = variables["params"]
  logits, state = model.apply(variables, b, mutable=["intermediates"])
  length = b["inputs"].shape[1] if arch == "encoder" else b["targets"].shape[1]
  assert logits.shape == (2, length, VOCAB)
  roles = param_roles(model, params)
  for stack in c.stacks:
    norm = params[stack]["embedding_norm"]
    assert norm["scale"].shape == norm["bias"].shape == (16,)
    r_scale, r_bias = roles[stack]["embedding_norm"]["scale"], roles[stack]["embedding_norm"]["bias"]
    assert (r_scale.role, r_scale.stack, r_scale.layer, r_scale.sublayer) == (
        "norm_scale",
        stack,
        None,
        "embedding_norm",
    )
    assert (r_bias.role, r_bias.sublayer) == ("norm_bias", "embedding_norm")
    tokens = b["inputs"] if stack == "encoder" else models.transformer.shift_right(b["targets"])
    s = np.asarray(params["token_embedding"]["embedding"], np.float64)[np.asarray(tokens)]
    s = s + np.asarray(params[stack]["pos_embedding"]["embedding"], np.float64)[: tokens.shape[1]]
    v = s.var(-1)
    x0 = np.asarray(state["intermediates"][stack]["stream_0"][0], np.float64)
    np.testing.assert_allclose(x0.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(x0.var(-1), v / (v + c.norm_epsilon), rtol=1e-4)
    np.testing.assert_allclose(x0.var(-1), 1.0, rtol=1e-3)  # v ≈ 2 here, ε = 1e-6
  without = get_model(tiny(arch=arch, position="learned", d_model=16, num_heads=2, d_ff=8))
  p_without = without.init(jax.random.key(0), b)["params"]
  assert all("embedding_norm" not in p_without[stack] for stack in c.stacks)


def test_mup_lr_multipliers_and_readout():
  c = tiny(
      arch="decoder",
      parameterization="mup",
      attention_logit_scale="dk",
      d_model=32,
      mup_base_width=8,
      tie_embeddings=False,
  )
  params = get_model(c).init(jax.random.key(0), batch())["params"]
  mult = models.lr_multipliers(params, c)
  assert mult["decoder"]["layer_0"]["mlp"]["wi"]["kernel"] == pytest.approx(0.25)
  assert mult["decoder"]["layer_0"]["self_attn"]["query"]["kernel"] == pytest.approx(0.25)
  assert mult["token_embedding"]["embedding"] == 1.0 and mult["head"]["kernel"] == 1.0
  sp = tiny(arch="decoder", tie_embeddings=False, d_model=32)
  sp_mult = models.lr_multipliers(get_model(sp).init(jax.random.key(0), batch())["params"], sp)
  assert set(jax.tree.leaves(sp_mult)) == {1.0}
  # The readout is multiplied by 1/width_ratio = 1/4 relative to the same kernel without µP.
  from models.parameterization import readout_multiplier

  assert readout_multiplier(c, tied=False) == pytest.approx(0.25)


def test_scheduled_alpha_is_state_and_updates():
  c = tiny(arch="decoder", residual="scheduled", norm_position="none", norm_type="none", alpha_init=0.0)
  model = get_model(c)
  variables = model.init(jax.random.key(0), batch())
  alphas = variables[models.ALPHA_COLLECTION]
  assert len(jax.tree.leaves(alphas)) == 2 and all(float(a) == 0.0 for a in jax.tree.leaves(alphas))
  for _ in range(3):
    alphas = models.scheduled_alpha_update(alphas, 0.4, 1.0)
  np.testing.assert_allclose(jax.tree.leaves(alphas), 1.0)
  # With α = 0 every branch is off: the decoder is embedding + positions straight to the readout.
  out0 = model.apply(variables, batch())
  out1 = model.apply({**variables, models.ALPHA_COLLECTION: alphas}, batch())
  assert not np.allclose(out0, out1)


# bfloat16 keeps 8 significant bits: unit roundoff u = 2^-8. Rounding to nearest leaves an error uniform within half
# an ulp; with mantissas spread log-uniformly over [1, 2) the relative error has RMS 2u·√(E[1/m²]/12) =
# 2u·√(0.541/12) ≈ 0.42u per rounding, and independent roundings add in quadrature.
BF16_U = 2.0**-8
BF16_RMS_PER_ROUNDING = 0.42 * BF16_U


def _dot_general_dtypes(jaxpr):
  """(lhs, rhs) dtypes of every dot_general in a jaxpr, sub-jaxprs (jit, remat, ...) included."""
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "dot_general":
      yield tuple(v.aval.dtype for v in eqn.invars)
    for param in eqn.params.values():
      for sub in param if isinstance(param, (list, tuple)) else [param]:
        if isinstance(sub, jax.extend.core.ClosedJaxpr):
          yield from _dot_general_dtypes(sub.jaxpr)
        elif isinstance(sub, jax.extend.core.Jaxpr):
          yield from _dot_general_dtypes(sub)


def test_bfloat16_dense_error_is_three_roundings():
  """One bfloat16 Dense of float32 params: x, W and y are each rounded once and the 1024-term dot accumulates in
  float32, so the relative RMS error is √3 · 0.42u ≈ 0.73u whatever the fan-in n (measured 0.85u; bound 1.5u).
  Accumulating in bfloat16 would round each partial sum S_i (RMS √i·σ for terms of RMS σ), a relative error of
  0.42u·√(Σ_i i / n) ≈ 0.42u·√(n/2) ≈ 9.5u for n = 1024 (measured 9.5u with a bfloat16 running sum)."""
  x = jax.random.normal(jax.random.key(0), (64, 1024))
  dense32, dense16 = (Dense(256, role="mlp_in", sublayer="mlp", dtype=t) for t in (jnp.float32, jnp.bfloat16))
  variables = dense32.init(jax.random.key(1), x)
  variables = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(2), p.shape), variables)  # bias ≠ 0
  y32 = dense32.apply(variables, x)
  y16 = dense16.apply(variables, x)
  assert y16.dtype == jnp.bfloat16
  rel_rms = float(jnp.linalg.norm(y16.astype(jnp.float32) - y32) / jnp.linalg.norm(y32))
  assert 0.5 * np.sqrt(3) * BF16_RMS_PER_ROUNDING < rel_rms < 1.5 * BF16_U, rel_rms / BF16_U


def test_bfloat16_compute():
  """bfloat16 compute (float32 params, cast per op) against float32 compute with the same params.

  Every matmul takes bfloat16 operands. Along a logit's path this encoder-decoder (1 + 1 layers: embedding, self-
  and cross-attention with q/k/v/out projections, softmax, MLP, residual adds and norms, readout) rounds about
  k = 50 times in sequence, so the logits' relative RMS error is at most about 0.42u·√50 ≈ 3u if every rounding
  reached them unattenuated; the bound is 4u ≈ 1.6% (measured 1.0–1.5u over seeds and norm placements: norms and
  sums average part of the errors away). The old check allowed 15% of the largest logit (≈ 40u in RMS terms).
  """
  c32 = tiny(arch="encoder_decoder", norm_position="pre", d_model=32, d_ff=64)
  c16 = tiny(arch="encoder_decoder", norm_position="pre", d_model=32, d_ff=64, dtype=jnp.bfloat16)
  b = batch(b=8, s=8, t=8)
  params = get_model(c32).init(jax.random.key(0), b)["params"]
  out32 = np.asarray(get_model(c32).apply({"params": params}, b))
  out16 = np.asarray(jax.jit(get_model(c16).apply)({"params": params}, b))
  assert out16.dtype == np.float32 and np.isfinite(out16).all()
  operand_dtypes = list(_dot_general_dtypes(jax.make_jaxpr(get_model(c16).apply)({"params": params}, b).jaxpr))
  assert len(operand_dtypes) >= 20 and set(operand_dtypes) == {(jnp.dtype(jnp.bfloat16),) * 2}, operand_dtypes
  rel_rms = np.linalg.norm(out16 - out32) / np.linalg.norm(out32)
  assert BF16_RMS_PER_ROUNDING < rel_rms < 4 * BF16_U, rel_rms / BF16_U
  # Greedy choices: the same token at (almost) every one of the 64 positions; a flip needs a top-two margin below
  # the error (measured: all agree).
  agree = np.mean(out16.argmax(-1) == out32.argmax(-1))
  assert agree >= 0.95, agree


@pytest.mark.parametrize(
    "key,value,match",
    [
        (
            "norm_position",
            "middle",
            r"model.norm_position='middle' is invalid; valid: \['post', 'pre', 'sandwich', 'none'\]",
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
    tiny(**{key: value})


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


def test_attention_head_stats_equal_a_hand_computation_with_padding():
  """Per-head logit std, entropy and max probability over valid (query, key) pairs; a query with no valid key
  (padding) is left out of the averages."""
  from models.attention import _masked_head_stats

  rng = np.random.default_rng(3)
  b, h, q, k = 2, 3, 4, 5
  logits = rng.standard_normal((b, h, q, k)) * 2.0
  mask = np.tril(np.ones((q, k), bool), 1)[None, None].repeat(b, 0).repeat(h, 1)
  mask[0, :, :, 3:] = False  # batch 0: keys 3, 4 are padding
  mask[1, :, 2, :] = False  # batch 1: query 2 is padding (no valid key)
  probs = jax.nn.softmax(jnp.where(mask, logits, jnp.finfo(jnp.float32).min), axis=-1)
  std, entropy, max_prob = (
      np.asarray(x) for x in _masked_head_stats(jnp.asarray(logits, jnp.float32), probs, jnp.asarray(mask))
  )
  for head in range(h):
    valid = logits[:, head][mask[:, head]]
    ents, maxes = [], []
    for bi, qi in itertools.product(range(b), range(q)):
      keys = mask[bi, head, qi]
      if keys.any():
        p = np.exp(logits[bi, head, qi, keys] - logits[bi, head, qi, keys].max())
        p /= p.sum()
        ents.append(-(p * np.log(p)).sum())
        maxes.append(p.max())
    assert len(ents) == b * q - 1
    np.testing.assert_allclose(std[head], valid.std(), rtol=1e-5)
    np.testing.assert_allclose(entropy[head], np.mean(ents), rtol=1e-5)
    np.testing.assert_allclose(max_prob[head], np.mean(maxes), rtol=1e-5)
