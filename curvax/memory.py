"""The peak memory of a Lanczos-based routine, counted from its shapes before anything is compiled.

Contract: `lanczos_memory(n, dtype, num_steps=..., ...)` returns the bytes of every buffer that `curvax.lanczos`,
`curvax.top_eigenvalues` / `bottom_eigenvalues` (with or without `max_vectors`) and `curvax.spectral_density`
allocate besides the operator's own inputs and products: the basis, the work vectors of the recurrence, the Ritz
vectors a thick restart keeps, the probes of SLQ and the Gram matrix of the orthogonality measurement, and `peak`,
the largest sum of those live at once. Buffers of different phases do not add: the kept Ritz vectors exist only
during a restart, the Gram block only after the loop (a `stop` test also measures it inside the loop, at the steps
where it certifies, beside the work vectors: `peak` then leaves out the smaller of `work_vectors` and `gram`), the
random draw of SLQ's probes only before it. The counts follow XLA's buffer assignment (`jax.jit(...).lower(...).compile().memory_analysis()`, temp + output bytes), which
tests/test_curvax_restart.py checks to within 10% on XLA:CPU. `curvax.lanczos_options.check_basis_memory` reports
this peak when it refuses a basis. With `basis_memory="host"` the basis is `host_basis` and the device holds only the
block of it a CGS pass reads (`curvax.host_basis`), counted as `basis`. No project imports: only numpy.
"""

import numpy as np

REORTH_CHUNK = 8  # `curvax.orthogonality.REORTH_CHUNK`: the rows of a host basis on the device at once
GRAM_COLUMNS = 1 << 14  # `curvax.orthogonality.GRAM_COLUMNS`: the basis columns of one block of the Gram measurement
# The [n] vectors the recurrence keeps live beside the basis: start, previous, current and new vector, and with
# partial or no reorthogonalization one more (the vector before the ω test's pass).
WORK_VECTORS = {"full": 4, "partial": 5, "none": 5}
PROBE_DRAW = 4  # [num_probes, n] buffers while SLQ's probes are drawn and normalized (bits, signs, values, unit)
LOCKSTEP_COPIES = 2  # bases per probe when probe_batch > 1: vmap's batched loop carries an input and an output copy


def lanczos_memory(
    n: int,
    dtype,
    *,
    num_steps: int,
    max_vectors=None,
    keep: int = 0,
    reorthogonalize: str = "full",
    return_basis: bool = False,
    num_probes: int = 0,
    batch: int = 1,
    shards: int = 1,
    basis_memory: str = "device",
) -> dict:
  """Bytes per device of the buffers of one Lanczos-based routine, and their `peak` (see the module docstring).

  Args:
    n: the operator's size; dtype: the computation's dtype.
    num_steps: Lanczos steps (products).
    max_vectors: a thick restart's stored vectors (`curvax.restart`; None: none), with `keep` Ritz vectors kept.
    reorthogonalize, return_basis: as in `curvax.lanczos` (no basis without reorthogonalization or return_basis).
    num_probes: SLQ's probes (0: one start vector); batch: probes in lockstep (`probe_batch`).
    shards: devices the basis' n columns are split over (`basis_sharding`).
    basis_memory: "device" or "host" (the basis in host memory, one block of it on the device at a time).

  Returns:
    {"basis", "work_vectors", "ritz_vectors", "probes", "gram", "peak", "host_basis"} in bytes; all but
    `host_basis` are per device.
  """
  size = np.dtype(dtype).itemsize
  cols = -(-int(n) // int(shards))
  store = reorthogonalize != "none" or return_basis
  restarted = max_vectors is not None and max_vectors < num_steps
  rows = ((max_vectors if restarted else num_steps) + 1) if store else 0
  copies = LOCKSTEP_COPIES if batch > 1 else 1
  basis = batch * copies * rows * cols * size
  host_basis = 0
  if basis_memory == "host":
    host_basis, basis = basis, batch * min(rows, REORTH_CHUNK) * cols * size
  work = batch * WORK_VECTORS[reorthogonalize] * cols * size
  ritz = (keep + 1) * cols * size if restarted else 0
  gram = batch * (rows * min(cols, GRAM_COLUMNS) + rows * rows) * size if store else 0
  probes = num_probes * cols * size
  peak = max(PROBE_DRAW * probes, probes + basis + max(work, ritz, gram))
  return dict(
      basis=basis, work_vectors=work, ritz_vectors=ritz, probes=probes, gram=gram, peak=peak, host_basis=host_basis
  )
