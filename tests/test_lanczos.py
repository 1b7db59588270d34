"""Tests for curvax/lanczos.py (with its Ritz pairs, options and orthogonality: curvax/ritz.py,
curvax/lanczos_options.py, curvax/orthogonality.py; and analysis/progress.py's lines) against numpy.linalg.eigh, matfree, closed-form spectra and the
Strakoš matrix."""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from matfree import decomp

import curvax
from analysis.progress import progress_printer
from curvax import orthogonality
from curvax.lanczos_options import REORTH_PASSES, basis_bytes
from curvax.orthogonality import REORTH_CHUNK, cgs_reorthogonalize, measured_orthogonality_loss, project_out
from curvax.ritz import ritz_vectors


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _random_symmetric(n, seed):
  b = np.random.default_rng(seed).standard_normal((n, n))
  return (b + b.T) / 2


def _with_spectrum(eigs, seed):
  n = len(eigs)
  u = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]
  return u @ np.diag(eigs) @ u.T


def _strakos(n=200, lam_1=0.1, lam_n=100.0, rho=0.9):
  """Strakoš (1991) test spectrum: λ_i = λ_1 + (i−1)/(n−1)(λ_n − λ_1)ρ^{n−i}, clustered low, outliers on top."""
  i = np.arange(1, n + 1)
  return lam_1 + (i - 1) / (n - 1) * (lam_n - lam_1) * rho ** (n - i)


@pytest.mark.parametrize("jit", [False, True])
def test_n_steps_reproduce_eigh(jit):
  n = 30
  a = jnp.asarray(_random_symmetric(n, 0))
  v0 = jnp.asarray(np.random.default_rng(1).standard_normal(n))
  run = lambda v: curvax.lanczos(curvax.as_operator(lambda x: a @ x, v), num_steps=n, v0=v)
  res = jax.jit(run)(v0) if jit else run(v0)
  scale = np.max(np.abs(np.linalg.eigvalsh(a)))
  assert int(res.num_steps_taken) == n and bool(jnp.all(res.ritz_mask))
  np.testing.assert_allclose(res.ritz_values, np.linalg.eigvalsh(a), atol=1e-12 * scale, rtol=0)
  assert float(res.orthogonality_loss) < 1e-13
  assert float(jnp.max(res.ritz_bounds)) < 1e-10 * scale  # the Krylov space is the whole space
  np.testing.assert_allclose(jnp.sum(res.first_components**2), 1.0, atol=1e-13)


def test_tridiagonal_matches_matfree():
  n, m = 60, 15
  a = jnp.asarray(_with_spectrum(np.linspace(1.0, 2.0, n), 2))
  v0 = jnp.asarray(np.random.default_rng(3).standard_normal(n))
  ours = curvax.lanczos(curvax.as_operator(lambda x: a @ x, v0), num_steps=m, v0=v0)
  theirs = decomp.tridiag_sym(m, materialize=False, custom_vjp=False)(lambda x: a @ x, v0 / jnp.linalg.norm(v0))
  diag, offdiag = theirs.J_small
  np.testing.assert_allclose(ours.alphas, diag, atol=1e-12)
  np.testing.assert_allclose(ours.betas[:-1], offdiag, atol=1e-12)
  np.testing.assert_allclose(ours.betas[-1], jnp.linalg.norm(theirs.residual), atol=1e-12)


def test_float32_extremes_and_orthogonality():
  with jax.enable_x64(False):
    eigs = np.concatenate([np.linspace(0.0, 1.0, 98), [3.0, 5.0]])
    a = jnp.asarray(_with_spectrum(eigs, 4), jnp.float32)
    res = curvax.lanczos(
        curvax.as_operator(lambda x: a @ x, jnp.ones(100, jnp.float32)), num_steps=30, v0=jnp.ones(100, jnp.float32)
    )
    assert res.alphas.dtype == jnp.float32
    theta, bounds = res.valid_ritz()
    np.testing.assert_allclose(theta[-2:], [3.0, 5.0], rtol=1e-5)
    assert np.all(bounds[-2:] < 1e-4) and float(res.orthogonality_loss) < 1e-5


def _ghost_counts(res, eigs, top=3):
  theta, bounds = res.valid_ritz()
  converged = theta[bounds < 1e-8 * np.max(eigs)]
  return [int(np.sum(np.abs(converged - lam) < 1e-6)) for lam in np.sort(eigs)[-top:]]


def test_strakos_full_reorthogonalization_has_no_ghosts_and_none_does():
  eigs = _strakos()
  d, v0, m = jnp.asarray(eigs), jnp.ones(len(eigs)), 60
  full = curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=m, v0=v0, reorthogonalize="full")
  assert _ghost_counts(full, eigs) == [1, 1, 1]
  assert float(full.orthogonality_loss) < 1e-10
  assert full.orthogonality.startswith("measured")
  plain = curvax.lanczos(
      curvax.as_operator(lambda x: d * x, v0), num_steps=m, v0=v0, reorthogonalize="none", return_basis=True
  )
  assert max(_ghost_counts(plain, eigs)) >= 2  # Paige (1976): converged Ritz values get duplicated
  assert float(plain.orthogonality_loss) > 0.1
  # Without the basis the loss is estimated by Simon's ω-recurrence; it must see the same loss.
  estimated = curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=m, v0=v0, reorthogonalize="none")
  assert estimated.orthogonality.startswith("estimated") and estimated.basis is None
  assert float(estimated.orthogonality_loss) > 0.1
  np.testing.assert_allclose(estimated.ritz_values, plain.ritz_values, rtol=1e-12)


@pytest.mark.parametrize("jit", [False, True])
def test_partial_reorthogonalization_is_semi_orthogonal_and_matches_full(jit):
  """Simon (1984): CGS only when the ω estimate exceeds √ε keeps |q_iᵀq_j| ≲ √ε, and then T_k's Ritz values equal
  those of full reorthogonalization to working precision, without ghosts, at a fraction of the CGS passes."""
  eigs = _strakos()
  d, v0, m = jnp.asarray(eigs), jnp.ones(len(eigs)), 60
  run = lambda mode: curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=m, v0=v0, reorthogonalize=mode)
  if jit:
    run = jax.jit(run, static_argnums=0)
  full, partial, plain = run("full"), run("partial"), run("none")
  sqrt_eps = np.sqrt(np.finfo(np.float64).eps)
  assert 1e-12 < float(partial.orthogonality_loss) < 10 * sqrt_eps  # measured: semi-, not fully, orthogonal
  assert partial.orthogonality.startswith("measured")
  assert int(full.num_reorthogonalizations) == m and int(plain.num_reorthogonalizations) == 0
  assert 0 < int(partial.num_reorthogonalizations) <= m // 2
  assert _ghost_counts(partial, eigs) == [1, 1, 1]
  np.testing.assert_allclose(partial.ritz_values, full.ritz_values, rtol=0, atol=1e-12 * eigs.max())
  np.testing.assert_allclose(partial.ritz_bounds, full.ritz_bounds, rtol=0, atol=1e-8 * eigs.max())


def test_partial_reorthogonalization_breakdown_has_no_nan():
  rank = 6
  a = np.diag(np.concatenate([np.arange(1.0, rank + 1), np.zeros(24)]))
  res = curvax.lanczos(
      curvax.as_operator(lambda x: jnp.asarray(a) @ x, jnp.ones(30)),
      num_steps=20,
      v0=jnp.ones(30),
      reorthogonalize="partial",
  )
  assert bool(res.breakdown) and int(res.num_steps_taken) <= rank + 1
  assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(res))
  np.testing.assert_allclose(res.valid_ritz()[0][-1], rank, rtol=1e-10)


def test_omega_estimate_small_before_loss_of_orthogonality():
  eigs = _strakos()
  d, v0 = jnp.asarray(eigs), jnp.ones(len(eigs))
  measured = curvax.lanczos(
      curvax.as_operator(lambda x: d * x, v0), num_steps=10, v0=v0, reorthogonalize="none", return_basis=True
  )
  estimated = curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=10, v0=v0, reorthogonalize="none")
  assert float(measured.orthogonality_loss) < 1e-12
  assert float(estimated.orthogonality_loss) < 1e-12


def _assert_no_nan(res):
  for leaf in jax.tree_util.tree_leaves(res):
    assert bool(jnp.all(jnp.isfinite(leaf))), leaf


@pytest.mark.parametrize("in_range", [False, True])
def test_rank_deficient_breakdown(in_range):
  n, rank, m = 50, 5, 20
  rng = np.random.default_rng(5)
  u = np.linalg.qr(rng.standard_normal((n, rank)))[0]
  a = jnp.asarray(u @ np.diag([1.0, 2.0, 3.0, 4.0, 5.0]) @ u.T)
  v0 = rng.standard_normal(n)
  if in_range:
    v0 = u @ (u.T @ v0)  # start in the range: the Krylov space is the 5 eigenvectors
  res = curvax.lanczos(
      curvax.as_operator(lambda x: a @ x, jnp.asarray(v0)), num_steps=m, v0=jnp.asarray(v0), return_basis=True
  )
  _assert_no_nan(res)
  expected_steps = rank if in_range else rank + 1  # a null-space component adds the eigenvalue 0
  assert bool(res.breakdown) and int(res.breakdown_step) == expected_steps - 1
  assert int(res.num_steps_taken) == expected_steps
  assert np.all(np.asarray(res.alphas)[expected_steps:] == 0) and np.all(np.asarray(res.betas)[expected_steps:] == 0)
  assert not np.any(np.asarray(res.ritz_mask)[expected_steps:])
  theta, bounds = res.valid_ritz()
  nonzero = theta[np.abs(theta) > 1e-8]
  np.testing.assert_allclose(nonzero, [1.0, 2.0, 3.0, 4.0, 5.0], atol=1e-10)
  assert len(theta) - len(nonzero) == (0 if in_range else 1)
  assert np.all(bounds < 1e-8) and float(res.orthogonality_loss) < 1e-12
  assert "stop early" in res.breakdown_policy
  assert int(res.num_reorthogonalizations) == expected_steps  # full: every step taken, the breakdown step too


def test_float32_breakdown_gives_no_nan():
  with jax.enable_x64(False):
    rng = np.random.default_rng(6)
    u = np.linalg.qr(rng.standard_normal((50, 5)))[0]
    a = jnp.asarray(u @ np.diag([1.0, 2.0, 3.0, 4.0, 5.0]) @ u.T, jnp.float32)
    v0 = jnp.asarray(rng.standard_normal(50), jnp.float32)
    res = curvax.lanczos(curvax.as_operator(lambda x: a @ x, v0), num_steps=20, v0=v0)
    _assert_no_nan(res)
    assert bool(res.breakdown) and int(res.num_steps_taken) == 6


def test_zero_start_vector_breaks_down_without_nan():
  res = curvax.lanczos(curvax.as_operator(lambda x: 2.0 * x, jnp.zeros(10)), num_steps=5, v0=jnp.zeros(10))
  _assert_no_nan(res)
  assert bool(res.breakdown) and int(res.breakdown_step) == 0 and int(res.num_steps_taken) == 1


def test_pytree_matches_flat():
  n = 20
  a = jnp.asarray(_random_symmetric(n, 7))
  tree = {
      "w": jnp.asarray(np.random.default_rng(8).standard_normal((3, 4))),
      "b": jnp.asarray(np.random.default_rng(9).standard_normal(8)),
  }
  flat, unravel = ravel_pytree(tree)
  tree_matvec = lambda t: unravel(a @ ravel_pytree(t)[0])
  res_tree = curvax.lanczos(curvax.as_operator(tree_matvec, tree), num_steps=12, v0=tree, return_basis=True)
  res_flat = curvax.lanczos(curvax.as_operator(lambda x: a @ x, flat), num_steps=12, v0=flat, return_basis=True)
  for name in ["alphas", "betas", "ritz_values", "ritz_bounds", "basis"]:
    np.testing.assert_allclose(getattr(res_tree, name), getattr(res_flat, name), atol=1e-13, err_msg=name)
  # Ritz pairs: A V_k = V_k T_k + β_k q_k e_kᵀ gives ‖A y_i − θ_i y_i‖ = |β_k s_{k,i}| exactly.
  y_mxn = ritz_vectors(res_flat)
  residual = jnp.linalg.norm(y_mxn @ a - res_flat.ritz_values[:, None] * y_mxn, axis=1)
  np.testing.assert_allclose(residual, res_flat.ritz_bounds, atol=1e-12)
  np.testing.assert_allclose(jnp.linalg.norm(y_mxn, axis=1), 1.0, atol=1e-12)
  with pytest.raises(ValueError, match="return_basis=True"):
    ritz_vectors(curvax.lanczos(curvax.as_operator(lambda x: a @ x, flat), num_steps=3, v0=flat))


@pytest.mark.parametrize("mode,passes", list(itertools.product(curvax.REORTHOGONALIZATIONS, REORTH_PASSES)))
def test_compiled_program_does_not_grow_with_num_steps(mode, passes):
  n = 128

  def hlo(num_steps):
    fn = jax.jit(
        lambda a, v: curvax.lanczos(
            curvax.as_operator(lambda x: a @ x, v),
            num_steps=num_steps,
            v0=v,
            reorthogonalize=mode,
            reorth_passes=passes,
        ).ritz_values
    )
    return fn.lower(jnp.zeros((n, n)), jnp.ones(n)).as_text()

  short, long = hlo(10), hlo(100)
  # Identical programs up to the numbers in shapes and constants: the loop is not unrolled.
  assert re.sub(r"\d+", "#", short) == re.sub(r"\d+", "#", long)


def test_memory_guard_message_and_low_memory_option():
  n, m, limit = 1000, 99, 100_000
  v0 = jnp.ones(n, jnp.float32)
  needed = basis_bytes(m, n, jnp.float32)
  assert needed == 100 * 1000 * 4
  with pytest.raises(ValueError) as err:
    curvax.lanczos(curvax.as_operator(lambda x: 2.0 * x, v0), num_steps=m, v0=v0, max_basis_bytes=limit)
  expected = ["num_steps=99", "n=1000", "float32", str(needed), f"max_basis_bytes={limit}", "reorthogonalize='none'"]
  for text in expected:
    assert text in str(err.value), text
  with pytest.raises(ValueError, match="max_basis_bytes"):
    curvax.lanczos(
        curvax.as_operator(lambda x: 2.0 * x, v0),
        num_steps=m,
        v0=v0,
        max_basis_bytes=limit,
        reorthogonalize="none",
        return_basis=True,
    )
  res = curvax.lanczos(
      curvax.as_operator(lambda x: jnp.arange(n, dtype=x.dtype) * x, v0),
      num_steps=m,
      v0=v0,
      max_basis_bytes=limit,
      reorthogonalize="none",
  )
  assert res.basis is None and res.orthogonality.startswith("estimated")
  np.testing.assert_allclose(float(res.valid_ritz()[0][-1]), n - 1, rtol=1e-4)  # largest eigenvalue converged


def test_bad_arguments_raise():
  mv, v0 = (lambda x: x), jnp.ones(5)
  with pytest.raises(ValueError, match=r"reorthogonalize='selective'.*\['full', 'partial', 'none'\]"):
    curvax.lanczos(curvax.as_operator(mv, v0), num_steps=3, v0=v0, reorthogonalize="selective")
  with pytest.raises(ValueError, match="num_steps=6 exceeds the dimension n=5"):
    curvax.lanczos(curvax.as_operator(mv, v0), num_steps=6, v0=v0)
  with pytest.raises(ValueError, match="num_steps=0"):
    curvax.lanczos(curvax.as_operator(mv, v0), num_steps=0, v0=v0)
  with pytest.raises(ValueError, match="breakdown_tol=2"):
    curvax.lanczos(curvax.as_operator(mv, v0), num_steps=3, v0=v0, breakdown_tol=2.0)
  with pytest.raises(ValueError, match="real floating dtype"):
    curvax.lanczos(curvax.as_operator(mv, jnp.ones(5, jnp.int32)), num_steps=3, v0=jnp.ones(5, jnp.int32))


def test_progress_callback_every_n_steps():
  steps, lines = [], []
  d = jnp.asarray(np.linspace(1.0, 2.0, 40))
  curvax.lanczos(
      curvax.as_operator(lambda x: d * x, jnp.ones(40)),
      num_steps=20,
      v0=jnp.ones(40),
      callback=lambda s, m: steps.append((int(s), int(m))),
      callback_every=5,
  )
  jax.effects_barrier()
  assert sorted(steps) == [(5, 20), (10, 20), (15, 20), (20, 20)]
  printer = progress_printer("hessian", print_fn=lines.append)
  printer(5, 20)
  printer(10, 20)
  assert re.fullmatch(r"hessian: step 10/20, [\d.]+ s elapsed, ETA [\d.]+ s", lines[-1])


@pytest.mark.parametrize("rows,i", [(13, 0), (13, 7), (13, 8), (13, 12), (24, 15), (24, 23), (5, 3)])
def test_chunked_projection_matches_dense(rows, i):
  """One CGS pass over chunks (clamped, overlapping last chunk) equals w − V_iᵀ(V_i w) on the first i+1 rows."""
  rng = np.random.default_rng(10)
  v_rxn, w = rng.standard_normal((rows, 40)), rng.standard_normal(40)
  expected = w - v_rxn[: i + 1].T @ (v_rxn[: i + 1] @ w)
  got = project_out(jnp.asarray(v_rxn), jnp.asarray(w), jnp.int32(i), min(REORTH_CHUNK, rows))
  np.testing.assert_allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("n,k", [(53, 6), (53, 4), (53, 1), (48, 5), (11, 6)])  # tail, no tail, only a tail
def test_blocked_gram_matches_dense(monkeypatch, n, k):
  """The orthogonality loss accumulated over column blocks equals max|V_kV_kᵀ − I| computed densely."""
  monkeypatch.setattr(orthogonality, "GRAM_COLUMNS", 16)
  v_rxn = np.linalg.qr(np.random.default_rng(14).standard_normal((n, 6)))[0].T
  v_rxn = v_rxn + 1e-6 * np.random.default_rng(15).standard_normal(v_rxn.shape)
  expected = np.max(np.abs(v_rxn[:k] @ v_rxn[:k].T - np.eye(k)))
  for fn in (measured_orthogonality_loss, jax.jit(measured_orthogonality_loss)):
    np.testing.assert_allclose(fn(jnp.asarray(v_rxn), jnp.int32(k)), expected, rtol=1e-10)


def test_auto_second_pass_restores_orthogonality_after_cancellation():
  """Kahan–Parlett: a w almost in span(V) loses orthogonality in one CGS pass; "auto" detects it and repeats."""
  n, k = 200, 20
  q_kxn = np.linalg.qr(np.random.default_rng(11).standard_normal((n, k)))[0].T
  perp = np.random.default_rng(12).standard_normal(n)
  perp -= q_kxn.T @ (q_kxn @ perp)
  w = q_kxn.T @ np.random.default_rng(13).standard_normal(k) + 1e-10 * perp  # ‖w after‖/‖w before‖ ≈ 1e-10
  basis = jnp.asarray(np.concatenate([q_kxn, np.zeros((4, n))]))  # unfilled rows stay zero, as in lanczos

  def rel_overlap(v):
    return np.max(np.abs(q_kxn @ np.asarray(v))) / np.linalg.norm(v)

  one_pass = project_out(basis, jnp.asarray(w), jnp.int32(k - 1), REORTH_CHUNK)
  assert rel_overlap(one_pass) > 1e-9  # rounding of size ε‖w‖ is large relative to what is left
  for passes in REORTH_PASSES:
    v, norm = cgs_reorthogonalize(basis, jnp.asarray(w), jnp.int32(k - 1), passes)
    assert rel_overlap(v) < 1e-14, passes
    np.testing.assert_allclose(norm, np.linalg.norm(v), rtol=1e-14)


def test_auto_and_two_passes_agree_on_strakos():
  eigs = _strakos()
  d, v0 = jnp.asarray(eigs), jnp.ones(len(eigs))
  auto = curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=60, v0=v0, reorth_passes="auto")
  two = curvax.lanczos(curvax.as_operator(lambda x: d * x, v0), num_steps=60, v0=v0, reorth_passes=2)
  assert float(auto.orthogonality_loss) < 1e-10 and float(two.orthogonality_loss) < 1e-10
  np.testing.assert_allclose(auto.ritz_values, two.ritz_values, atol=1e-10 * eigs.max())
  np.testing.assert_allclose(auto.ritz_bounds, two.ritz_bounds, atol=1e-8 * eigs.max())


def test_bad_reorth_passes_raises():
  with pytest.raises(ValueError, match=r"reorth_passes=3 is not valid; valid choices: \['auto', 2\]"):
    curvax.lanczos(curvax.as_operator(lambda x: x, jnp.ones(5)), num_steps=3, v0=jnp.ones(5), reorth_passes=3)
