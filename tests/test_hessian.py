"""Tests for analysis/hessian.py and analysis/blocks.py against dense references on a tiny encoder-decoder in float64.

One dense Hessian (of the concatenated batch) is shared by all tests through module-scoped fixtures, since compiling
`jax.hessian` dominates the cost. Tolerance: 1e-10 relative; the model computes end to end in float64 (softmax and
logits included), which the fixture asserts so the bound cannot silently loosen.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import curvax
from analysis.blocks import block_hvp_fn, block_indices, block_params, model_blocks
from analysis.hessian import ggn_vp_fn, hvp_fn
from models import ParamRole, get_model, param_roles
from tests import tiny
from train.loss import make_loss_fn

VOCAB = 7


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def setup(x64):
  config = tiny.model_config(vocab_size=VOCAB, d_model=4, d_ff=4, max_len=8, dtype=jnp.float64, param_dtype=jnp.float64)
  rng = np.random.default_rng(0)
  b1, b2 = tiny.batch(2, 5, 4, vocab=VOCAB, rng=rng), tiny.batch(2, 5, 4, vocab=VOCAB, rng=rng)
  b2["targets"] = b2["targets"].at[0, 2:].set(0)  # different token counts: 7 and 5
  union = jax.tree.map(lambda x, y: jnp.concatenate([x, y]), b1, b2)
  model, variables = tiny.init(config, union)
  params = variables["params"]
  loss_fn = make_loss_fn(model)
  flat, unravel = ravel_pytree(params)
  assert model.apply({"params": params}, union).dtype == jnp.float64
  return dict(
      model=model,
      params=params,
      loss_fn=loss_fn,
      b1=b1,
      b2=b2,
      union=union,
      flat=flat,
      unravel=unravel,
      dense=np.asarray(curvax.dense_hessian(loss_fn, params, union)),
      tol=1e-10,
      v=np.asarray(jax.random.normal(jax.random.key(1), flat.shape, jnp.float64)),
  )


def _rel(a, b):
  return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def test_hvp_equals_dense_hessian_jit_and_no_jit(setup):
  s = setup
  matvec = hvp_fn(s["loss_fn"], s["params"], s["union"])
  ref = s["dense"] @ s["v"]
  hv = ravel_pytree(matvec(s["unravel"](s["v"])))[0]
  hv_jit = ravel_pytree(jax.jit(matvec)(s["unravel"](s["v"])))[0]
  assert _rel(hv, ref) < s["tol"] and _rel(hv_jit, ref) < s["tol"]
  assert np.abs(s["dense"] - s["dense"].T).max() <= s["tol"] * np.abs(s["dense"]).max()


@pytest.mark.slow
def test_linearize_once_traces_the_loss_only_when_the_operator_is_built(setup):
  """linearize=True: the gradient is linearized when `hvp_fn` is called; products replay the tangent pass and never
  trace the loss again. linearize=False (jvp per product) traces it at the first product: the counter sees it."""
  s = setup
  traces = []

  def counted_loss(params, batch):
    traces.append(1)  # runs once per trace of the loss, not per execution
    return s["loss_fn"](params, batch)

  v = s["unravel"](s["v"])
  for linearize in (True, False):
    traces.clear()
    matvec = hvp_fn(counted_loss, s["params"], [s["b1"], s["b2"]], linearize=linearize)
    built = len(traces)
    products = [ravel_pytree(matvec(v))[0] for _ in range(3)]
    if linearize:
      assert built >= 1 and len(traces) == built  # traced when linearized (jit-cached across same-shape batches)
    else:
      assert built == 0 and len(traces) > 0
    for hv in products[1:]:
      np.testing.assert_array_equal(hv, products[0])


def test_hvp_float64_to_1e10_on_a_float64_function():
  """A softmax-regression MLP in pure float64: the product is exact to rounding (independent of models/)."""
  rng = np.random.default_rng(3)
  params = {"w1": jnp.asarray(rng.standard_normal((5, 6))), "w2": jnp.asarray(rng.standard_normal((6, 4)))}
  batch = {"x": jnp.asarray(rng.standard_normal((8, 5))), "targets": jnp.asarray(rng.integers(1, 4, 8))}

  def loss(p, b):
    logits = jnp.tanh(b["x"] @ p["w1"]) @ p["w2"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), b["targets"][:, None], 1))

  flat, unravel = ravel_pytree(params)
  v = jnp.asarray(rng.standard_normal(flat.shape))
  ref = curvax.dense_hessian(loss, params, batch) @ v
  assert _rel(ravel_pytree(hvp_fn(loss, params, batch)(unravel(v)))[0], ref) < 1e-12


@pytest.mark.parametrize("linearize", [True, False])
def test_token_weighted_average_equals_hessian_of_the_union(setup, linearize):
  s = setup
  matvec = hvp_fn(s["loss_fn"], s["params"], [s["b1"], s["b2"]], linearize=linearize)
  hv = ravel_pytree(matvec(s["unravel"](s["v"])))[0]
  assert _rel(hv, s["dense"] @ s["v"]) < s["tol"]
  if not linearize:  # (shares the compiled product) equal weights give a different matrix: 7 vs 5 tokens matter
    equal = hvp_fn(s["loss_fn"], s["params"], [s["b1"], s["b2"]], weights=[1.0, 1.0], linearize=False)
    assert _rel(ravel_pytree(equal(s["unravel"](s["v"])))[0], s["dense"] @ s["v"]) > 1e-3


@pytest.mark.parametrize("name", ["encoder/layer_0/attn_q", "decoder/layer_0/norms"])
def test_block_operator_is_the_dense_sub_block(setup, name):
  s = setup
  matvec, example = block_hvp_fn(s["loss_fn"], s["params"], s["union"], name, model=s["model"])
  idx = block_indices(s["params"], name, model=s["model"])
  sub = s["dense"][np.ix_(idx, idx)]
  flat, unravel = ravel_pytree(example)
  v = s["v"][: flat.size]
  assert (
      flat.size
      == idx.size
      == sum(np.size(x) for x in jax.tree.leaves(block_params(s["params"], name, model=s["model"])))
  )
  assert _rel(ravel_pytree(matvec(unravel(v)))[0], sub @ v) < s["tol"]


def test_model_blocks_names_and_bad_name(setup):
  names = set(model_blocks(setup["model"]))
  expected = {
      f"{st}/layer_0/{k}"
      for st in ("encoder", "decoder")
      for k in ("attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out", "norms")
  }
  expected |= {f"decoder/layer_0/cross_attn_{k}" for k in ("q", "k", "v", "out")} | {"embedding"}
  assert names == expected
  with pytest.raises(ValueError, match="valid blocks"):
    block_hvp_fn(setup["loss_fn"], setup["params"], setup["union"], "encoder/layer_7/attn_q", model=setup["model"])


def test_embedding_norm_is_a_block_of_its_own():
  config = tiny.model_config(
      vocab_size=VOCAB, max_len=8, position="learned", embedding_norm=True, scale_embeddings=True
  )
  tokens = jnp.ones((2, 4), jnp.int32)
  shapes = jax.eval_shape(get_model(config).init, jax.random.key(0), {"inputs": tokens, "targets": tokens})["params"]
  blocks = model_blocks(config)
  roles = jax.tree.leaves(param_roles(config, shapes), is_leaf=lambda r: isinstance(r, ParamRole))
  for stack in ("encoder", "decoder"):
    selected = sorted(r.path for r in roles if blocks[f"{stack}/embedding_norm"](r))
    assert selected == [f"{stack}/embedding_norm/bias", f"{stack}/embedding_norm/scale"], selected


def test_gate_matrices_are_blocks_of_their_own():
  """A gated MLP's W (mlp_gate) and gated attention's W_θ (attn_gate) are per-layer blocks, each selecting its kernel."""
  config = tiny.model_config(
      vocab_size=VOCAB, arch="decoder", mlp="swiglu", attention_gate=True, scale_embeddings=True, max_len=256
  )
  blocks = model_blocks(config)
  roles = jax.tree.leaves(param_roles(config), is_leaf=lambda r: isinstance(r, ParamRole))
  assert [r.path for r in roles if blocks["decoder/layer_0/mlp_gate"](r)] == ["decoder/layer_0/mlp/wg/kernel"]
  assert [r.path for r in roles if blocks["decoder/layer_0/attn_gate"](r)] == ["decoder/layer_0/self_attn/gate/kernel"]


@pytest.mark.slow
def test_ggn_symmetric_psd_and_equal_to_dense_jt_h_j(setup):
  """On a tiny decoder-only model (its Jacobian compiles far faster than the encoder-decoder's)."""
  s = setup
  config = tiny.model_config(
      vocab_size=VOCAB, arch="decoder", d_model=4, d_ff=4, max_len=8, dtype=jnp.float64, param_dtype=jnp.float64
  )
  model, batch = get_model(config), {"targets": s["union"]["targets"]}
  params = jax.jit(model.init)(jax.random.key(2), batch)["params"]
  logits_fn = lambda p, b: model.apply({"params": p}, b)
  flat, unravel = ravel_pytree(params)
  matvec = ggn_vp_fn(logits_fn, params, batch)
  mv = lambda x: np.asarray(ravel_pytree(matvec(unravel(jnp.asarray(x))))[0])
  jac = np.asarray(jax.jacobian(lambda x: logits_fn(unravel(x), batch))(flat))  # [B, T, V, n]
  p = np.asarray(jax.nn.softmax(logits_fn(params, batch).astype(jnp.float64), -1))
  mask = np.asarray(batch["targets"] > 0)
  g_dense = np.zeros((flat.size, flat.size))
  for bi, ti in zip(*np.nonzero(mask)):
    h_out = (np.diag(p[bi, ti]) - np.outer(p[bi, ti], p[bi, ti])) / mask.sum()
    g_dense += jac[bi, ti].T @ h_out @ jac[bi, ti]
  rng = np.random.default_rng(5)
  u, v = rng.standard_normal(flat.size), rng.standard_normal(flat.size)
  gu, gv = mv(u), mv(v)
  assert _rel(gv, g_dense @ v) < s["tol"]
  scale = np.abs(g_dense).max()
  assert abs(u @ gv - v @ gu) <= s["tol"] * np.linalg.norm(u) * np.linalg.norm(v) * scale
  for w in rng.standard_normal((3, flat.size)):
    assert w @ mv(w) >= -s["tol"] * (w @ w) * scale
  assert np.linalg.eigvalsh(g_dense).min() >= -s["tol"] * scale  # PSD by construction, up to rounding


def test_output_hessian_is_softmax_jacobian():
  """H_out = diag(p) − ppᵀ is the Hessian of −log softmax(z)_y in z (any label), divided by the token count: the
  Gauss–Newton of the logits themselves (J = I) on one token is H_out."""
  z = jnp.asarray(np.random.default_rng(2).standard_normal((1, 1, 5)))
  u = jnp.asarray(np.random.default_rng(3).standard_normal((1, 1, 5)))
  ref = jax.hessian(lambda x: -jax.nn.log_softmax(x)[2])(z[0, 0]) @ u[0, 0]
  batch = {"targets": jnp.full((1, 1), 2)}
  out = ggn_vp_fn(lambda logits, b: logits, z, batch)(u)
  np.testing.assert_allclose(out[0, 0], ref, rtol=1e-12, atol=1e-14)


def test_bad_inputs_fail_before_compute(setup):
  with pytest.raises(ValueError, match="empty list"):
    hvp_fn(setup["loss_fn"], setup["params"], [])
  with pytest.raises(ValueError, match="one entry per batch"):
    hvp_fn(setup["loss_fn"], setup["params"], [setup["b1"], setup["b2"]], weights=[1.0])
