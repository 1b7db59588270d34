"""The spectral density of a symmetric operator given as a matvec on a pytree, by stochastic Lanczos quadrature.

Contract: `spectral_density(op, num_steps=m, num_probes=P, key=key)` takes a symmetric operator
(`curvax.operators.LinearOperator`: its size and dtype come from it) plus an explicit PRNG `key`, and imports nothing
of the project, so it runs on plain matrices as well
as on Hessian-vector products. It is stochastic Lanczos quadrature (SLQ; Ubaru, Chen & Saad 2017, Sec. 3; Ghorbani,
Krishnan & Xiao 2019, Sec. 2.2): for unit probes v, vᵀ f(A) v ≈ Σ_i τ_{v,i}² f(θ_{v,i}) (Gauss quadrature with the
eigenvalues θ of T_m and the squared first components τ² of its eigenvectors; exact for polynomials of degree
≤ 2m − 1), so ρ(t) ≈ (1/n_v) Σ_v Σ_i τ_{v,i}² g_σ(t − θ_{v,i}) with a Gaussian kernel g_σ. The per-probe nodes
and weights, σ, and a bootstrap band over probes (percentiles of the resampled mean) are all returned.

A call is one jitted program taking the operator as an argument (`curvax.operators`): the key's split, the probes'
Lanczos runs, the smoothing and its band, compiled once per (operator structure, n, dtype, static options). SLQ
probes run one after another (`lax.map`, memory of one probe) or `probe_batch` at a time in lockstep through one
vmapped matvec (memory × probe_batch); the default per backend is measured (`curvax.probes.PROBE_BATCH_DEFAULTS`).

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

from curvax import summary
from curvax.finite import check_finite
from curvax.lanczos import lanczos_core
from curvax.lanczos_options import DEFAULT_MAX_BASIS_BYTES, check_reorthogonalize, lanczos_options
from curvax.operators import run_program, with_callback
from curvax.probes import check_positive_int, check_probe_batch, draw_probes, get_probe, map_probes, operator_info


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

  def __repr__(self):
    return summary.density(self)


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
    "matvec_rtol",
    "basis_memory",
)


def _slq_runs(op, probe_key, callback_id, *, num_probes, n, dtype, probe, probe_batch, num_steps, **static):
  """The probes' Lanczos runs (a batched `LanczosResult`)."""
  v_pxn = draw_probes(probe_key, num_probes, n, dtype, probe, True)

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


def _slq_program(op, key, grid, sigma, callback_id, *, grid_size, num_bootstrap, band_percentiles, **static):
  """The whole `spectral_density` call as one program: the key's split, the probes' runs and the smoothed density
  with its bootstrap band (one compilation per call structure, not one per step)."""
  probe_key, boot_key = jax.random.split(key)
  res = _slq_runs(op, probe_key, callback_id, **static)
  grid_g, density_g, band_low, band_high, sigma_, weights_pxm = _smoothed_density(
      res.ritz_values,
      res.first_components,
      res.ritz_mask,
      grid,
      sigma,
      boot_key,
      grid_size,
      num_bootstrap,
      band_percentiles,
  )
  return SpectralDensity(
      grid=grid_g,
      density=density_g,
      band_low=band_low,
      band_high=band_high,
      sigma=sigma_,
      nodes=res.ritz_values,
      weights=weights_pxm,
      node_mask=res.ritz_mask,
      breakdown=res.breakdown,
      orthogonality_loss=res.orthogonality_loss,
      band_percentiles=band_percentiles,
      num_bootstrap=num_bootstrap,
  )


def spectral_density(
    op: Any,
    *,
    num_steps: int,
    num_probes: int,
    key: jax.Array,
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
    matvec_rtol: Optional[float] = None,
    basis_memory: str = "device",
) -> SpectralDensity:
  """Spectral density by stochastic Lanczos quadrature with a bootstrap band over probes.

  One jitted program per (operator structure, n, dtype, options): the probes' Lanczos runs and the smoothing; a
  second call with another operator of the same structure compiles nothing (`curvax.operators`).

  Args:
    op: a symmetric `LinearOperator` (its size n and dtype set the problem).
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
    matvec_rtol: as in `lanczos` (the rounding floor of the nodes' certified bounds).
    basis_memory: as in `lanczos` ("host": each probe's basis in host memory; probes one after another).

  Returns:
    A `SpectralDensity`.
  """
  op, n, dtype = operator_info(op)
  check_positive_int("num_steps", num_steps)
  check_positive_int("num_probes", num_probes, minimum=2)
  check_positive_int("num_bootstrap", num_bootstrap)
  check_positive_int("grid_size", grid_size, minimum=2)
  if num_steps > n:
    raise ValueError(f"num_steps={num_steps} exceeds the dimension n={n} of the operator; valid: 1 ≤ num_steps ≤ {n}")
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
  static, _ = lanczos_options(
      dict(
          reorthogonalize=reorthogonalize,
          max_basis_bytes=max_basis_bytes,
          breakdown_tol=breakdown_tol,
          callback_every=callback_every,
          basis_sharding=basis_sharding,
          matvec_rtol=matvec_rtol,
          basis_memory=basis_memory,
      ),
      num_steps,
      n,
      dtype,
      batch=probe_batch,
      num_probes=num_probes,
  )
  res = with_callback(
      callback,
      lambda cid: run_program(
          _slq_program,
          ("grid_size", "num_bootstrap", "band_percentiles", *_SLQ_STATIC),
          op,
          key,
          grid,
          sigma,
          cid,
          grid_size=int(grid_size),
          num_bootstrap=int(num_bootstrap),
          band_percentiles=(float(lo_pct), float(hi_pct)),
          num_probes=int(num_probes),
          n=n,
          dtype=jnp.dtype(dtype),
          probe=probe,
          probe_batch=probe_batch,
          **static,
      ),
  )
  check_finite("spectral_density", op, dict(nodes=res.nodes, weights=res.weights))
  return res
