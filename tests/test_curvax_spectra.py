"""curvax's routines, operator first, on the Hessian of a plain JAX MLP classifier (tuple batches, label 0, float64)
against `numpy.linalg.eigh` of its dense matrix: extreme eigenvalues within their bounds, the trace and the SLQ
density's first two moments within their standard errors; and a second batch or checkpoint compiles nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import curvax
from tests import curvax_mlp as mlp
from tests.conftest import count_compiles


@pytest.fixture(scope="module", autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def setup(x64):
  params, batch = mlp.init_params(0), mlp.make_batch(1)
  op = curvax.hessian(mlp.loss_fn, params, batch)
  eigs = np.linalg.eigvalsh(mlp.dense_hessian(params, batch))
  return dict(params=params, batch=batch, op=op, eigs=eigs)


def test_top_and_bottom_eigenvalues_lie_within_their_bounds(setup):
  op, eigs = setup["op"], setup["eigs"]
  top = curvax.top_eigenvalues(op, 2, num_steps=op.size, key=jax.random.key(0))
  bottom = curvax.bottom_eigenvalues(op, 2, num_steps=op.size, key=jax.random.key(1))
  for res, ref in ((top, eigs[::-1][:2]), (bottom, eigs[:2])):
    values, bounds = np.asarray(res.values), np.asarray(res.bounds)
    assert np.all(np.abs(values - ref) <= bounds), (values, ref, bounds)
    assert np.all(bounds < 1e-10 * np.abs(eigs).max())  # the whole Krylov space: converged to rounding
  assert eigs[0] < 0 < eigs[-1]  # the MLP's Hessian is indefinite: both ends are tested


def test_lanczos_from_a_key_or_a_start_vector(setup):
  op, eigs = setup["op"], setup["eigs"]
  res = curvax.lanczos(op, num_steps=op.size, key=jax.random.key(2))
  theta, bounds = res.valid_ritz()
  # Lanczos sees each distinct eigenvalue once (a repeated one, e.g. the Hessian's null space, breaks it down early).
  assert bool(res.breakdown) or len(theta) == op.size
  nearest = np.abs(theta[:, None] - eigs[None, :]).min(axis=1)
  assert np.all(nearest <= bounds), (nearest, bounds)
  np.testing.assert_allclose(theta[[0, -1]], eigs[[0, -1]], atol=1e-10 * np.abs(eigs).max())
  v0 = jax.tree.map(jnp.ones_like, setup["params"])
  again = curvax.lanczos(op, num_steps=5, v0=v0)
  assert int(again.num_steps_taken) == 5
  with pytest.raises(ValueError, match="exactly one of key= .* and v0="):
    curvax.lanczos(op, num_steps=5)
  with pytest.raises(ValueError, match="expected a curvax operator"):
    curvax.top_eigenvalues(lambda v: v, 1, num_steps=3, key=jax.random.key(0))


@pytest.mark.parametrize("method", ["hutchinson", "hutch++", "xtrace"])
def test_trace_within_its_standard_error(setup, method):
  op, eigs = setup["op"], setup["eigs"]
  est = curvax.trace(op, num_probes=30, key=jax.random.key(3), method=method)
  assert est.num_matvecs == 30 and est.method == method  # XTrace: 15 probes of 2 matvecs (2·15 < n = 31)
  assert abs(float(est.estimate) - eigs.sum()) <= 4 * float(est.std_error) + 1e-12


def test_xtrace_is_exact_on_a_low_rank_operator():
  """Epperly, Tropp & Webber 2024: with more probes than the rank, the sketch spans the range and XTrace is exact."""
  rng = np.random.default_rng(3)
  u = np.linalg.qr(rng.standard_normal((40, 3)))[0]
  a = u @ np.diag([5.0, -2.0, 1.0]) @ u.T
  est = curvax.trace(curvax.matrix_operator(jnp.asarray(a)), num_probes=10, key=jax.random.key(0), method="xtrace")
  assert abs(float(est.estimate) - 4.0) < 1e-10 and est.num_matvecs == 10
  with pytest.raises(ValueError, match="num_probes=3 must be ≥ 4 for method='xtrace'"):
    curvax.trace(curvax.matrix_operator(jnp.asarray(a)), num_probes=3, key=jax.random.key(0), method="xtrace")


def test_diagonal_within_its_standard_errors_and_exact_for_a_diagonal_operator(setup):
  op = setup["op"]
  dense = mlp.dense_hessian(setup["params"], setup["batch"])
  est = curvax.diagonal(op, num_probes=64, key=jax.random.key(5))
  flat = lambda tree: np.asarray(ravel_pytree(tree)[0])
  err, sem = np.abs(flat(est.estimate) - np.diag(dense)), flat(est.std_error)
  assert est.num_matvecs == 64 and jax.tree.structure(est.estimate) == jax.tree.structure(setup["params"])
  assert np.all(err <= 5 * sem + 1e-12), (err / sem).max()
  assert np.mean(err <= 2 * sem) >= 0.8  # about 95% expected within 2 standard errors
  d = jnp.asarray(np.linspace(-1.0, 2.0, 7))
  exact = curvax.diagonal(curvax.matrix_operator(jnp.diag(d)), num_probes=2, key=jax.random.key(0))
  np.testing.assert_array_equal(exact.estimate, d)
  np.testing.assert_array_equal(exact.std_error, 0.0)


def test_ritz_mass_per_leaf_is_the_top_eigenvectors(setup):
  op, params = setup["op"], setup["params"]
  w, v = np.linalg.eigh(mlp.dense_hessian(params, setup["batch"]))
  assert w[-1] - w[-2] > 0.1 * w[-1]  # a simple top eigenvalue: its eigenvector is defined up to sign
  _, unravel = ravel_pytree(params)
  ref = {p: float(np.sum(np.square(x))) for p, x in zip(curvax.leaf_paths(params), jax.tree.leaves(unravel(v[:, -1])))}
  top = curvax.top_eigenvalues(op, 1, num_steps=20, key=jax.random.key(6), return_basis=True)
  mass = curvax.ritz_mass(op, top)
  assert list(mass) == list(ref) and abs(sum(mass.values()) - 1.0) < 1e-12
  np.testing.assert_allclose([mass[p] for p in ref], list(ref.values()), atol=1e-8)
  bottom = curvax.bottom_eigenvalues(op, 1, num_steps=20, key=jax.random.key(6), return_basis=True)
  y = ravel_pytree(curvax.ritz_vector(op, bottom))[0]
  assert abs(abs(float(y @ v[:, 0])) - 1.0) < 1e-8
  with pytest.raises(ValueError, match="return_basis=True"):
    curvax.ritz_mass(op, curvax.top_eigenvalues(op, 1, num_steps=5, key=jax.random.key(0)))


def test_density_moments_match_the_dense_spectrum(setup):
  """SLQ with unit probes: Σ_i τ_i² θ_i^j = vᵀA^jv exactly for j ≤ 2m − 1, whose mean over probes estimates
  tr(A^j)/n; checked for j = 1, 2 within 4 standard errors over probes (Ubaru, Chen & Saad 2017, Sec. 3)."""
  op, eigs = setup["op"], setup["eigs"]
  n = op.size
  dens = curvax.spectral_density(op, num_steps=8, num_probes=40, key=jax.random.key(4))
  nodes, weights = np.asarray(dens.nodes), np.asarray(dens.weights)
  for j in (1, 2):
    per_probe = np.sum(weights * nodes**j, axis=1)
    sem = per_probe.std(ddof=1) / np.sqrt(len(per_probe))
    assert abs(per_probe.mean() - np.mean(eigs**j)) <= 4 * sem, (j, per_probe.mean(), np.mean(eigs**j), sem)
  grid, density = np.asarray(dens.grid), np.asarray(dens.density)
  assert abs(np.sum((density[1:] + density[:-1]) / 2 * np.diff(grid)) - 1.0) < 1e-3  # ρ integrates to 1
  assert n == 31


@pytest.mark.slow
def test_a_second_batch_or_checkpoint_compiles_nothing(setup):
  routines = {
      "top": lambda op: curvax.top_eigenvalues(op, 1, num_steps=6, key=jax.random.key(0)).values,
      "bottom": lambda op: curvax.bottom_eigenvalues(op, 1, num_steps=6, key=jax.random.key(0)).values,
      "density": lambda op: curvax.spectral_density(
          op, num_steps=5, num_probes=3, key=jax.random.key(0), num_bootstrap=10, grid_size=16
      ).density,
      "trace": lambda op: curvax.trace(op, num_probes=4, key=jax.random.key(0)).estimate,
  }
  blocks = lambda op: curvax.block(op, lambda path: path.startswith("out/"))
  first = curvax.hessian(mlp.loss_fn, setup["params"], setup["batch"])
  for run in routines.values():
    jax.block_until_ready(run(first))
    jax.block_until_ready(run(blocks(first)))
  with count_compiles() as compiles:
    other = curvax.hessian(mlp.loss_fn, mlp.init_params(5), mlp.make_batch(7))  # another checkpoint and batch
    for run in routines.values():
      jax.block_until_ready(run(other))
      jax.block_until_ready(run(blocks(other)))
  assert compiles == [], f"{len(compiles)} compilations"


@pytest.mark.slow
def test_each_public_call_compiles_one_program(setup):
  """What a user's first call pays (issue 25): building the operator is one program (its linearization), and each
  routine is one program for the whole call (start vector, probes, recurrence, bounds, smoothing), with or without
  a progress callback. A batch of a shape no other test uses, so nothing is cached yet."""
  params, batch = setup["params"], mlp.make_batch(3, rows=11)
  keys = [jax.random.key(i) for i in range(5)]
  calls = {
      "lanczos from a key": lambda op: curvax.lanczos(op, num_steps=5, key=keys[0]),
      "lanczos from a vector": lambda op: curvax.lanczos(op, num_steps=5, v0=jax.tree.map(jnp.ones_like, params)),
      "lanczos with a callback": lambda op: curvax.lanczos(op, num_steps=5, key=keys[0], callback=lambda *a: None),
      "top_eigenvalues to tol": lambda op: curvax.top_eigenvalues(op, 1, num_steps=8, key=keys[1], tol=1e-3),
      "spectral_density": lambda op: curvax.spectral_density(
          op, num_steps=5, num_probes=2, key=keys[2], num_bootstrap=10, grid_size=16
      ),
  }
  with count_compiles() as compiles:
    op = curvax.hessian(mlp.loss_fn, params, batch)
  assert len(compiles) == 1, f"curvax.hessian: {len(compiles)} compilations"
  for name, call in calls.items():
    with count_compiles() as compiles:
      jax.block_until_ready(call(op))
    assert len(compiles) == 1, f"{name}: {len(compiles)} compilations"


_CACHED_RUN = """
import sys
sys.path.insert(0, {repo!r})
import jax
import curvax
from tests import curvax_mlp as mlp
curvax.enable_compilation_cache({cache!r})
with jax.enable_x64(True):
  op = curvax.hessian(mlp.loss_fn, mlp.init_params(0), mlp.make_batch(1))
  curvax.lanczos(op, num_steps=5, key=jax.random.key(0)).alphas.block_until_ready()
  curvax.spectral_density(op, num_steps=5, num_probes=2, key=jax.random.key(1), grid_size=16).density.block_until_ready()
  curvax.top_eigenvalues(op, 1, num_steps=5, key=jax.random.key(2)).values.block_until_ready()
"""


@pytest.mark.slow
def test_the_persistent_cache_stores_every_program_of_a_call_without_callback(tmp_path):
  """JAX never writes an executable with a host callback to its persistent cache: a call without a progress
  callback must compile a program without one, or a second process compiles everything again."""
  import subprocess  # noqa: PLC0415
  import sys  # noqa: PLC0415

  from tests.conftest import REPO  # noqa: PLC0415

  code = _CACHED_RUN.format(repo=str(REPO), cache=str(tmp_path / "cache"))
  subprocess.run([sys.executable, "-c", code], check=True, cwd=str(tmp_path), capture_output=True)
  stored = {p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()}
  for program in ("jit__linearized_grad", "jit__lanczos_program", "jit__slq_program", "jit__extreme_program"):
    assert program in stored, sorted(stored)
