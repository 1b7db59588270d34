"""The options of a Lanczos run, checked before any compute: the reorthogonalization mode and its passes, the stop
criterion, and the memory and sharding of the basis.

Contract: every check raises ValueError naming the argument, its value and the valid choices, on the host, before
anything is traced, so `curvax.lanczos.lanczos` and the programs of `curvax.spectrum` and `curvax.density`
fail before compiling. With full or partial reorthogonalization (or `return_basis=True`) Lanczos stores a
[num_steps + 1, n] basis; `check_basis_memory` compares it with `max_basis_bytes` (per device when
`basis_sharding` splits n over D devices, `basis_shards`: (num_steps + 1)·⌈n/D⌉ entries, once per probe run in
lockstep), or with `basis_memory="host"` (`curvax.host_basis`) against the host's physical memory;
`sharding_constraints` pins the vectors and the basis to that split inside the program. `lanczos_options`
validates the keyword arguments the spectral routines forward to Lanczos. No project imports: only jax and numpy.
"""

import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from curvax.host_basis import check_basis_placement
from curvax.memory import lanczos_memory
from curvax.reorthogonalization import STRATEGIES

REORTHOGONALIZATIONS = tuple(STRATEGIES)  # ("full", "partial", "none"): the step builders' registry
REORTH_PASSES = ("auto", 2)
DEFAULT_MAX_BASIS_BYTES = 4 * 2**30  # 4 GiB: a 100-step basis of a ~10M-parameter float32 model.


def basis_bytes(num_steps: int, n: int, dtype) -> int:
  """Bytes of the [num_steps + 1, n] Lanczos basis buffer in `dtype`."""
  return (num_steps + 1) * n * np.dtype(dtype).itemsize


def check_basis_memory(
    num_steps: int,
    n: int,
    dtype,
    max_basis_bytes: int,
    batch: int = 1,
    basis_sharding: Optional[Any] = None,
    routine: Optional[dict] = None,
    basis_memory: str = "device",
) -> None:
  """Raise ValueError if `batch` bases of `num_steps` Lanczos vectors of size `n` exceed `max_basis_bytes` on one
  device (batch > 1: probes run in lockstep, one basis each; a `basis_sharding` over D devices holds ⌈n/D⌉ columns
  per device). The message gives the routine's whole peak (`curvax.memory.lanczos_memory` of `routine`: max_vectors,
  keep, reorthogonalize, return_basis, num_probes) and only ways out that keep a certificate. With
  `basis_memory="host"` the basis is counted against the host's physical memory instead (`host_memory_bytes`): the
  device then holds one block of it at a time (`curvax.host_basis`)."""
  if basis_memory == "host":
    needed, host = basis_bytes(num_steps, n, dtype) * batch, host_memory_bytes()
    if needed > host:
      raise ValueError(
          f"Lanczos basis too large for host memory: num_steps={num_steps}, n={n}, dtype={np.dtype(dtype).name} needs"
          f" {needed} bytes ({needed / 2**30:.2f} GiB) > the host's {host} bytes ({host / 2**30:.2f} GiB) with "
          "basis_memory='host'; fewer steps, or a thick restart (max_vectors=m) on the device"
      )
    return
  shards = basis_shards(basis_sharding)
  per_device = -(-n // shards)
  needed = basis_bytes(num_steps, per_device, dtype) * batch
  if needed > max_basis_bytes:
    lockstep = f", {batch} probe(s) in lockstep" if batch > 1 else ""
    sharded = f" per device (basis sharded over {shards} devices: n/D = {per_device})" if shards > 1 else ""
    peak = lanczos_memory(n, dtype, batch=batch, shards=shards, **{"num_steps": num_steps, **(routine or {})})["peak"]
    raise ValueError(
        f"Lanczos basis too large: num_steps={num_steps}, n={n}, dtype={np.dtype(dtype).name}{lockstep} needs "
        f"{batch} * (num_steps + 1) * {per_device} * {np.dtype(dtype).itemsize} = {needed} bytes"
        f" ({needed / 2**30:.2f} GiB){sharded} > max_basis_bytes={max_basis_bytes} ({max_basis_bytes / 2**30:.2f}"
        f" GiB); the routine's peak with its work vectors, Ritz vectors, probes and Gram block is {peak} bytes"
        f" ({peak / 2**30:.2f} GiB, curvax.memory.lanczos_memory). Ways out that keep the certified bounds: a thick"
        " restart (top_eigenvalues / bottom_eigenvalues with max_vectors=m: m + 1 stored vectors, num_steps still"
        " the products), fewer steps (or probes in lockstep), a basis sharded over more devices, or a larger"
        " max_basis_bytes. Not reorthogonalize='none' alone: once orthogonality is lost its bounds certify nothing."
    )


def host_memory_bytes() -> int:
  """The host's physical memory in bytes (what a basis in a host memory kind is counted against)."""
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_basis_sharding(basis_sharding: Optional[Any]) -> None:
  """`basis_sharding` must be None or a `jax.sharding.NamedSharding` of a flat n-vector (a one-entry spec)."""
  if basis_sharding is None:
    return
  if not isinstance(basis_sharding, jax.sharding.NamedSharding) or len(basis_sharding.spec) != 1:
    raise ValueError(
        f"basis_sharding={basis_sharding!r} is invalid; valid: None or a jax.sharding.NamedSharding of the flat "
        "n-vector with a one-entry PartitionSpec, e.g. NamedSharding(mesh, PartitionSpec(('data',)))"
    )


def basis_shards(basis_sharding: Optional[Any]) -> int:
  """The number of devices a flat vector (and the basis' columns) is split over by `basis_sharding`."""
  if basis_sharding is None:
    return 1
  axes = basis_sharding.spec[0]
  axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
  return int(np.prod([basis_sharding.mesh.shape[a] for a in axes])) if axes else 1


def sharding_constraints(basis_sharding):
  """(constrain a flat vector, constrain a [rows, n] basis) to `basis_sharding`'s split of n; identities if None."""
  if basis_sharding is None:
    return (lambda x: x), (lambda b: b)
  rows = jax.sharding.NamedSharding(basis_sharding.mesh, jax.sharding.PartitionSpec(None, *basis_sharding.spec))
  return (
      lambda x: jax.lax.with_sharding_constraint(x, basis_sharding),
      lambda b: jax.lax.with_sharding_constraint(b, rows),
  )


def check_reorthogonalize(name: str) -> None:
  """Raise ValueError naming `name` and the valid choices unless it is in REORTHOGONALIZATIONS."""
  if name not in REORTHOGONALIZATIONS:
    raise ValueError(f"reorthogonalize={name!r} is not valid; valid choices: {list(REORTHOGONALIZATIONS)}")


def validate_options(num_steps, n, dtype, reorthogonalize, reorth_passes, breakdown_tol, callback_every):
  check_reorthogonalize(reorthogonalize)
  if isinstance(reorth_passes, bool) or reorth_passes not in REORTH_PASSES:
    raise ValueError(f"reorth_passes={reorth_passes!r} is not valid; valid choices: {list(REORTH_PASSES)}")
  if not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
    raise ValueError(f"num_steps={num_steps!r} must be a positive int")
  if num_steps > n:
    raise ValueError(
        f"num_steps={num_steps} exceeds the dimension n={n} of the operator (Krylov dimension ≤ n); valid: 1 ≤ num_steps ≤ {n}"
    )
  if not (jnp.issubdtype(dtype, jnp.floating)):
    raise ValueError(f"v0 must have a real floating dtype, got dtype={dtype}")
  if breakdown_tol is not None and not (0 < breakdown_tol < 1):
    raise ValueError(f"breakdown_tol={breakdown_tol!r} must be None or in (0, 1)")
  if not isinstance(callback_every, (int, np.integer)) or callback_every < 1:
    raise ValueError(f"callback_every={callback_every!r} must be a positive int")


def check_matvec_rtol(matvec_rtol) -> None:
  """`matvec_rtol` must be None or a number in [0, 1) (a matvec's relative rounding error)."""
  if matvec_rtol is not None and (
      isinstance(matvec_rtol, bool) or not isinstance(matvec_rtol, (int, float)) or not 0 <= matvec_rtol < 1
  ):
    raise ValueError(f"matvec_rtol={matvec_rtol!r} must be None (√n·ε) or a relative error in [0, 1)")


STOP_BOUNDS = ("residual", "gap")


def check_stop(stop, num_steps):
  """Validate `stop = (largest: bool, count: int, rel_tol: float[, bound: "residual" | "gap"])` or None; returns
  it as a 4-tuple (bound "residual" when omitted) or None."""
  if stop is None:
    return None
  ok = (
      isinstance(stop, tuple)
      and len(stop) in (3, 4)
      and isinstance(stop[0], bool)
      and isinstance(stop[1], (int, np.integer))
      and not isinstance(stop[1], bool)
      and 1 <= stop[1] <= num_steps
      and isinstance(stop[2], (int, float))
      and stop[2] > 0
      and (len(stop) == 3 or stop[3] in STOP_BOUNDS)
  )
  if not ok:
    raise ValueError(
        f"stop={stop!r} must be None or (largest: bool, count in [1, num_steps={num_steps}], "
        f"rel_tol > 0[, bound in {list(STOP_BOUNDS)}])"
    )
  return (stop[0], int(stop[1]), float(stop[2]), stop[3] if len(stop) == 4 else "residual")


# The keyword arguments `curvax.spectrum.top_eigenvalues` / `bottom_eigenvalues` forward to Lanczos.
LANCZOS_KEYS = (
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "max_basis_bytes",
    "callback",
    "callback_every",
    "return_basis",
    "basis_sharding",
    "matvec_rtol",
    "basis_memory",
)


def lanczos_options(kwargs, num_steps, n, dtype, batch=1, max_vectors=None, keep=0, num_probes=0):
  """Validate the keyword arguments forwarded to Lanczos (`validate_options`, the memory guard × `batch`
  bases of num_steps + 1 vectors, or of max_vectors + 1 with a thick restart); returns (static options, callback)."""
  unknown = sorted(set(kwargs) - set(LANCZOS_KEYS))
  if unknown:
    raise ValueError(f"unknown Lanczos options {unknown}; valid: {list(LANCZOS_KEYS)}")
  reorth = kwargs.get("reorthogonalize", "full")
  passes = kwargs.get("reorth_passes", "auto")
  tol = kwargs.get("breakdown_tol")
  every = kwargs.get("callback_every", 10)
  validate_options(num_steps, n, dtype, reorth, passes, tol, every)
  return_basis = bool(kwargs.get("return_basis", False))
  sharding = kwargs.get("basis_sharding")
  check_basis_sharding(sharding)
  rtol = kwargs.get("matvec_rtol")
  check_matvec_rtol(rtol)
  placement = kwargs.get("basis_memory", "device")
  check_basis_placement(placement, batch, restarted=max_vectors is not None, sharded=sharding is not None)
  if reorth != "none" or return_basis:
    limit = kwargs.get("max_basis_bytes", DEFAULT_MAX_BASIS_BYTES)
    routine = dict(reorthogonalize=reorth, return_basis=return_basis, num_probes=num_probes, basis_memory=placement)
    rows = num_steps
    if max_vectors is not None:  # a thick restart: its basis, and its count of every buffer
      rows, routine = max_vectors, dict(routine, num_steps=num_steps, max_vectors=max_vectors, keep=keep)
    check_basis_memory(rows, n, dtype, limit, batch, basis_sharding=sharding, routine=routine, basis_memory=placement)
  static = dict(
      num_steps=int(num_steps),
      reorthogonalize=reorth,
      reorth_passes=passes,
      breakdown_tol=tol,
      return_basis=return_basis,
      callback_every=int(every),
      basis_sharding=sharding,
      matvec_rtol=None if rtol is None else float(rtol),
      basis_memory=placement,
  )
  return static, kwargs.get("callback")
