"""Short printed summaries of curvax's results: `print(result)` gives a few lines (the method, k, the values and
bounds, the number of products, the diagnostics), never the arrays in full; the fields hold the arrays.

Contract: one function per result type, used as its `__repr__`. Values already on the host are formatted; a traced
result (inside a caller's `jax.jit` or `vmap`) prints its shapes only. Only jax and numpy.
"""

from typing import Any, Optional

import jax
import numpy as np

_SHOWN = 6  # entries of a vector printed before "..."


def _host(x) -> Optional[np.ndarray]:
  """`x` as a numpy array, or None if it is traced (no value to print)."""
  if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
    return None
  return np.asarray(jax.device_get(x))


def _vector(x, fmt: str) -> str:
  a = _host(x)
  if a is None:
    return f"traced {list(np.shape(x))}"
  flat = a.ravel()
  shown = ", ".join(format(v.item(), fmt) if a.dtype.kind in "fiu" else str(v.item()) for v in flat[:_SHOWN])
  more = f", ... ({flat.size} in all, shape {list(a.shape)})" if flat.size > _SHOWN else ""
  return f"[{shown}{more}]"


def _scalar(x, fmt: str = ".6g") -> str:
  a = _host(x)
  if a is None:
    return "traced"
  if a.size != 1:
    return _vector(a, fmt)
  return format(a.item(), fmt) if a.dtype.kind in "fiu" else str(a.item())


def lanczos(res: Any) -> str:
  """LanczosResult: steps (= products), reorthogonalization, the Ritz values' range and the diagnostics."""
  m = int(np.shape(res.alphas)[-1])
  k = _scalar(res.num_steps_taken, "d")
  basis = "not stored" if res.basis is None else f"stored {list(np.shape(res.basis))}"
  values, mask = _host(res.ritz_values), _host(res.ritz_mask)
  if values is None or mask is None:
    spread = "traced"
  else:
    valid = values[mask.astype(bool)]
    spread = f"{valid.size} in [{valid.min():.6g}, {valid.max():.6g}]" if valid.size else "none"
  taken = _host(res.num_steps_taken)
  if taken is not None and taken.size == 1 and int(taken) > m:  # thick restart: more products than stored vectors
    head = f"LanczosResult({k} products, thick restart keeping at most {m} vectors"
  else:
    head = f"LanczosResult({k} of {m} steps = {k} products"
  return (
      f"{head}, reorthogonalize={res.reorthogonalize!r}, "
      f"{_scalar(res.num_reorthogonalizations, 'd')} reorthogonalization passes\n"
      f"  ritz values: {spread}\n"
      f"  breakdown={_scalar(res.breakdown)}, converged={_scalar(res.converged)}, "
      f"orthogonality_loss={_scalar(res.orthogonality_loss, '.2e')}, basis {basis})"
  )


def extreme(res: Any) -> str:
  """ExtremeEigenvalues: which end, k, the values and their certified bounds, the products and diagnostics."""
  lz = res.lanczos
  steps = _scalar(lz.num_steps_taken, "d")
  return (
      f"ExtremeEigenvalues({'top' if res.largest else 'bottom'} k={np.shape(res.values)[-1]}, {steps} Lanczos steps "
      f"= {steps} products, reorthogonalize={lz.reorthogonalize!r}\n"
      f"  values: {_vector(res.values, '.6g')}\n"
      f"  bounds: {_vector(res.bounds, '.2e')} (an eigenvalue within each)\n"
      f"  separated={_scalar(res.separated)}, converged={_scalar(lz.converged)}, breakdown={_scalar(lz.breakdown)})"
  )


def density(res: Any) -> str:
  """SpectralDensity: probes × steps, the grid, σ, the nodes' range and the per-probe diagnostics."""
  p, m = np.shape(res.nodes)[-2:]
  grid = _host(res.grid)
  on = "traced" if grid is None else f"[{grid.min():.6g}, {grid.max():.6g}]"
  breakdowns = _host(res.breakdown)
  broke = "traced" if breakdowns is None else f"{int(breakdowns.sum())} of {breakdowns.size}"
  loss = _host(res.orthogonality_loss)
  worst = "traced" if loss is None else f"{loss.max():.2e}"
  return (
      f"SpectralDensity({p} probes x {m} Lanczos steps = up to {p * m} products, {np.shape(res.grid)[-1]} grid points "
      f"on {on}, sigma={_scalar(res.sigma)}\n"
      f"  band: {res.band_percentiles[0]:g}-{res.band_percentiles[1]:g} percentiles of {res.num_bootstrap} bootstrap "
      f"resamples; breakdowns: {broke}; largest orthogonality loss {worst})"
  )


def trace(res: Any) -> str:
  return f"TraceEstimate({res.method}: {_scalar(res.estimate)} ± {_scalar(res.std_error, '.2e')}, {res.num_matvecs} products)"


def diagonal(res: Any) -> str:
  leaves = [_host(x) for x in jax.tree.leaves(res.estimate)]
  if any(x is None for x in leaves):
    return f"DiagonalEstimate(traced, {res.num_matvecs} products)"
  flat = np.concatenate([x.ravel() for x in leaves])
  sem = np.concatenate([np.ravel(_host(x)) for x in jax.tree.leaves(res.std_error)])
  return (
      f"DiagonalEstimate(n={flat.size} over {len(leaves)} leaves, {res.num_matvecs} products: entries in "
      f"[{flat.min():.6g}, {flat.max():.6g}], sum {flat.sum():.6g}, largest standard error {sem.max():.2e})"
  )


def sharpness(res: Any) -> str:
  return (
      f"BatchSharpness(value={res.value:.6g} ± {res.std_error:.2e} over {len(res.per_batch)} batches, "
      f"ratio_of_means={res.ratio_of_means:.6g})"
  )
