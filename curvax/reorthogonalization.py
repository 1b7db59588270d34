"""The reorthogonalization strategies of `curvax.lanczos`: one step builder per strategy, a registry and its getter.

Contract: `get_strategy(name)(m, n, eps, passes, store[, cgs])` returns a `Step` that the one Lanczos loop body
(`curvax.lanczos.lanczos_core`) calls at every step, so the loop holds no strategy branch:
  * `orthogonalize(s, w, alpha) -> (w, beta, reorthed, aux)`: the new vector w (the three-term recurrence's output)
    made orthogonal as the strategy asks, its norm β, whether it went through the CGS pass, and what `carry` needs;
  * `carry(s, aux, broke, converged) -> dict`: the strategy's own entries of the next loop state (Simon's ω).
`s` is `curvax.lanczos`'s loop state; `m` the steps, `n` the size, `eps` the dtype's ε, `passes` the CGS passes,
`store` whether the basis is stored, `cgs` the CGS pass on it (default `curvax.orthogonality`'s, as is Simon's
ω-recurrence; a basis in host memory brings its own, `curvax.host_basis`).

  * "full": every new vector is orthogonalized against all previous ones by classical Gram-Schmidt (CGS: all
    coefficients h = V w first, then w −= Vᵀh; two BLAS-2 sweeps). `reorth_passes="auto"` (default) repeats the pass
    only when it cancelled, ‖w after‖ < ‖w before‖/√2 (Kahan–Parlett "twice is enough", Parlett 1998 §6.9; Giraud,
    Langou & Rozložník 2005), `reorth_passes=2` always (CGS2). This removes the spurious duplicated ("ghost") Ritz
    values of finite-precision Lanczos (Paige 1976; Strakoš 1991). Memory: (num_steps + 1)·n entries.
  * "partial": Simon's (1984) partial reorthogonalization (PRO; as in Larsen's PROPACK, 1998). Its ω-recurrence
    estimates q_{i+1}ᵀq_j for every j ≤ i at O(m) cost per step; only when an estimate exceeds √ε is the new vector
    orthogonalized against all previous ones (the same CGS pass as "full"), and then once more at the next step
    (q_{i+2} inherits the error of q_i through the recurrence), with the estimates reset to ε. The basis stays
    semi-orthogonal (|q_iᵀq_j| ≲ √ε), enough for T_k to be, to working precision, the projection of A on an
    orthonormal basis of the Krylov space (Simon 1984, Thm. 4): Ritz values as accurate as with "full" and no ghost
    copies. The CGS steps are counted in `num_reorthogonalizations`. Same memory as "full".
  * "none": the three-term recurrence, O(n) memory; its loss of orthogonality (Paige 1976) estimated by Simon's ω.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curvax.orthogonality import cgs_reorthogonalize, omega_update


class Step(NamedTuple):
  """One strategy's part of a Lanczos step (see the module docstring)."""

  orthogonalize: Callable
  carry: Callable


def _no_carry(s, aux, broke, converged):
  del s, aux, broke, converged
  return {}


def full_step(m, n, eps, passes, store, cgs=cgs_reorthogonalize) -> Step:
  """CGS against q_0..q_i at every step."""
  del m, n, eps, store

  def orthogonalize(s, w, alpha):
    del alpha
    w, beta = cgs(s["basis"], w, s["i"], passes)
    return w, beta, jnp.bool_(True), None

  return Step(orthogonalize, _no_carry)


def partial_step(m, n, eps, passes, store, cgs=cgs_reorthogonalize) -> Step:
  """Simon's PRO: the CGS pass when an ω estimate exceeds √ε, and at the step after."""
  del store
  sqrt_eps = float(np.sqrt(eps))

  def orthogonalize(s, w, alpha):
    i = s["i"]
    beta = jnp.linalg.norm(w)
    # Simon's estimate of q_{i+1}ᵀq_j from T alone, before any CGS pass changes w.
    om_next = omega_update(s["om_prev"], s["om_cur"], s["alphas"], s["betas"], i, alpha, beta, eps, n)
    j = jnp.arange(m + 1)
    reorthed = (jnp.max(jnp.where(j < i, jnp.abs(om_next), 0.0)) > sqrt_eps) | s["reorth_next"]
    w, beta = jax.lax.cond(reorthed, lambda w: cgs(s["basis"], w, i, passes), lambda w: (w, beta), w)
    om_next = jnp.where(reorthed & (j < i), eps, om_next)  # q_{i+1} ⟂ q_j to rounding after the CGS pass
    return w, beta, reorthed, (om_next, reorthed)

  def carry(s, aux, broke, converged):
    del converged
    om_next, reorthed = aux
    return dict(
        om_prev=s["om_cur"],
        om_cur=jnp.where(broke, s["om_cur"], om_next),
        reorth_next=reorthed & ~s["reorth_next"],  # Simon: the step after a CGS pass gets one too
    )

  return Step(orthogonalize, carry)


def none_step(m, n, eps, passes, store, cgs=None) -> Step:
  """The plain three-term recurrence; without a stored basis, Simon's ω estimates the orthogonality loss."""
  del passes, cgs

  def orthogonalize(s, w, alpha):
    beta = jnp.linalg.norm(w)
    om_next = (
        None if store else omega_update(s["om_prev"], s["om_cur"], s["alphas"], s["betas"], s["i"], alpha, beta, eps, n)
    )
    return w, beta, jnp.bool_(False), om_next

  def carry(s, om_next, broke, converged):
    if store:  # the loss is measured on the basis after the loop
      return {}
    i, j = s["i"], jnp.arange(m + 1)
    # loss among q_0..q_{i+1}; q_{i+1} only enters T if the next step is taken, hence the mask with i+1<m.
    cur_loss = jnp.max(jnp.where((j <= i) & (i + 1 < m) & ~broke & ~converged, jnp.abs(om_next), 0.0))
    return dict(
        om_prev=s["om_cur"], om_cur=jnp.where(broke, s["om_cur"], om_next), om_max=jnp.maximum(s["om_max"], cur_loss)
    )

  return Step(orthogonalize, carry)


STRATEGIES = {"full": full_step, "partial": partial_step, "none": none_step}


def get_strategy(name: str) -> Callable[..., Step]:
  """The step builder of reorthogonalization `name`; ValueError naming the valid choices otherwise."""
  if name not in STRATEGIES:
    raise ValueError(f"reorthogonalize={name!r} is not valid; valid choices: {list(STRATEGIES)}")
  return STRATEGIES[name]
