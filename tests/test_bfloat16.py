"""bfloat16 compute with float32 parameters: one Dense's error is three roundings (float32 accumulation), and a whole
encoder-decoder's logits stay within the error of its chain of roundings, every matmul on bfloat16 operands."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models import get_model
from models.dense import Dense
from tests import tiny

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


@pytest.mark.slow
def test_bfloat16_compute():
  """bfloat16 compute (float32 params, cast per op) against float32 compute with the same params.

  Every matmul takes bfloat16 operands. Along a logit's path this encoder-decoder (1 + 1 layers: embedding, self-
  and cross-attention with q/k/v/out projections, softmax, MLP, residual adds and norms, readout) rounds about
  k = 50 times in sequence, so the logits' relative RMS error is at most about 0.42u·√50 ≈ 3u if every rounding
  reached them unattenuated; the bound is 4u ≈ 1.6% (measured 1.0–1.5u over seeds and norm placements: norms and
  sums average part of the errors away). The old check allowed 15% of the largest logit (≈ 40u in RMS terms).
  """
  c32 = tiny.model_config(arch="encoder_decoder", norm_position="pre", d_model=32, d_ff=64)
  c16 = tiny.model_config(arch="encoder_decoder", norm_position="pre", d_model=32, d_ff=64, dtype=jnp.bfloat16)
  b = tiny.batch(b=8, s=8, t=8)
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
