"""Claim 11 (experiments/claims/width.py, configs/claims/width.py): the lr-scaled preconditioned sharpness on a toy
whose answer is known, the verdict's rules on hand-made numbers, measure on hand-made run folders, the embedding-lr
key, the design at every scale and the study end to end at tiny."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import models
import train.config
from analysis import hessian
from analysis.spectrum import top_eigenvalues
from analysis.stability import PreconditionedOperator, adam_state_preconditioner_scale, lr_multiplier_scale
from configs.claims import width as width_config
from experiments import grid as grid_lib
from experiments import study
from experiments.claims import run
from experiments.claims import width as claim
from models.config import ModelConfig

# ------------------------------------------------------------------ the toy: µP flat, SP growing (known answer)

LR, BASE = 1e-2, 1


def _toy(parameterization, n, seed):
  """A 3-layer linear net f(x) = c·x uᵀWv (u: the 1×n input layer, W: n×n hidden, v: the readout), one example,
  MSE, after Adam's first update on the target 3. SP: c = 1, every lr ×1; µP (Tensor Programs V, Table 3, as
  models/parameterization.py: readout multiplier c = 1/r, hidden lr ×1/r, r = n/BASE). Returns the study's number
  η·λ_max(M·P⁻¹H) by its code path (Adam's state → P, lr multipliers → M, analysis.stability's operator, Lanczos)
  and its closed form: H is taken where the residual is 0 (target f(θ₀)), so H = JJᵀ (rank one, no residual
  term) and λ_max(M^½P^-½JJᵀP^-½M^½) = Σ_i m_i J_i²/P_i exactly."""
  a, b, c = jax.random.split(jax.random.key(seed), 3)
  params = {
      "u": jax.random.normal(a, (1, n)),
      "w": jax.random.normal(b, (n, n)) / math.sqrt(n),
      "v": jax.random.normal(c, (n,)) / math.sqrt(n),
  }
  r = n / BASE
  scale = 1 / r if parameterization == "mup" else 1.0
  mult = {"u": 1.0, "w": scale, "v": 1.0}
  f = lambda p: scale * (p["u"] @ p["w"] @ p["v"])[0]
  loss = lambda p, batch: 0.5 * jnp.mean((f(p) - batch["targets"]) ** 2)
  tx = optax.scale_by_adam(b1=0.9, b2=0.98, eps=1e-9)
  _, adam = tx.update(jax.grad(loss)(params, {"targets": jnp.full((1,), 3.0)}), tx.init(params), params)
  p_scale = adam_state_preconditioner_scale(adam.nu, adam.count, 0.98, 1e-9) * lr_multiplier_scale(mult, params)
  op = hessian.hvp_fn(loss, params, [{"targets": jnp.full((1,), f(params))}], weights=[1.0])
  top = top_eigenvalues(PreconditionedOperator(op, p_scale, op.spec), params, 1, num_steps=8, key=jax.random.key(0))
  jac = jax.flatten_util.ravel_pytree(jax.grad(f)(params))[0]
  return LR * float(top.values[0]), LR * float(jnp.sum((p_scale * jac) ** 2))


def test_the_toy_where_the_answer_is_known_mup_flat_sp_growing():
  """Σ m_i J_i²/|g_i| = Σ m_i |J_i| / |residual|: the ℓ1 norm of M·J. Under SP it grows as n^1.5 (W's n² entries of
  size n^-½); under µP the hidden part shrinks as n^-½ and the readout's stays n/r = BASE: flat as n grows."""
  out = {}
  for p in ("standard", "mup"):
    for n in (64, 256):
      got = [_toy(p, n, s) for s in range(3)]
      for lanczos, closed in got:  # the study's code path equals the closed form
        assert lanczos == pytest.approx(closed, rel=1e-4)
      out[p, n] = np.mean([x for x, _ in got])
  sp, mu = out["standard", 256] / out["standard", 64], out["mup", 256] / out["mup", 64]
  assert 0.8 < mu < 1.1, out  # flat (the n^-½ remainder: 0.9 at these widths)
  assert sp > 4, out  # n^1.5 predicts 8
