"""Spectral estimates of a symmetric operator given as a matvec on a pytree: extreme eigenvalues and density.

Contract: every function takes `matvec` (pytree -> pytree, symmetric) and `example` (a pytree with the operator's
input structure and dtype; only its structure, shapes and dtype are used) plus an explicit PRNG `key`, and imports
nothing of the project, so it runs on plain matrices as well as on Hessian-vector products.

  * `top_eigenvalues` / `bottom_eigenvalues`: extreme Ritz values of `lanczos` from a random Gaussian start, with
    residual bounds |β_k s_{k,i}| (an eigenvalue of A lies in [θ_i ± bound_i]; Parlett 1998, Thm 13.1.1), their
    gap-theorem refinement (an estimate; `analysis.lanczos`) and a flag
    `separated`, False when the two most extreme intervals overlap (the top eigenvalue is then not resolved).
    "bottom" is the smallest algebraic eigenvalue, i.e. the most negative curvature of a Hessian.
  * `spectral_density`: stochastic Lanczos quadrature (SLQ; Ubaru, Chen & Saad 2017, Sec. 3; Ghorbani, Krishnan &
    Xiao 2019, Sec. 2.2): for unit probes v, vᵀ f(A) v ≈ Σ_i τ_{v,i}² f(θ_{v,i}) (Gauss quadrature with the
    eigenvalues θ of T_m and the squared first components τ² of its eigenvectors; exact for polynomials of degree
    ≤ 2m − 1), so ρ(t) ≈ (1/n_v) Σ_v Σ_i τ_{v,i}² g_σ(t − θ_{v,i}) with a Gaussian kernel g_σ. The per-probe nodes
    and weights, σ, and a bootstrap band over probes (percentiles of the resampled mean) are all returned.
  * The trace estimators (Hutchinson, Hutch++) live in `analysis.trace` and share this module's probes.

Every routine is a jitted program taking the operator as an argument (`analysis.operators`): compiled once per
(operator structure, n, dtype, static options). SLQ probes run one after another (`lax.map`, memory of one probe)
or `probe_batch` at a time in lockstep through one vmapped matvec (memory × probe_batch); the default per backend
is measured (`PROBE_BATCH_DEFAULTS`).

Own code rather than `matfree.funm`/`matfree.stochtrace`: matfree's SLQ integrand returns only vᵀf(A)v, not the
nodes and weights a density (and its per-probe band) needs. tests/test_spectrum.py checks the quadrature against
`matfree.funm.monte_carlo_funm_sym` on the same probe.
"""

import dataclasses
import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from analysis.lanczos import (
    DEFAULT_MAX_BASIS_BYTES,
    STOP_BOUNDS,
    LanczosResult,
    check_basis_memory,
    check_basis_sharding,
    check_reorthogonalize,
    check_stop,
    lanczos_core,
    validate_options,
)
from analysis.operators import FlatSpec, as_operator, run_program, with_callback


def _rademacher(key, shape, dtype):
  return jax.random.rademacher(key, shape, dtype=dtype)


def _gaussian(key, shape, dtype):
  return jax.random.normal(key, shape, dtype=dtype)


PROBES = {"rademacher": _rademacher, "gaussian": _gaussian}


def get_probe(name: str):
  """Return the probe sampler `(key, shape, dtype) -> array` registered under `name`."""
  if name not in PROBES:
    raise ValueError(f"probe={name!r} is not a valid probe distribution; valid choices: {sorted(PROBES)}")
  return PROBES[name]


def flat_info(example):
  """(n, dtype, unravel) of a pytree from its shapes and dtypes alone (no data is copied)."""
  spec = FlatSpec.of(example)
  if not jnp.issubdtype(spec.dtype, jnp.floating):
    raise ValueError(f"example must have a real floating dtype, got dtype={spec.dtype}")
  return spec.size, spec.dtype, spec.unravel


def check_positive_int(name, value, minimum=1):
  if not isinstance(value, (int, np.integer)) or value < minimum:
    raise ValueError(f"{name}={value!r} must be an int ≥ {minimum}")


def sample_probes(
    example: Any, num_probes: int, key: jax.Array, probe: str = "rademacher", unit_norm: bool = True
) -> Any:
  """Draw `num_probes` probe vectors as pytrees like `example`, stacked along a new leading axis.

  Args:
    example: pytree giving the size n and dtype.
    num_probes: number of probes.
    key: PRNG key.
    probe: "rademacher" (entries ±1) or "gaussian" (entries N(0, 1)).
    unit_norm: divide each probe by its norm (SLQ needs unit vectors; trace estimation needs E[vvᵀ] = I, i.e. not).

  Returns:
    The stacked pytree (leaves [num_probes, *leaf.shape]); the flat probes are its rows after
      `jax.flatten_util.ravel_pytree`.
  """
  get_probe(probe)
  check_positive_int("num_probes", num_probes)
  n, dtype, unravel = flat_info(example)
  return jax.vmap(unravel)(_draw_probes(key, num_probes, n, jnp.dtype(dtype), probe, unit_norm))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _draw_probes(key, num_probes, n, dtype, probe, unit_norm):
  v_pxn = PROBES[probe](key, (num_probes, n), dtype)
  if unit_norm:
    v_pxn = v_pxn / jnp.linalg.norm(v_pxn, axis=1, keepdims=True)
  return v_pxn


@dataclasses.dataclass(frozen=True)
class ExtremeEigenvalues:
  """Output of `top_eigenvalues` / `bottom_eigenvalues`.

  Attributes:
    values: [k] Ritz values, most extreme first (descending for top, ascending for bottom).
    bounds: [k] residual bounds: an eigenvalue of A lies in [values ± bounds].
    gap_bounds: [k] gap-theorem refinement min(r, r²/gap) of `bounds`, the gap estimated from the other Ritz
      values (Parlett 1998, Thm 11.7.1; an estimate, see `analysis.lanczos`).
    valid: [k] False for entries that do not exist because Lanczos broke down with fewer than k steps (zeros there).
    separated: bool, False when the two most extreme intervals [θ ± bound] overlap or fewer than 2 are valid.
      True proves two distinct eigenvalues in two disjoint intervals, not that θ_1 is the extreme eigenvalue of
      A (a start vector nearly orthogonal to it would miss it).
    lanczos: the full `LanczosResult` (alphas, betas, diagnostics).
  """

  values: jax.Array
  bounds: jax.Array
  gap_bounds: jax.Array
  valid: jax.Array
  separated: jax.Array
  lanczos: LanczosResult


jax.tree_util.register_dataclass(
    ExtremeEigenvalues, data_fields=["values", "bounds", "gap_bounds", "valid", "separated", "lanczos"], meta_fields=[]
)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _select_extreme(ritz_values, ritz_bounds, gap_bounds, steps, k, largest):
  """Pick the k most extreme of the `steps` valid (ascending) Ritz values; flag overlap of the top two intervals."""
  m = ritz_values.shape[0]
  order = jnp.arange(k)
  idx = steps - 1 - order if largest else order
  valid = (idx >= 0) & (idx < steps)
  idx = jnp.clip(idx, 0, m - 1)
  values = jnp.where(valid, ritz_values[idx], 0.0)
  bounds = jnp.where(valid, ritz_bounds[idx], 0.0)
  refined = jnp.where(valid, gap_bounds[idx], 0.0)
  i1, i2 = (steps - 1, jnp.clip(steps - 2, 0, m - 1)) if largest else (0, jnp.minimum(1, m - 1))
  gap = jnp.abs(ritz_values[i1] - ritz_values[i2])
  separated = (steps >= 2) & (gap > ritz_bounds[i1] + ritz_bounds[i2])
  return values, bounds, refined, valid, separated


_LANCZOS_KEYS = (
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "max_basis_bytes",
    "callback",
    "callback_every",
    "return_basis",
    "basis_sharding",
)


def _lanczos_options(kwargs, num_steps, n, dtype, batch=1):
  """Validate the keyword arguments forwarded to Lanczos (`lanczos.validate_options`, the memory guard × `batch`
  bases); returns (static options, callback)."""
  unknown = sorted(set(kwargs) - set(_LANCZOS_KEYS))
  if unknown:
    raise ValueError(f"unknown Lanczos options {unknown}; valid: {list(_LANCZOS_KEYS)}")
  reorth = kwargs.get("reorthogonalize", "full")
  passes = kwargs.get("reorth_passes", "auto")
  tol = kwargs.get("breakdown_tol")
  every = kwargs.get("callback_every", 10)
  validate_options(num_steps, n, dtype, reorth, passes, tol, every)
  return_basis = bool(kwargs.get("return_basis", False))
  sharding = kwargs.get("basis_sharding")
  check_basis_sharding(sharding)
  if reorth != "none" or return_basis:
    limit = kwargs.get("max_basis_bytes", DEFAULT_MAX_BASIS_BYTES)
    check_basis_memory(num_steps, n, dtype, limit, batch, basis_sharding=sharding)
  static = dict(
      num_steps=int(num_steps),
      reorthogonalize=reorth,
      reorth_passes=passes,
      breakdown_tol=tol,
      return_basis=return_basis,
      callback_every=int(every),
      basis_sharding=sharding,
  )
  return static, kwargs.get("callback")


_EXTREME_STATIC = (
    "k",
    "largest",
    "n",
    "dtype",
    "num_steps",
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "return_basis",
    "stop",
    "callback_every",
    "basis_sharding",
)


def _extreme_program(op, key, callback_id, *, k, largest, n, dtype, **lanczos_static):
  v0 = jax.random.normal(key, (n,), dtype)
  res = lanczos_core(op, v0, callback_id=callback_id, **lanczos_static)
  values, bounds, refined, valid, separated = _select_extreme(
      res.ritz_values, res.ritz_bounds, res.gap_bounds, res.num_steps_taken, k, largest
  )
  return ExtremeEigenvalues(
      values=values, bounds=bounds, gap_bounds=refined, valid=valid, separated=separated, lanczos=res
  )


def _extreme(matvec, example, k, num_steps, key, largest, tol, bound, lanczos_kwargs):
  n, dtype, _ = flat_info(example)
  check_positive_int("k", k)
  check_positive_int("num_steps", num_steps)
  if num_steps > n:
    raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator")
  if k > num_steps:
    raise ValueError(f"k={k} exceeds num_steps={num_steps}: Lanczos gives at most num_steps Ritz values")
  if tol is not None and not (isinstance(tol, (int, float)) and tol > 0):
    raise ValueError(f"tol={tol!r} must be None or a positive relative residual bound (e.g. 0.01)")
  if bound not in STOP_BOUNDS:
    raise ValueError(f"bound={bound!r} is not valid; valid choices: {list(STOP_BOUNDS)}")
  stop = check_stop(None if tol is None else (largest, int(k), float(tol), bound), num_steps)
  static, callback = _lanczos_options(lanczos_kwargs, num_steps, n, dtype)
  op = as_operator(matvec, example)
  return with_callback(
      callback,
      lambda cid: run_program(
          _extreme_program,
          _EXTREME_STATIC,
          op,
          key,
          cid,
          k=int(k),
          largest=largest,
          n=n,
          dtype=jnp.dtype(dtype),
          stop=stop,
          **static,
      ),
  )


def top_eigenvalues(
    matvec: Callable[[Any], Any],
    example: Any,
    k: int,
    *,
    num_steps: int,
    key: jax.Array,
    tol: Optional[float] = None,
    bound: str = "residual",
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Largest-algebraic k eigenvalues of a symmetric operator by Lanczos from a random Gaussian start.

  One jitted program per (operator structure, n, dtype, options): a second call with another operator of the
  same structure (`analysis.operators`) compiles nothing.

  Args:
    matvec: symmetric linear map on pytrees shaped like `example` (a `LinearOperator` or a callable).
    example: pytree giving the structure, size n and dtype.
    k: number of eigenvalues, 1 ≤ k ≤ num_steps.
    num_steps: Lanczos steps (matvecs), ≤ n; with `tol`, the most that are taken.
    key: PRNG key for the start vector.
    tol: None (run `num_steps` steps), or stop as soon as each of the k values has its bound ≤ tol·|θ|
      (e.g. 0.01: every reported eigenvalue to 1%).
    bound: which bound `tol` applies to: "residual" (rigorous: an eigenvalue within it) or "gap" (the
      gap-theorem refinement, an estimate that needs fewer steps once the gap to the next Ritz value is large;
      on the `small` preset's Hessian `bench/hessian.py` measures both).
    **lanczos_kwargs: forwarded to Lanczos (reorthogonalize, reorth_passes, breakdown_tol, max_basis_bytes,
      callback, callback_every, return_basis, basis_sharding).

  Returns:
    `ExtremeEigenvalues`, descending.
  """
  return _extreme(matvec, example, k, num_steps, key, True, tol, bound, lanczos_kwargs)


def bottom_eigenvalues(
    matvec: Callable[[Any], Any],
    example: Any,
    k: int,
    *,
    num_steps: int,
    key: jax.Array,
    tol: Optional[float] = None,
    bound: str = "residual",
    **lanczos_kwargs,
) -> ExtremeEigenvalues:
  """Smallest-algebraic k eigenvalues (most negative curvature first); arguments as in `top_eigenvalues`.

  Returns:
    `ExtremeEigenvalues`, ascending.
  """
  return _extreme(matvec, example, k, num_steps, key, False, tol, bound, lanczos_kwargs)


@dataclasses.dataclass(frozen=True)
class SpectralDensity:
  """Output of `spectral_density` (P probes, m Lanczos steps, G grid points).

  Attributes:
    grid: [G] points t.
    density: [G] ρ(t) = mean over probes of Σ_i τ_{v,i}² g_σ(t − θ_{v,i}).
    band_low, band_high: [G] bootstrap percentiles (`band_percentiles`) over probes of the mean density.
    sigma: scalar Gaussian smoothing width used.
    nodes: [P, m] θ_{v,i} (Ritz values per probe; zero where `node_mask` is False).
    weights: [P, m] τ_{v,i}², each row sums to 1 over its valid nodes (zero elsewhere).
    node_mask: [P, m] valid nodes (a probe's Lanczos may stop early on breakdown).
    breakdown: [P] per-probe breakdown flags.
    orthogonality_loss: [P] per-probe loss of orthogonality.
    band_percentiles: (low, high) percentiles of the band (static).
    num_bootstrap: number of bootstrap resamples (static).
  """

  grid: jax.Array
  density: jax.Array
  band_low: jax.Array
  band_high: jax.Array
  sigma: jax.Array
  nodes: jax.Array
  weights: jax.Array
  node_mask: jax.Array
  breakdown: jax.Array
  orthogonality_loss: jax.Array
  band_percentiles: tuple
  num_bootstrap: int


jax.tree_util.register_dataclass(
    SpectralDensity,
    data_fields=[
        "grid",
        "density",
        "band_low",
        "band_high",
        "sigma",
        "nodes",
        "weights",
        "node_mask",
        "breakdown",
        "orthogonality_loss",
    ],
    meta_fields=["band_percentiles", "num_bootstrap"],
)


def gaussian_kernel(t: jax.Array, sigma) -> jax.Array:
  """g_σ(t) = exp(−t²/(2σ²)) / (σ√(2π)), the smoothing kernel of SLQ (Ghorbani et al. 2019, Eq. 4)."""
  return jnp.exp(-0.5 * (t / sigma) ** 2) / (sigma * np.sqrt(2.0 * np.pi))


@functools.partial(jax.jit, static_argnums=(6, 7, 8))
def _smoothed_density(nodes_pxm, first_pxm, mask_pxm, grid, sigma, boot_key, grid_size, num_bootstrap, percentiles):
  """Gaussian-smoothed SLQ density from per-probe nodes θ and first components s (weights τ² = s²) and its band."""
  dtype = nodes_pxm.dtype
  weights_pxm = jnp.where(mask_pxm, first_pxm**2, 0.0)
  first = nodes_pxm[:, :1]  # always valid: at least one step is taken
  lo = jnp.min(jnp.where(mask_pxm, nodes_pxm, first))
  hi = jnp.max(jnp.where(mask_pxm, nodes_pxm, first))
  if sigma is None:
    width = hi - lo
    sigma = 0.01 * jnp.where(width > 0, width, jnp.maximum(jnp.abs(hi), 1.0))
  sigma = jnp.asarray(sigma, dtype)
  grid_g = jnp.linspace(lo - 5 * sigma, hi + 5 * sigma, grid_size) if grid is None else jnp.asarray(grid, dtype)
  kernel_pxmxg = gaussian_kernel(grid_g[None, None, :] - nodes_pxm[:, :, None], sigma)
  per_probe_pxg = jnp.sum(weights_pxm[:, :, None] * kernel_pxmxg, axis=1)
  density_g = jnp.mean(per_probe_pxg, axis=0)
  # Bootstrap over probes (Efron 1979): resample probe indices with replacement, recompute the mean density.
  num_probes = nodes_pxm.shape[0]
  idx_bxp = jax.random.randint(boot_key, (num_bootstrap, num_probes), 0, num_probes)
  boot_bxg = jnp.mean(per_probe_pxg[idx_bxp], axis=1)
  band_low, band_high = jnp.percentile(boot_bxg, jnp.asarray(percentiles, dtype), axis=0)
  return grid_g, density_g, band_low, band_high, sigma, weights_pxm


# Probes run in lockstep (one vmapped matvec over `probe_batch` probes) or one after another. Defaults per backend
# from `python bench/hessian.py` ("SLQ, probes in lockstep"): on XLA:CPU (2 cores, `small` preset, batch 16x32)
# 8 probes in lockstep ran 1.3-1.5x slower than one after another (the batched tangent pass does not use the cores
# better and the CGS sweeps lose the cache), so 1. Backends not listed (GPU, TPU) have not been measured by this
# project yet and also default to 1 (memory of one probe); set `probe_batch` to try lockstep there.
PROBE_BATCH_DEFAULTS = {"cpu": 1}


def default_probe_batch(num_probes: int) -> int:
  """Probes per lockstep batch on the current backend (`PROBE_BATCH_DEFAULTS`), at most `num_probes`."""
  return max(1, min(num_probes, PROBE_BATCH_DEFAULTS.get(jax.default_backend(), 1)))


def check_probe_batch(probe_batch, num_probes) -> int:
  """`probe_batch` validated (None -> the backend default)."""
  if probe_batch is None:
    return default_probe_batch(num_probes)
  if (
      isinstance(probe_batch, bool)
      or not isinstance(probe_batch, (int, np.integer))
      or not 1 <= probe_batch <= num_probes
  ):
    raise ValueError(
        f"probe_batch={probe_batch!r} must be an int in [1, num_probes={num_probes}] "
        "(1: probes one after another; num_probes: all in lockstep) or None (backend default)"
    )
  return int(probe_batch)


def map_probes(fn, xs, probe_batch):
  """`fn` over the leading axis of `xs`: sequential (`lax.map`) or `probe_batch` at a time through `vmap`."""
  return jax.lax.map(fn, xs, batch_size=None if probe_batch == 1 else probe_batch)


_SLQ_STATIC = (
    "num_probes",
    "n",
    "dtype",
    "probe",
    "probe_batch",
    "num_steps",
    "reorthogonalize",
    "reorth_passes",
    "breakdown_tol",
    "return_basis",
    "callback_every",
    "basis_sharding",
)


def _slq_program(op, probe_key, callback_id, *, num_probes, n, dtype, probe, probe_batch, num_steps, **static):
  v_pxn = _draw_probes(probe_key, num_probes, n, dtype, probe, True)

  def one(args):
    p, v = args
    return lanczos_core(
        op,
        v,
        num_steps=num_steps,
        callback_id=callback_id,
        progress_offset=p * num_steps,
        progress_total=num_probes * num_steps,
        **static,
    )

  return map_probes(one, (jnp.arange(num_probes), v_pxn), probe_batch)


def spectral_density(
    matvec: Callable[[Any], Any],
    example: Any,
    num_steps: int,
    num_probes: int,
    key: jax.Array,
    *,
    grid: Optional[jax.Array] = None,
    sigma: Optional[float] = None,
    grid_size: int = 512,
    num_bootstrap: int = 200,
    band_percentiles: tuple = (5.0, 95.0),
    probe: str = "rademacher",
    reorthogonalize: str = "full",
    max_basis_bytes: int = DEFAULT_MAX_BASIS_BYTES,
    breakdown_tol: Optional[float] = None,
    probe_batch: Optional[int] = None,
    callback: Optional[Callable[[int, int], None]] = None,
    callback_every: int = 10,
    basis_sharding: Optional[jax.sharding.NamedSharding] = None,
) -> SpectralDensity:
  """Spectral density by stochastic Lanczos quadrature with a bootstrap band over probes.

  The probes' Lanczos runs are one jitted program per (operator structure, n, dtype, options); a second call with
  another operator of the same structure compiles nothing (`analysis.operators`).

  Args:
    matvec: symmetric linear map on pytrees shaped like `example` (a `LinearOperator` or a callable).
    example: pytree giving the structure, size n and dtype.
    num_steps: Lanczos steps per probe (m ≤ n); quadrature is exact for polynomials of degree ≤ 2m − 1.
    num_probes: number of unit-norm probes (≥ 2 for a band).
    key: PRNG key (split into probe and bootstrap keys).
    grid: [G] evaluation points; default `grid_size` points over [min θ − 5σ, max θ + 5σ], so ρ integrates to ≈ 1.
    sigma: kernel width; default 1% of the range of all nodes (or 1% of max(|θ|, 1) when the range is 0).
    grid_size: number of default grid points.
    num_bootstrap: resamples of the probes for the band.
    band_percentiles: (low, high) percentiles of the bootstrap band.
    probe: "rademacher" or "gaussian" (normalized to unit norm).
    reorthogonalize, max_basis_bytes, breakdown_tol: as in `lanczos` (memory is one basis per probe in lockstep).
    probe_batch: probes run in lockstep through one vmapped matvec (memory `probe_batch` × one probe); None: the
      backend's default (`PROBE_BATCH_DEFAULTS`). Nodes and weights do not depend on it (to rounding).
    callback: optional host `callback(matvecs_done, num_probes * num_steps)` for progress.
    callback_every: reporting period in Lanczos steps.
    basis_sharding: as in `lanczos`: each probe's vectors and basis split along n over these devices.

  Returns:
    A `SpectralDensity`.
  """
  n, dtype, _ = flat_info(example)
  check_positive_int("num_steps", num_steps)
  check_positive_int("num_probes", num_probes, minimum=2)
  check_positive_int("num_bootstrap", num_bootstrap)
  check_positive_int("grid_size", grid_size, minimum=2)
  if num_steps > n:
    raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator")
  check_reorthogonalize(reorthogonalize)
  if sigma is not None and not sigma > 0:
    raise ValueError(f"sigma={sigma!r} must be positive")
  lo_pct, hi_pct = band_percentiles
  if not 0 <= lo_pct < hi_pct <= 100:
    raise ValueError(f"band_percentiles={band_percentiles!r} must satisfy 0 ≤ low < high ≤ 100")
  if grid is not None and jnp.ndim(grid) != 1:
    raise ValueError(f"grid must be 1-D, got shape {jnp.shape(grid)}")
  get_probe(probe)
  probe_batch = check_probe_batch(probe_batch, num_probes)
  static, _ = _lanczos_options(
      dict(
          reorthogonalize=reorthogonalize,
          max_basis_bytes=max_basis_bytes,
          breakdown_tol=breakdown_tol,
          callback_every=callback_every,
          basis_sharding=basis_sharding,
      ),
      num_steps,
      n,
      dtype,
      batch=probe_batch,
  )
  op = as_operator(matvec, example)
  probe_key, boot_key = jax.random.split(key)
  res = with_callback(
      callback,
      lambda cid: run_program(
          _slq_program,
          _SLQ_STATIC,
          op,
          probe_key,
          cid,
          num_probes=int(num_probes),
          n=n,
          dtype=jnp.dtype(dtype),
          probe=probe,
          probe_batch=probe_batch,
          **static,
      ),
  )
  grid_g, density_g, band_low, band_high, sigma_, weights_pxm = _smoothed_density(
      res.ritz_values,
      res.first_components,
      res.ritz_mask,
      grid,
      sigma,
      boot_key,
      grid_size,
      num_bootstrap,
      (lo_pct, hi_pct),
  )
  nodes_pxm, mask_pxm = res.ritz_values, res.ritz_mask
  return SpectralDensity(
      grid=grid_g,
      density=density_g,
      band_low=band_low,
      band_high=band_high,
      sigma=sigma_,
      nodes=nodes_pxm,
      weights=weights_pxm,
      node_mask=mask_pxm,
      breakdown=res.breakdown,
      orthogonality_loss=res.orthogonality_loss,
      band_percentiles=(lo_pct, hi_pct),
      num_bootstrap=num_bootstrap,
  )
