"""Orthogonality of a Lanczos basis: the CGS reorthogonalization pass, Simon's ω estimate, and its measurement.

The three pieces the reorthogonalization strategies (`curvax.reorthogonalization`) combine, kept here as pure array
functions of a preallocated `[rows, n]` basis whose rows q_0..q_i are filled and the rest zero:
  * `cgs_reorthogonalize`: classical Gram-Schmidt against q_0..q_i, with Kahan and Parlett's "twice is enough"
    second pass (Parlett 1998, §6.9; Giraud, Langou & Rozložník 2005); what full reorthogonalization runs every
    step and partial reorthogonalization runs when asked.
  * `omega_update`: Simon's (1984) recurrence estimating q_{i+1}ᵀq_j from the tridiagonal alone, at O(m) cost per
    step; the trigger of partial reorthogonalization (PRO) and the orthogonality estimate without a stored basis.
  * `measured_orthogonality_loss`: max|VᵀV − I| over the valid rows, the measured diagnostic.

The memory layout choices (whole-buffer gemv, fused chunk updates, column-blocked Gram) are measured on XLA:CPU;
they keep the same maths on any backend.
"""

import jax
import jax.numpy as jnp
import numpy as np

TWICE_IS_ENOUGH_ETA = 1 / np.sqrt(2)  # Kahan–Parlett threshold for the second CGS pass
REORTH_CHUNK = 8  # basis rows per fused update of the CGS pass
GRAM_COLUMNS = 1 << 14  # basis columns per block of the orthogonality measurement (a cache-sized [m + 1, 16384])


def omega_update(om_prev, om_cur, alphas, betas, i, alpha, beta, eps, n):
  """Simon (1984) ω-recurrence: estimate ω_{i+1,j} ≈ q_{i+1}ᵀq_j (j ≤ i+1) from T alone, O(m) per step.

  β_i ω_{i+1,j} = β_j ω_{i,j+1} + (α_j − α_i) ω_{i,j} + β_{j−1} ω_{i,j−1} − β_{i−1} ω_{i−1,j}, plus a rounding
  term of size ε(β_i + β_j) added with the sign of the value (pessimistic); ω_{i+1,i} = ε√n, ω_{i+1,i+1} = 1.
  """
  size = om_cur.shape[0]
  j = jnp.arange(size)
  beta_j = jnp.concatenate([betas, jnp.zeros((1,), betas.dtype)])  # β_j, j = 0..m
  beta_jm1 = jnp.concatenate([jnp.zeros((1,), betas.dtype), betas])  # β_{j-1}
  alpha_j = jnp.concatenate([alphas, jnp.zeros((1,), alphas.dtype)])
  up = jnp.concatenate([om_cur[1:], jnp.zeros((1,), om_cur.dtype)])  # ω_{i,j+1}
  down = jnp.concatenate([jnp.zeros((1,), om_cur.dtype), om_cur[:-1]])  # ω_{i,j-1}
  beta_im1 = jnp.where(i > 0, betas[jnp.maximum(i - 1, 0)], 0.0)
  raw = beta_j * up + (alpha_j - alpha) * om_cur + beta_jm1 * down - beta_im1 * om_prev
  raw = raw + jnp.sign(raw) * eps * (beta + beta_j)
  safe_beta = jnp.where(beta > 0, beta, 1.0)
  # |q_iᵀq_j| ≤ 1 for unit vectors: clipping keeps the estimate meaningful after orthogonality is lost.
  om_next = jnp.where(j < i, jnp.clip(raw / safe_beta, -1.0, 1.0), 0.0)
  om_next = jnp.where(j == i, eps * np.sqrt(n), om_next)
  om_next = jnp.where(j == i + 1, 1.0, om_next)
  return om_next.astype(om_cur.dtype)


def project_out(basis, w, i, chunk):
  """One classical Gram-Schmidt pass: w − V_iᵀ(V_i w) with V_i = rows q_0..q_i of the preallocated basis.

  The coefficients h = V w come from one gemv over the whole buffer (rows beyond i are still zero and are
  masked): on XLA:CPU a dynamically sliced dot operand is first copied, which costs more than reading the
  unfilled rows (the per-row costs are measured in reports/BENCH_HESSIAN.md). The update w −= V_iᵀ h touches
  only the ceil((i+1)/chunk) chunks holding filled rows, each as `chunk` axpys that XLA fuses into one loop
  over w; the last chunk's start is clamped so it never runs past the buffer, and rows it shares with the
  previous chunk are masked.
  """
  rows = basis.shape[0]
  h = jnp.where(jnp.arange(rows) <= i, basis @ w, 0.0)

  def update(c, w):
    start = jnp.minimum(c * chunk, rows - chunk)
    h_c = jax.lax.dynamic_slice_in_dim(h, start, chunk)
    h_c = jnp.where(start + jnp.arange(chunk) >= c * chunk, h_c, 0.0)  # already subtracted by chunk c − 1
    for r in range(chunk):  # static unroll of `chunk` (fixed, not num_steps): fused into one pass over w
      w = w - h_c[r] * jax.lax.dynamic_index_in_dim(basis, start + r, keepdims=False)
    return w

  return jax.lax.fori_loop(0, i // chunk + 1, update, w)


def cgs_reorthogonalize(basis, w, i, passes):
  """Orthogonalize w against q_0..q_i by CGS, a second pass always (passes=2) or only if needed ("auto").

  "auto" is Kahan and Parlett's "twice is enough" test (Parlett 1998, §6.9; Giraud, Langou & Rozložník 2005):
  a second pass is done only when the first one cancelled, ‖w after‖ < η ‖w before‖ with η = 1/√2; otherwise
  w is already orthogonal to working precision. Returns (w, ‖w‖).
  """
  chunk = min(REORTH_CHUNK, basis.shape[0])

  def second_pass(w):
    w = project_out(basis, w, i, chunk)
    return w, jnp.linalg.norm(w)

  norm_in = jnp.linalg.norm(w)
  w = project_out(basis, w, i, chunk)
  if passes == 2:
    return second_pass(w)
  norm_out = jnp.linalg.norm(w)
  # lax.cond, not a select: the skipped pass costs nothing.
  return jax.lax.cond(norm_out < TWICE_IS_ENOUGH_ETA * norm_in, second_pass, lambda w: (w, norm_out), w)


def measured_orthogonality_loss(basis, k):
  """max_{i,j<k} |q_iᵀq_j − δ_ij| over the first k rows of the [rows, n] basis (`gram_deviation`)."""
  return jnp.max(jnp.abs(gram_deviation(basis, k)))


def gram_deviation(basis, k):
  """Q_kᵀQ_k − I over the first k rows of the [rows, n] basis ([rows, rows], zero outside the valid block).

  The Gram matrix is accumulated over blocks of GRAM_COLUMNS columns: each [rows, GRAM_COLUMNS] block fits in
  cache, where XLA:CPU multiplies it several times faster than the single skinny [rows, n] x [n, rows] product
  (measured in reports/BENCH_HESSIAN.md), and the blocked sum is also more accurate. The whole buffer is used
  (rows ≥ k are masked), as slicing it by a traced k would copy it.
  """
  rows, n = basis.shape
  blocks = n // GRAM_COLUMNS
  tail = basis[:, blocks * GRAM_COLUMNS :]
  gram = tail @ tail.T
  if blocks:

    def add_block(c, gram):
      block = jax.lax.dynamic_slice_in_dim(basis, c * GRAM_COLUMNS, GRAM_COLUMNS, axis=1)
      return gram + block @ block.T

    gram = jax.lax.fori_loop(0, blocks, add_block, gram)
  valid = jnp.arange(rows) < k
  dev = gram - jnp.eye(rows, dtype=basis.dtype)
  return jnp.where(valid[:, None] & valid[None, :], dev, 0.0)
