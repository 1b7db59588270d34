"""Thick-restart Lanczos (`curvax.top_eigenvalues(..., max_vectors=m)`, curvax/restart.py) and the memory count
(curvax/memory.py): on matrices of known spectrum every wanted eigenvalue lies within value ± bound, the values agree
with unrestarted Lanczos to their bounds, the program carries m + 1 rows of n whatever num_steps is, and
`lanczos_memory` counts XLA's buffers to within 10%."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from curvax import density, memory, operators, spectrum
from tests.conftest import count_compiles

N = 160


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _spectrum(kind):
  """Known spectra, multiples of 1/64 (exact in float32): a cluster at the top, a gapped top, an indefinite one."""
  base = np.linspace(0.0, 4.0, N)
  if kind == "clustered":
    base[-6:] = [9.0, 9.5, 9.75, 9.875, 10.0, 10.125]
  elif kind == "gapped":
    base[-3:] = [8.0, 12.0, 20.0]
  else:  # indefinite: both ends, the bottom most negative
    base = np.linspace(-6.0, 6.0, N)
    base[:2], base[-2:] = [-11.0, -9.0], [9.0, 10.0]
  return np.round(base * 64) / 64


def _matrix(kind, dtype, seed=0):
  u = np.linalg.qr(np.random.default_rng(seed).standard_normal((N, N)))[0]
  a = (u * _spectrum(kind)) @ u.T
  a = ((a + a.T) / 2).astype(dtype)
  return curvax.matrix_operator(jnp.asarray(a)), np.linalg.eigvalsh(a.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["clustered", "gapped", "indefinite"])
def test_every_wanted_eigenvalue_within_its_bound_and_equal_to_unrestarted_lanczos(kind, dtype):
  op, true = _matrix(kind, dtype)
  k, m, steps = 3, 12, 150
  for largest, fn in ((True, curvax.top_eigenvalues), (False, curvax.bottom_eigenvalues)):
    res = fn(op, k, num_steps=steps, key=jax.random.key(1), max_vectors=m)
    want = true[::-1][:k] if largest else true[:k]
    values, bounds = np.asarray(res.values, np.float64), np.asarray(res.bounds, np.float64)
    assert int(res.lanczos.num_steps_taken) == steps > m  # restarted: several cycles of at most m vectors
    assert res.lanczos.basis is None and res.lanczos.eigenvectors.shape == (m, m)
    assert np.all(np.abs(values - want) <= bounds), (kind, largest, values - want, bounds)
    # Not vacuous: within 1e-4·‖A‖, far below the gaps of the wanted end (the float32 floor is 2.4e-5·‖A‖ here).
    assert np.all(bounds <= 1e-4 * np.abs(true).max())
    plain = fn(op, k, num_steps=N // 2, key=jax.random.key(1))
    np.testing.assert_array_less(np.abs(values - np.asarray(plain.values)), bounds + np.asarray(plain.bounds))


def test_stops_at_the_tolerance_and_the_ritz_vector_has_its_residual():
  op, true = _matrix("gapped", np.float64)
  res = curvax.top_eigenvalues(op, 1, num_steps=150, key=jax.random.key(0), max_vectors=6, tol=1e-10, return_basis=True)
  taken = int(res.lanczos.num_steps_taken)
  assert bool(res.lanczos.converged) and 6 < taken < 150
  assert abs(float(res.values[0]) - true[-1]) <= float(res.bounds[0]) <= 1e-10 * true[-1]
  y = curvax.ritz_vector(op, res)
  assert res.lanczos.basis.shape == (7, N) and float(jnp.linalg.norm(y)) == pytest.approx(1.0)
  residual = float(jnp.linalg.norm(op(y) - res.values[0] * y))
  assert residual <= float(res.lanczos.residual_norms[int(jnp.sum(res.lanczos.ritz_mask)) - 1]) + 1e-12


@pytest.mark.slow
def test_the_program_carries_max_vectors_rows_whatever_num_steps_and_compiles_once():
  """The stored vectors from the shapes: no array of the restarted program is larger than (m + 1)·n entries (the
  unrestarted one has a [num_steps + 1, n] basis), and its temporaries do not grow with num_steps."""
  n, m, k = 4096, 12, 3
  op = curvax.as_operator(jax.tree_util.Partial(jnp.multiply, jnp.linspace(0.0, 1.0, n)), jnp.zeros(n))

  def lowered(steps, max_vectors):
    kw = dict(k=k, largest=True, n=n, dtype=jnp.dtype("float64"), warm=False, num_steps=steps, reorth_passes="auto")
    kw.update(breakdown_tol=None, return_basis=False, stop=None, callback_every=10, basis_sharding=None)
    if max_vectors is None:
      names, kw = spectrum._EXTREME_STATIC, dict(kw, reorthogonalize="full", matvec_rtol=None)
    else:
      names = spectrum._RESTART_STATIC
      kw = dict(kw, max_vectors=max_vectors, keep=spectrum.kept_vectors(k, max_vectors), matvec_rtol=None)
    fn = operators._jitted(spectrum._extreme_program, names)
    args = (op.flat_operator(), jax.random.key(0), None)
    return jax.make_jaxpr(lambda *a: fn(*a, **kw))(*args), fn.lower(*args, **kw).compile().memory_analysis()

  def largest_array(jaxpr):
    sizes = [0]
    for eqn in jaxpr.eqns:
      sizes += [int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape")]
      for p in eqn.params.values():  # the loops', conds' and jits' bodies
        for sub in p if isinstance(p, (tuple, list)) else (p,):
          sub = getattr(sub, "jaxpr", sub)
          if hasattr(sub, "eqns"):
            sizes.append(largest_array(sub))
    return max(sizes)

  short, short_mem = lowered(60, m)
  long, long_mem = lowered(300, m)
  assert largest_array(short.jaxpr) == largest_array(long.jaxpr) == (m + 1) * n
  assert short_mem.temp_size_in_bytes == long_mem.temp_size_in_bytes
  plain, _ = lowered(60, None)
  assert largest_array(plain.jaxpr) == 61 * n
  a, b = (curvax.matrix_operator(jnp.diag(jnp.linspace(s, 1.0 + s, 50))) for s in (0.0, 0.5))
  curvax.top_eigenvalues(a, 2, num_steps=40, key=jax.random.key(0), max_vectors=8)
  with count_compiles() as compiles:  # another operator and key of the same shapes: nothing compiles
    res = curvax.top_eigenvalues(b, 2, num_steps=40, key=jax.random.key(3), max_vectors=8)
  assert compiles == [] and abs(float(res.values[0]) - 1.5) <= float(res.bounds[0])


def _measured(impl, names, op, *args, **kw):
  stats = operators._jitted(impl, names).lower(op.flat_operator(), *args, **kw).compile().memory_analysis()
  return stats.temp_size_in_bytes + stats.output_size_in_bytes


@pytest.mark.parametrize(
    "case",
    [
        dict(num_steps=20),
        dict(num_steps=60),
        dict(num_steps=20, reorthogonalize="partial"),
        dict(num_steps=20, reorthogonalize="none"),
        dict(num_steps=20, reorthogonalize="none", return_basis=True),
        dict(num_steps=100, max_vectors=20),
        dict(num_steps=100, max_vectors=10),
        dict(num_steps=20, num_probes=8),
        dict(num_steps=20, num_probes=8, batch=4),
        dict(num_steps=20, num_probes=8, reorthogonalize="none"),
    ],
    ids=str,
)
def test_the_memory_count_is_within_ten_percent_of_xla_buffers(case):
  """`lanczos_memory`'s peak against XLA:CPU's buffer assignment (temp + output bytes; the operator's arguments
  excluded) of the compiled program, n = 2^17 float32 on a diagonal operator (64-bit indices off, as by default)."""
  with jax.enable_x64(False):
    _check_count(case)


def _check_count(case):
  n, dtype = 1 << 17, jnp.dtype("float32")
  op = curvax.as_operator(jax.tree_util.Partial(jnp.multiply, jnp.linspace(0.0, 1.0, n, dtype=dtype)), jnp.zeros(n))
  reorth, rb = case.get("reorthogonalize", "full"), case.get("return_basis", False)
  lanczos = dict(reorth_passes="auto", breakdown_tol=None, return_basis=rb, callback_every=10, basis_sharding=None)
  lanczos.update(matvec_rtol=None, num_steps=case["num_steps"])
  keep = 0
  if "num_probes" in case:
    names = ("grid_size", "num_bootstrap", "band_percentiles", *density._SLQ_STATIC)
    kw = dict(grid_size=64, num_bootstrap=20, band_percentiles=(5.0, 95.0), num_probes=case["num_probes"], n=n)
    kw.update(dtype=dtype, probe="rademacher", probe_batch=case.get("batch", 1), reorthogonalize=reorth, **lanczos)
    measured = _measured(density._slq_program, names, op, jax.random.key(0), None, None, None, **kw)
  else:
    kw = dict(k=5, largest=True, n=n, dtype=dtype, warm=False, stop=None, **lanczos)
    if "max_vectors" in case:
      keep = spectrum.kept_vectors(5, case["max_vectors"])
      names, kw = spectrum._RESTART_STATIC, dict(kw, max_vectors=case["max_vectors"], keep=keep)
    else:
      names, kw = spectrum._EXTREME_STATIC, dict(kw, reorthogonalize=reorth)
    measured = _measured(spectrum._extreme_program, names, op, jax.random.key(0), None, **kw)
  counted = memory.lanczos_memory(n, dtype, keep=keep, **case)
  assert abs(counted["peak"] - measured) <= 0.1 * measured, (counted, measured)
  assert counted["peak"] >= counted["basis"] + counted["probes"]


def test_the_guard_names_the_peak_and_only_ways_out_with_a_certificate():
  n = 1000
  diag = jnp.linspace(0.0, 1.0, n).at[-5:].set(jnp.arange(2.0, 7.0))  # a gapped top 5
  op = curvax.as_operator(jax.tree_util.Partial(jnp.multiply, diag), jnp.zeros(n))
  basis = 100 * n * 8
  with pytest.raises(ValueError) as err:
    curvax.top_eigenvalues(op, 5, num_steps=99, key=jax.random.key(0), max_basis_bytes=basis - 1)
  text = str(err.value)
  peak = memory.lanczos_memory(n, jnp.float64, num_steps=99)["peak"]
  assert f"peak with its work vectors, Ritz vectors, probes and Gram block is {peak} bytes" in text
  assert "max_vectors=m" in text and "Not reorthogonalize='none' alone" in text
  # The way out it names fits: 21 stored vectors, the same products, a certified top 5.
  res = curvax.top_eigenvalues(op, 5, num_steps=99, key=jax.random.key(0), max_basis_bytes=21 * n * 8, max_vectors=20)
  assert int(res.lanczos.num_steps_taken) == 99 and float(res.bounds[0]) < 1e-6
  with pytest.raises(ValueError, match=r"max_vectors=6 is not valid for k=5, n=1000; valid: .* \[7, 1000\]"):
    curvax.top_eigenvalues(op, 5, num_steps=99, key=jax.random.key(0), max_vectors=6)
  with pytest.raises(ValueError, match="needs reorthogonalize='full', got 'partial'"):
    curvax.top_eigenvalues(op, 5, num_steps=99, key=jax.random.key(0), max_vectors=20, reorthogonalize="partial")
  same = curvax.top_eigenvalues(op, 2, num_steps=30, key=jax.random.key(0), max_vectors=30)  # never restarts
  plain = curvax.top_eigenvalues(op, 2, num_steps=30, key=jax.random.key(0))
  np.testing.assert_array_equal(np.asarray(same.values), np.asarray(plain.values))


def test_the_summary_names_a_restarted_run_and_lanczos_memory_is_public():
  op, _ = _matrix("gapped", np.float64)
  res = curvax.top_eigenvalues(op, 2, num_steps=40, key=jax.random.key(0), max_vectors=8)
  assert repr(res.lanczos).startswith("LanczosResult(40 products, thick restart keeping at most 8 vectors")
  assert "lanczos_memory" in curvax.__all__ and curvax.lanczos_memory is memory.lanczos_memory
  counted = curvax.lanczos_memory(N, np.float64, num_steps=40, max_vectors=8, keep=5)
  assert counted["basis"] == 9 * N * 8 and counted["ritz_vectors"] == 6 * N * 8
