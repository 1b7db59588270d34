"""Where the Lanczos basis lives (curvax/host_basis.py, `basis_memory=`) and SLQ without one: on XLA:CPU a basis in
the 'pinned_host' memory kind gives the device basis' results bit for bit (SLQ's nodes to rounding), the programs
carry it as a host array (and lower for CUDA with the placements XLA offloads), the guard counts it against host
memory, and the refusals name why; SLQ with reorthogonalize="none" holds no [num_steps + 1, n] array."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from curvax import density, host_basis, lanczos_options, memory, operators, spectrum
from curvax.orthogonality import GRAM_COLUMNS

N = 20_000  # > GRAM_COLUMNS: the Gram measurement runs its column blocks and its tail


def _diagonal(n=N, dtype=jnp.float32):
  diag = jnp.linspace(0.0, 1.0, n, dtype=dtype).at[-3:].set(jnp.asarray([2.0, 3.0, 4.0], dtype))
  return curvax.as_operator(jax.tree_util.Partial(jnp.multiply, diag), jnp.zeros(n, dtype))


@pytest.mark.parametrize("reorthogonalize", ["full", "partial", "none"])
def test_a_host_basis_gives_the_device_basis_results_bit_for_bit(reorthogonalize):
  op = _diagonal()
  kw = dict(num_steps=40, key=jax.random.key(1), reorthogonalize=reorthogonalize, return_basis=True)
  on_device, on_host = curvax.lanczos(op, **kw), curvax.lanczos(op, basis_memory="host", **kw)
  assert on_device.basis.sharding.memory_kind == "device" and on_host.basis.sharding.memory_kind == "pinned_host"
  for field in ("alphas", "betas", "ritz_values", "ritz_bounds", "orthogonality_loss", "num_reorthogonalizations"):
    np.testing.assert_array_equal(np.asarray(getattr(on_host, field)), np.asarray(getattr(on_device, field)), field)
  np.testing.assert_array_equal(np.asarray(on_host.basis), np.asarray(on_device.basis))
  if reorthogonalize == "partial":
    assert 0 < int(on_host.num_reorthogonalizations) < 40  # the CGS pass on the host basis did run


def test_stopping_ritz_vector_and_density_with_a_host_basis():
  op = _diagonal()
  kw = dict(num_steps=60, key=jax.random.key(0), tol=2e-4, return_basis=True)
  on_device, on_host = curvax.top_eigenvalues(op, 2, **kw), curvax.top_eigenvalues(op, 2, basis_memory="host", **kw)
  assert bool(on_host.lanczos.converged) and int(on_host.lanczos.num_steps_taken) < 60  # stopped on the Gram test
  np.testing.assert_array_equal(np.asarray(on_host.values), np.asarray(on_device.values))
  np.testing.assert_array_equal(np.asarray(on_host.bounds), np.asarray(on_device.bounds))
  # The Ritz vector streams the host basis; the same vector as from the device basis to float32 rounding.
  y_host, y_device = curvax.ritz_vector(op, on_host), curvax.ritz_vector(op, on_device)
  assert y_host.sharding.memory_kind == "device"
  np.testing.assert_allclose(np.asarray(y_host), np.asarray(y_device), atol=1e-6)
  assert abs(float(y_host[-1]) ** 2 - 1.0) < 1e-4  # the top eigenvector is e_n
  kw = dict(num_steps=20, num_probes=3, key=jax.random.key(0))
  by = {m: curvax.spectral_density(op, basis_memory=m, **kw) for m in curvax.BASIS_MEMORIES}
  np.testing.assert_allclose(np.asarray(by["host"].nodes), np.asarray(by["device"].nodes), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(np.asarray(by["host"].weights), np.asarray(by["device"].weights), rtol=1e-5, atol=1e-7)


def _program(n, steps, basis_memory):
  kw = dict(k=2, largest=True, n=n, dtype=jnp.dtype("float32"), warm=False, num_steps=steps, reorth_passes="auto")
  kw.update(reorthogonalize="full", breakdown_tol=None, return_basis=False, stop=None, callback_every=10)
  kw.update(basis_sharding=None, matvec_rtol=None, basis_memory=basis_memory)
  return operators._jitted(spectrum._extreme_program, spectrum._EXTREME_STATIC), kw


def _arrays(jaxpr, with_primitive=False):
  """Every array aval of a jaxpr and its sub-jaxprs (loop bodies, conds, jits), with the primitive that made it."""
  out = [(eqn.primitive.name, v.aval) for eqn in jaxpr.eqns for v in eqn.outvars if hasattr(v.aval, "shape")]
  for eqn in jaxpr.eqns:
    for p in eqn.params.values():
      for sub in p if isinstance(p, (tuple, list)) else (p,):
        sub = getattr(sub, "jaxpr", sub)
        if hasattr(sub, "eqns"):
          out += _arrays(sub, True)
  return out if with_primitive else [aval for _, aval in out]


def test_the_programs_carry_the_basis_in_host_memory_and_lower_its_placements_for_cuda():
  n, steps = N, 30
  op = _diagonal(n)
  args = (op.flat_operator(), jax.random.key(0), None)
  for basis_memory, space in (("device", jax.memory.Space.Device), ("host", jax.memory.Space.Host)):
    fn, kw = _program(n, steps, basis_memory)
    made = _arrays(jax.make_jaxpr(lambda *a: fn(*a, **kw))(*args).jaxpr, True)
    bases = {(name, a.memory_space) for name, a in made if a.shape == (steps + 1, n)}
    if basis_memory == "device":
      assert {space for _, space in bases} == {space}
    else:  # every basis-sized array on the host but the zero fill XLA allocates where its one user puts it
      assert {(name, space) for name, space in bases if space != jax.memory.Space.Host} == {
          ("broadcast_in_dim", space.Device)
      }
      # The rest on the device: blocks of REORTH_CHUNK rows or GRAM_COLUMNS columns (the Gram's tail is smaller).
      on_device = [a for name, a in made if a.memory_space == space.Device and name != "broadcast_in_dim"]
      assert max(int(np.prod(a.shape)) for a in on_device) == max(8 * n, (steps + 1) * GRAM_COLUMNS) < (steps + 1) * n
  # XLA:CPU drops the placements inside the program (one memory); the CUDA lowering keeps them for XLA's offloader.
  fn, kw = _program(n, steps, "host")
  text = jax.export.export(fn, platforms=("cuda",))(*args, **kw).mlir_module()
  assert text.count('_xla_buffer_placement = "pinned_host"') == 3  # the zero buffer, its first row, each new row
  assert text.count('_xla_buffer_placement = "device"') == 6  # 2 CGS passes x (h = Vw, w -= V^T h), 2 Gram reads
  fn, kw = _program(n, steps, "device")
  assert "annotate_device_placement" not in jax.export.export(fn, platforms=("cuda",))(*args, **kw).mlir_module()
  # A returned host basis is an output in host memory space S(5) of the compiled program.
  kw = dict(kw, basis_memory="host", return_basis=True)
  layout = fn.lower(*args, **kw).compile().as_text().splitlines()[0]
  assert f"f32[{steps + 1},{n}]{{1,0:S(5)}}" in layout


def test_the_guard_counts_a_host_basis_against_host_memory():
  n, steps = 1000, 99
  op = _diagonal(n)
  size = np.dtype(op.dtype).itemsize
  limit = 100 * n * size - 1  # one byte short of the basis
  with pytest.raises(ValueError, match="Lanczos basis too large"):
    curvax.top_eigenvalues(op, 1, num_steps=steps, key=jax.random.key(0), max_basis_bytes=limit)
  res = curvax.top_eigenvalues(
      op, 1, num_steps=steps, key=jax.random.key(0), max_basis_bytes=limit, basis_memory="host"
  )
  assert abs(float(res.values[0]) - 4.0) <= float(res.bounds[0]) < 1e-3
  host = lanczos_options.host_memory_bytes()
  rows = host // (10**6 * size) + 1  # more than the host holds
  with pytest.raises(ValueError, match=rf"too large for host memory: num_steps={rows}.* > the host's {host} bytes"):
    curvax.check_basis_memory(rows, 10**6, op.dtype, limit, basis_memory="host")
  counted = curvax.lanczos_memory(n, np.float32, num_steps=steps, basis_memory="host")
  assert counted["host_basis"] == 100 * n * 4 and counted["basis"] == 8 * n * 4  # one CGS block on the device
  assert curvax.lanczos_memory(n, np.float32, num_steps=steps)["host_basis"] == 0


def test_host_basis_refusals_name_why(monkeypatch):
  op = _diagonal(200)
  run = lambda **kw: curvax.top_eigenvalues(op, 2, num_steps=30, key=jax.random.key(0), **kw)
  with pytest.raises(ValueError, match=r"basis_memory='disk' is not valid; valid choices: \['device', 'host'\]"):
    run(basis_memory="disk")
  with pytest.raises(ValueError, match="with max_vectors or bound='change' use basis_memory='device'"):
    run(basis_memory="host", max_vectors=10)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  with pytest.raises(ValueError, match="with basis_sharding use 'device'"):
    run(basis_memory="host", basis_sharding=sharding)
  with pytest.raises(ValueError, match="probe_batch=2 must be 1"):
    curvax.spectral_density(op, num_steps=10, num_probes=2, key=jax.random.key(0), probe_batch=2, basis_memory="host")
  # A backend whose device has no host memory kind: one line before any compute.
  monkeypatch.setattr(host_basis, "device_memory_kinds", lambda device=None: ["device"])
  msg = r"basis_memory='host' needs a 'pinned_host' memory kind, but the cpu device offers only \['device'\]"
  with pytest.raises(ValueError, match=msg):
    curvax.lanczos(op, num_steps=10, key=jax.random.key(0), basis_memory="host")
  assert run().values.shape == (2,)  # "device" needs no host kind


def _slq(n, steps, num_probes=3, **kw):
  names = ("grid_size", "num_bootstrap", "band_percentiles", *density._SLQ_STATIC)
  static = dict(grid_size=32, num_bootstrap=10, band_percentiles=(5.0, 95.0), num_probes=num_probes, n=n)
  static.update(dtype=jnp.dtype("float32"), probe="rademacher", probe_batch=1, reorthogonalize="none")
  static.update(reorth_passes="auto", breakdown_tol=None, return_basis=False, callback_every=10, basis_sharding=None)
  static.update(matvec_rtol=None, num_steps=steps, **kw)
  fn, args = operators._jitted(density._slq_program, names), (_diagonal(n).flat_operator(), jax.random.key(0))
  args = (*args, None, None, None)
  avals = _arrays(jax.make_jaxpr(lambda *a: fn(*a, **static))(*args).jaxpr)
  rows = max(int(np.prod(a.shape)) // n for a in avals if n in a.shape)  # the most n-vectors in one array
  return rows, fn.lower(*args, **static).compile().memory_analysis().temp_size_in_bytes


def test_slq_without_reorthogonalization_holds_no_basis_and_its_memory_does_not_grow_with_n_times_steps():
  """SLQ with reorthogonalize="none": the most n-vectors in one array are the num_probes probes, never a basis, and
  what its buffers gain from 20 to 200 steps (the tridiagonals and their eigenvectors) does not depend on n."""
  growth = {}
  for n in (1 << 13, 1 << 14):
    (short, short_temp), (long, long_temp) = _slq(n, 20), _slq(n, 200)
    assert short == long == 3  # the [num_probes, n] probes
    growth[n] = long_temp - short_temp
  # A basis would add 180·n·4 bytes per probe; the growth is the same at both n (to XLA's alignment).
  assert abs(growth[1 << 14] - growth[1 << 13]) <= 1024 < growth[1 << 13] < 180 * (1 << 13) * 4 // 10, growth
  assert _slq(1 << 13, 20, return_basis=True)[0] >= 21  # a basis only when asked for
  # The guard does not refuse it whatever max_basis_bytes, and counts no basis.
  op = _diagonal(2000)
  res = curvax.spectral_density(
      op, num_steps=50, num_probes=2, key=jax.random.key(0), reorthogonalize="none", max_basis_bytes=1
  )
  assert res.nodes.shape == (2, 50)
  assert memory.lanczos_memory(2000, np.float32, num_steps=50, reorthogonalize="none", num_probes=2)["basis"] == 0
  with pytest.raises(ValueError, match="Lanczos basis too large"):
    curvax.spectral_density(op, num_steps=50, num_probes=2, key=jax.random.key(0), max_basis_bytes=1)


def test_no_basis_changes_no_number_of_the_recurrence():
  """The "none" recurrence without the basis and with it (return_basis=True) gives the same tridiagonal bit for bit."""
  op = _diagonal(3000)
  kw = dict(num_steps=60, key=jax.random.key(2), reorthogonalize="none")
  plain, stored = curvax.lanczos(op, **kw), curvax.lanczos(op, return_basis=True, **kw)
  assert plain.basis is None and stored.basis.shape == (61, 3000)
  np.testing.assert_array_equal(np.asarray(plain.alphas), np.asarray(stored.alphas))
  np.testing.assert_array_equal(np.asarray(plain.betas), np.asarray(stored.betas))
