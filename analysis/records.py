"""The analysis command's outputs as files: JSON-able records of the results, written by one process.

Contract: `jsonable(x)` turns a record (nested dicts and lists of arrays and numbers) into strict JSON (arrays to
nested lists, non-finite floats to None); `lanczos_record`, `extreme_record` and `density_record` are the
records of a `LanczosResult`, an `ExtremeEigenvalues` and a `SpectralDensity` as eigenvalues.json, blocks.json and
spectrum.json hold them; `model_config_record` is a `ModelConfig` with its dtypes named. `write_json` and
`save_plot` write only on process 0 (`is_primary`): in a run of several processes every one computes the same
global arrays. No project imports.
"""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath


def jsonable(x):
  """Arrays -> nested lists; non-finite floats -> None (strict JSON)."""
  if isinstance(x, dict):
    return {str(k): jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [jsonable(v) for v in x]
  if isinstance(x, (jax.Array, np.ndarray, np.generic)):
    return jsonable(np.asarray(x).tolist())
  if isinstance(x, float):
    return x if math.isfinite(x) else None
  return x


def is_primary() -> bool:
  """One writer: in a run of several processes (every one computes, the arrays are global) process 0 writes."""
  return jax.process_index() == 0


def save_plot(fn, *args, **kwargs):
  """`fn(*args, **kwargs)` (a plot to a file) on process 0 only."""
  if is_primary():
    fn(*args, **kwargs)


def write_json(directory, name, obj):
  """`obj` as strict JSON (`jsonable`) to `directory/name`, on process 0 only."""
  if not is_primary():
    return
  # through etils.epath: a sweep's run folder may be a URI (gs://...)
  epath.Path(directory, name).write_text(json.dumps(jsonable(obj), indent=1))


def lanczos_record(res) -> dict:
  """The record of a `LanczosResult`: its k valid steps, Ritz values and bounds, and diagnostics."""
  k = int(res.num_steps_taken)
  return dict(
      alphas=res.alphas[:k],
      betas=res.betas[:k],
      num_steps_taken=k,
      ritz_values=res.ritz_values[:k],
      ritz_bounds=res.ritz_bounds[:k],
      residual_norms=res.residual_norms[:k],
      norm_estimate=float(res.norm_estimate),
      first_components=res.first_components[:k],
      orthogonality_loss=float(res.orthogonality_loss),
      orthogonality=res.orthogonality,
      breakdown=bool(res.breakdown),
      breakdown_step=int(res.breakdown_step),
      breakdown_policy=res.breakdown_policy,
      reorthogonalize=res.reorthogonalize,
      num_reorthogonalizations=int(res.num_reorthogonalizations),
  )


def extreme_record(e) -> dict:
  """The record of an `ExtremeEigenvalues`, its Lanczos run included (`lanczos_record`)."""
  return dict(
      values=e.values, bounds=e.bounds, valid=e.valid, separated=bool(e.separated), lanczos=lanczos_record(e.lanczos)
  )


def density_record(d, num_probes: int, num_steps: int) -> dict:
  """The spectrum.json record of a `SpectralDensity` run with `num_probes` probes of `num_steps` Lanczos steps."""
  return dict(
      grid=d.grid,
      density=d.density,
      band_low=d.band_low,
      band_high=d.band_high,
      sigma=float(d.sigma),
      band_percentiles=list(d.band_percentiles),
      num_bootstrap=d.num_bootstrap,
      nodes=d.nodes,
      weights=d.weights,
      node_mask=d.node_mask,
      breakdown=d.breakdown,
      orthogonality_loss=d.orthogonality_loss,
      num_probes=num_probes,
      num_steps=num_steps,
  )


def model_config_record(config) -> dict:
  """A `models.ModelConfig` as a dict, its dtypes by name."""
  return {k: (jnp.dtype(v).name if k in ("dtype", "param_dtype") else v) for k, v in dataclasses.asdict(config).items()}
