"""Spectral estimates of a symmetric operator given as a matvec on a pytree: extreme eigenvalues and density.

Contract: every function takes `matvec` (pytree -> pytree, symmetric) and `example` (a pytree with the operator's
input structure and dtype; only its structure, shapes and dtype are used) plus an explicit PRNG `key`, and imports
nothing of the project, so it runs on plain matrices as well as on Hessian-vector products.

  * `top_eigenvalues` / `bottom_eigenvalues`: extreme Ritz values of `lanczos` from a random Gaussian start, with
    residual bounds |β_k s_{k,i}| (an eigenvalue of A lies in [θ_i ± bound_i]; Parlett 1998, Thm 13.1.1) and a flag
    `separated`, False when the two most extreme intervals overlap (the top eigenvalue is then not resolved).
    "bottom" is the smallest algebraic eigenvalue, i.e. the most negative curvature of a Hessian.
  * `spectral_density`: stochastic Lanczos quadrature (SLQ; Ubaru, Chen & Saad 2017, Sec. 3; Ghorbani, Krishnan &
    Xiao 2019, Sec. 2.2): for unit probes v, vᵀ f(A) v ≈ Σ_i τ_{v,i}² f(θ_{v,i}) (Gauss quadrature with the
    eigenvalues θ of T_m and the squared first components τ² of its eigenvectors; exact for polynomials of degree
    ≤ 2m − 1), so ρ(t) ≈ (1/n_v) Σ_v Σ_i τ_{v,i}² g_σ(t − θ_{v,i}) with a Gaussian kernel g_σ. The per-probe nodes
    and weights, σ, and a bootstrap band over probes (percentiles of the resampled mean) are all returned.
  * The trace estimators (Hutchinson, Hutch++) live in `analysis.trace` and share this module's probes.

Matvecs over a batch of probes run sequentially (`lax.map`), so memory is that of one probe (one Lanczos basis),
not of the batch: a Hessian-vector product over a vmapped batch would multiply activation memory.

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
from jax.flatten_util import ravel_pytree

from analysis.lanczos import DEFAULT_MAX_BASIS_BYTES, LanczosResult, check_reorthogonalize, lanczos


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
    flat, unravel = ravel_pytree(example)
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        raise ValueError(f"example must have a real floating dtype, got dtype={flat.dtype}")
    return flat.shape[0], flat.dtype, unravel


def check_positive_int(name, value, minimum=1):
    if not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an int ≥ {minimum}")


def sample_probes(example: Any, num_probes: int, key: jax.Array, probe: str = "rademacher",
                  unit_norm: bool = True) -> Any:
    """Draw `num_probes` probe vectors as pytrees like `example`, stacked along a new leading axis.

    Args:
      example: pytree giving the size n and dtype.
      num_probes: number of probes.
      key: PRNG key.
      probe: "rademacher" (entries ±1) or "gaussian" (entries N(0, 1)).
      unit_norm: divide each probe by its norm (SLQ needs unit vectors; trace estimation needs E[vvᵀ] = I, i.e. not).

    Returns:
      The stacked pytree (leaves [num_probes, *leaf.shape]); the flat probes are its rows after ravel_pytree.
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


def flat_matvec(matvec, unravel, dtype):
    return lambda x: ravel_pytree(matvec(unravel(x)))[0].astype(dtype)


@dataclasses.dataclass(frozen=True)
class ExtremeEigenvalues:
    """Output of `top_eigenvalues` / `bottom_eigenvalues`.

    Attributes:
      values: [k] Ritz values, most extreme first (descending for top, ascending for bottom).
      bounds: [k] residual bounds: an eigenvalue of A lies in [values ± bounds].
      valid: [k] False for entries that do not exist because Lanczos broke down with fewer than k steps (zeros there).
      separated: bool, False when the two most extreme intervals [θ ± bound] overlap or fewer than 2 are valid.
        True proves two distinct eigenvalues in two disjoint intervals, not that θ_1 is the extreme eigenvalue of
        A (a start vector nearly orthogonal to it would miss it).
      lanczos: the full `LanczosResult` (alphas, betas, diagnostics).
    """
    values: jax.Array
    bounds: jax.Array
    valid: jax.Array
    separated: jax.Array
    lanczos: LanczosResult


jax.tree_util.register_dataclass(ExtremeEigenvalues, data_fields=["values", "bounds", "valid", "separated", "lanczos"],
                                 meta_fields=[])


@functools.partial(jax.jit, static_argnums=(3, 4))
def _select_extreme(ritz_values, ritz_bounds, steps, k, largest):
    """Pick the k most extreme of the `steps` valid (ascending) Ritz values; flag overlap of the top two intervals."""
    m = ritz_values.shape[0]
    order = jnp.arange(k)
    idx = steps - 1 - order if largest else order
    valid = (idx >= 0) & (idx < steps)
    idx = jnp.clip(idx, 0, m - 1)
    values = jnp.where(valid, ritz_values[idx], 0.0)
    bounds = jnp.where(valid, ritz_bounds[idx], 0.0)
    i1, i2 = (steps - 1, jnp.clip(steps - 2, 0, m - 1)) if largest else (0, jnp.minimum(1, m - 1))
    gap = jnp.abs(ritz_values[i1] - ritz_values[i2])
    separated = (steps >= 2) & (gap > ritz_bounds[i1] + ritz_bounds[i2])
    return values, bounds, valid, separated


def _extreme(matvec, example, k, num_steps, key, largest, lanczos_kwargs):
    n, dtype, unravel = flat_info(example)
    check_positive_int("k", k)
    check_positive_int("num_steps", num_steps)
    if num_steps > n:
        raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator")
    if k > num_steps:
        raise ValueError(f"k={k} exceeds num_steps={num_steps}: Lanczos gives at most num_steps Ritz values")
    v0 = jax.random.normal(key, (n,), dtype)
    res = lanczos(matvec, unravel(v0), num_steps, **lanczos_kwargs)
    values, bounds, valid, separated = _select_extreme(res.ritz_values, res.ritz_bounds, res.num_steps_taken, k,
                                                       largest)
    return ExtremeEigenvalues(values=values, bounds=bounds, valid=valid, separated=separated, lanczos=res)


def top_eigenvalues(matvec: Callable[[Any], Any], example: Any, k: int, *, num_steps: int, key: jax.Array,
                    **lanczos_kwargs) -> ExtremeEigenvalues:
    """Largest-algebraic k eigenvalues of a symmetric operator by Lanczos from a random Gaussian start.

    Args:
      matvec: symmetric linear map on pytrees shaped like `example`.
      example: pytree giving the structure, size n and dtype.
      k: number of eigenvalues, 1 ≤ k ≤ num_steps.
      num_steps: Lanczos steps (matvecs), ≤ n.
      key: PRNG key for the start vector.
      **lanczos_kwargs: forwarded to `lanczos` (reorthogonalize, breakdown_tol, max_basis_bytes, callback, ...).

    Returns:
      `ExtremeEigenvalues`, descending.
    """
    return _extreme(matvec, example, k, num_steps, key, True, lanczos_kwargs)


def bottom_eigenvalues(matvec: Callable[[Any], Any], example: Any, k: int, *, num_steps: int, key: jax.Array,
                       **lanczos_kwargs) -> ExtremeEigenvalues:
    """Smallest-algebraic k eigenvalues (most negative curvature first); arguments as in `top_eigenvalues`.

    Returns:
      `ExtremeEigenvalues`, ascending.
    """
    return _extreme(matvec, example, k, num_steps, key, False, lanczos_kwargs)


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
    SpectralDensity, data_fields=["grid", "density", "band_low", "band_high", "sigma", "nodes", "weights",
                                  "node_mask", "breakdown", "orthogonality_loss"],
    meta_fields=["band_percentiles", "num_bootstrap"])


def gaussian_kernel(t: jax.Array, sigma) -> jax.Array:
    """g_σ(t) = exp(−t²/(2σ²)) / (σ√(2π)), the smoothing kernel of SLQ (Ghorbani et al. 2019, Eq. 4)."""
    return jnp.exp(-0.5 * (t / sigma) ** 2) / (sigma * np.sqrt(2.0 * np.pi))


@functools.partial(jax.jit, static_argnums=(6, 7, 8))
def _smoothed_density(nodes_pxm, first_pxm, mask_pxm, grid, sigma, boot_key, grid_size, num_bootstrap, percentiles):
    """Gaussian-smoothed SLQ density from per-probe nodes θ and first components s (weights τ² = s²) and its band."""
    dtype = nodes_pxm.dtype
    weights_pxm = jnp.where(mask_pxm, first_pxm ** 2, 0.0)
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


def spectral_density(matvec: Callable[[Any], Any], example: Any, num_steps: int, num_probes: int, key: jax.Array, *,
                     grid: Optional[jax.Array] = None, sigma: Optional[float] = None, grid_size: int = 512,
                     num_bootstrap: int = 200, band_percentiles: tuple = (5.0, 95.0), probe: str = "rademacher",
                     reorthogonalize: str = "full", max_basis_bytes: int = DEFAULT_MAX_BASIS_BYTES,
                     breakdown_tol: Optional[float] = None) -> SpectralDensity:
    """Spectral density by stochastic Lanczos quadrature with a bootstrap band over probes.

    Args:
      matvec: symmetric linear map on pytrees shaped like `example`.
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
      reorthogonalize, max_basis_bytes, breakdown_tol: forwarded to `lanczos` (memory is one basis, not P).

    Returns:
      A `SpectralDensity`.
    """
    n, dtype, unravel = flat_info(example)
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
    probe_key, boot_key = jax.random.split(key)
    get_probe(probe)
    v_pxn = _draw_probes(probe_key, num_probes, n, jnp.dtype(dtype), probe, True)
    res = jax.lax.map(lambda v: lanczos(matvec, unravel(v), num_steps, reorthogonalize=reorthogonalize,
                                        max_basis_bytes=max_basis_bytes, breakdown_tol=breakdown_tol), v_pxn)
    grid_g, density_g, band_low, band_high, sigma_, weights_pxm = _smoothed_density(
        res.ritz_values, res.first_components, res.ritz_mask, grid, sigma, boot_key, grid_size, num_bootstrap,
        (lo_pct, hi_pct))
    nodes_pxm, mask_pxm = res.ritz_values, res.ritz_mask
    return SpectralDensity(grid=grid_g, density=density_g, band_low=band_low, band_high=band_high, sigma=sigma_,
                           nodes=nodes_pxm, weights=weights_pxm, node_mask=mask_pxm, breakdown=res.breakdown,
                           orthogonality_loss=res.orthogonality_loss, band_percentiles=(lo_pct, hi_pct),
                           num_bootstrap=num_bootstrap)
