"""Where the stored Lanczos basis lives: in device memory (default) or in the host memory kind beside it.

Contract: `basis_memory="host"` keeps the [num_steps + 1, n] basis of `curvax.lanczos` (and of `top_eigenvalues`
/ `bottom_eigenvalues` without a restart, and of `spectral_density`) in the device's 'pinned_host' memory kind, for
a device whose own memory is short. `check_basis_placement` refuses it before any compute, in one line, where the
device offers no such kind, where probes run in lockstep (a batched slice of a host buffer is a gather, which XLA
does not run on host memory), with a thick restart (its basis is the small one) or a `basis_sharding` (not
supported). `basis_access` gives the loop
every touch of the basis: `place` the buffer, `set_row` a new vector, `cgs` the Gram-Schmidt pass and `gram` the
orthogonality measurement. With "device" these are `curvax.orthogonality`'s functions, so results stay bit for bit;
with "host" each read moves one block to the device, `REORTH_CHUNK` rows or `GRAM_COLUMNS` columns, so the device
holds one block of the basis rather than all of it, and the basis crosses to the device twice per CGS pass.
Why not just `jax.device_put` the whole buffer: the device would then hold a full transient copy every step.
"""

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from curvax.orthogonality import GRAM_COLUMNS, REORTH_CHUNK, TWICE_IS_ENOUGH_ETA, cgs_reorthogonalize, gram_deviation

BASIS_MEMORIES = ("device", "host")
HOST_KIND = "pinned_host"  # `jax.memory.Space.Host` inside jit: the host kind a device can copy to and from


def device_memory_kinds(device: Optional[Any] = None) -> list:
  """The memory kinds `device` (default: the first of the default backend) can address."""
  device = jax.devices()[0] if device is None else device
  return [m.kind for m in device.addressable_memories()]


def check_basis_placement(basis_memory: str, probe_batch: int = 1, restarted: bool = False, sharded=False) -> None:
  """ValueError before any compute unless `basis_memory` is valid and, for "host", can run here (see module doc)."""
  if basis_memory not in BASIS_MEMORIES:
    raise ValueError(f"basis_memory={basis_memory!r} is not valid; valid choices: {list(BASIS_MEMORIES)}")
  if basis_memory == "device":
    return
  kinds = device_memory_kinds()
  if HOST_KIND not in kinds:
    raise ValueError(
        f"basis_memory='host' needs a {HOST_KIND!r} memory kind, but the {jax.default_backend()} device offers "
        f"only {kinds}; use basis_memory='device'"
    )
  if probe_batch > 1:
    raise ValueError(f"basis_memory='host' runs probes one after another: probe_batch={probe_batch} must be 1")
  if restarted:
    raise ValueError(
        "basis_memory='host' is for the unrestarted basis; with max_vectors or bound='change' use basis_memory='device'"
    )
  if sharded:
    raise ValueError("basis_memory='host' keeps the basis on one device's host; with basis_sharding use 'device'")


class BasisAccess(NamedTuple):
  """Every touch of the stored basis by the Lanczos loop (`basis_access`)."""

  place: Callable  # [rows, n] buffer -> the buffer where it lives
  set_row: Callable  # (basis, i, q) -> basis with row i = q
  cgs: Callable  # (basis, w, i, passes) -> (w ⟂ q_0..q_i, ‖w‖), as `curvax.orthogonality.cgs_reorthogonalize`
  gram: Callable  # (basis, k) -> Q_kᵀQ_k − I, as `curvax.orthogonality.gram_deviation`


def basis_access(basis_memory: str, on_basis: Callable) -> BasisAccess:
  """The basis' accessors for `basis_memory`; `on_basis` pins a device buffer to the basis sharding."""
  if basis_memory == "device":
    return BasisAccess(lambda b: b, lambda b, i, q: on_basis(b.at[i].set(q)), cgs_reorthogonalize, gram_deviation)
  host, device = jax.memory.Space.Host, jax.memory.Space.Device
  to_device = lambda x: jax.device_put(x, device)
  return BasisAccess(
      lambda b: jax.device_put(b, host),
      lambda b, i, q: b.at[i].set(jax.device_put(q, host)),
      lambda b, w, i, passes: _host_cgs(b, w, i, passes, to_device),
      lambda b, k: _host_gram(b, k, to_device),
  )


def combine_rows(basis, coeffs):
  """Σ_j coeffs[j] q_j over the first len(coeffs) rows of the basis, traceable: a device basis in one product (as
  before), a host one a `REORTH_CHUNK`-row block at a time, so a Ritz vector of a host basis needs no device copy."""
  rows = coeffs.shape[0]
  if jax.typeof(basis).memory_space != jax.memory.Space.Host:
    return coeffs @ basis[:rows]
  chunk = min(REORTH_CHUNK, rows)
  to_device = lambda x: jax.device_put(x, jax.memory.Space.Device)

  def add(c, y):
    start = jnp.minimum(c * chunk, rows - chunk)  # a clamped last block: its rows shared with the previous are done
    c_c = jnp.where(start + jnp.arange(chunk) >= c * chunk, jax.lax.dynamic_slice_in_dim(coeffs, start, chunk), 0.0)
    return y + c_c @ _rows(basis, start, chunk, to_device)

  return jax.lax.fori_loop(0, -(-rows // chunk), add, jnp.zeros((basis.shape[1],), coeffs.dtype))


def _rows(basis, start, count, to_device):
  return to_device(jax.lax.dynamic_slice_in_dim(basis, start, count))


def _host_project_out(basis, w, i, chunk, to_device):
  """`curvax.orthogonality.project_out` with the basis in host memory: the coefficients h = V_i w and the update
  w −= V_iᵀh each read the filled rows in blocks of `chunk`, the same blocks and axpys as the device version."""
  rows = basis.shape[0]
  starts = lambda c: jnp.minimum(c * chunk, rows - chunk)
  fresh = lambda c, start: start + jnp.arange(chunk) >= c * chunk  # rows a clamped last block shares are done

  def coefficients(c, h):
    start = starts(c)
    h_c = _rows(basis, start, chunk, to_device) @ w
    old = jax.lax.dynamic_slice_in_dim(h, start, chunk)
    return jax.lax.dynamic_update_slice_in_dim(h, jnp.where(fresh(c, start), h_c, old), start, 0)

  blocks = i // chunk + 1
  h = jax.lax.fori_loop(0, blocks, coefficients, jnp.zeros((rows,), w.dtype))
  h = jnp.where(jnp.arange(rows) <= i, h, 0.0)

  def update(c, w):
    start = starts(c)
    block = _rows(basis, start, chunk, to_device)
    h_c = jnp.where(fresh(c, start), jax.lax.dynamic_slice_in_dim(h, start, chunk), 0.0)
    for r in range(chunk):  # static unroll of `chunk`, as in `project_out`
      w = w - h_c[r] * block[r]
    return w

  return jax.lax.fori_loop(0, blocks, update, w)


def _host_cgs(basis, w, i, passes, to_device):
  """`curvax.orthogonality.cgs_reorthogonalize` (the same "twice is enough" test) on a host basis."""
  chunk = min(REORTH_CHUNK, basis.shape[0])

  def second_pass(w):
    w = _host_project_out(basis, w, i, chunk, to_device)
    return w, jnp.linalg.norm(w)

  norm_in = jnp.linalg.norm(w)
  w = _host_project_out(basis, w, i, chunk, to_device)
  if passes == 2:
    return second_pass(w)
  norm_out = jnp.linalg.norm(w)
  return jax.lax.cond(norm_out < TWICE_IS_ENOUGH_ETA * norm_in, second_pass, lambda w: (w, norm_out), w)


def _host_gram(basis, k, to_device):
  """`curvax.orthogonality.gram_deviation` on a host basis: each [rows, GRAM_COLUMNS] block moves to the device."""
  rows, n = basis.shape
  blocks = n // GRAM_COLUMNS
  tail = to_device(basis[:, blocks * GRAM_COLUMNS :])
  gram = tail @ tail.T
  if blocks:

    def add_block(c, gram):
      block = to_device(jax.lax.dynamic_slice_in_dim(basis, c * GRAM_COLUMNS, GRAM_COLUMNS, axis=1))
      return gram + block @ block.T

    gram = jax.lax.fori_loop(0, blocks, add_block, gram)
  valid = jnp.arange(rows) < k
  dev = gram - jnp.eye(rows, dtype=basis.dtype)
  return jnp.where(valid[:, None] & valid[None, :], dev, 0.0)
