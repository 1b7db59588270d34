"""The analysis command: curvature, gradient and signal profiles of one model state, written as JSON + PNG.

Contract: `run_analysis(analysis_config, model=..., variables=..., batches=..., out_dir=..., label=...)` analyzes
the model at `variables` (at init or from a checkpoint: the caller passes the `step`, recorded with `at_init = step
== 0`) on the first `analysis.num_batches` of `batches` (their origin recorded from `batch_source`), dropout off, and
writes into `out_dir/<label>/` metadata.json (operator, batch shapes and token counts, dtype, Lanczos steps, seeds,
timings, model config) and one `<name>.json` per registered analysis, `analysis.analyses.ANALYSES[name](ctx) ->
(record, plots)`, read from one frozen `Context` and run, timed (`<name>_s` in metadata.json), written and drawn by
one loop:
  eigenvalues  top-k / bottom-k Ritz values with residual bounds and the Lanczos coefficients;
  spectrum     SLQ density, its band and every probe's nodes and weights;   trace  Hutchinson / Hutch++ with its error;
  blocks       per-block top eigenvalues (analysis/block_spectra.py);       grad_norms, signal  per-batch profiles;
  params, mlp_moments  realized parameter statistics and the LeCun-MLP moments with their mean-field prediction
               (analysis/init_stats.py);
  stability    the step-0 predictors of analysis/stability.py, with `analysis.edge_predictors` the Gauss–Newton λ_max
               and the batch sharpness (`curvax.batch_sharpness`), each read against c = 2;
and their PNGs. An analysis whose keys turn it off is skipped, and the curvature operator is built only when one uses
it. The subtree is typed by `analysis.config.AnalysisConfig`; files hold `analysis.records`, written by process 0.
`analysis.dtype = "float64"` runs the whole analysis under `jax.enable_x64(True)` with the model and variables cast.
An encoder (arch="encoder") is analyzed on the loss it trains on, BERT's masked LM: every batch goes through
`train.step.mlm_masked` as in the train step at `mlm_mask_rate`, with keys from `analysis.seed` (one fixed masking per
batch, recorded as `mlm_masking` in metadata.json), so every operator and profile sees the same masked batches.
"""

import dataclasses
import os
import time
import types
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import curvax
from analysis import hessian, stability
from analysis.analyses import ANALYSES, RETURNED, Context, cast_floats, probe_batch
from analysis.config import AnalysisConfig, resolved_dtype
from analysis.records import is_primary, jsonable, model_config_record, save_plot, write_json
from configs.schema import as_section
from train.loss import make_logits_fn, make_loss_fn, num_tokens
from train.step import mlm_masked


def run_analysis(
    analysis_config,
    *,
    model: Any,
    variables: dict,
    batches: Sequence[dict],
    out_dir: str,
    label: str = "init",
    init_fn: Optional[Callable[[jax.Array], dict]] = None,
    step: Optional[int] = None,
    batch_source: str = "given by the caller",
    mlm_mask_rate: float = 0.15,
    print_fn: Callable[[str], None] = print,
    mesh: Optional[jax.sharding.Mesh] = None,
    optim_config: Optional[Any] = None,
    progress: bool = True,
) -> dict:
  """Run the configured analyses and write JSON + PNG files into `out_dir/<label>/`.

  Args:
    analysis_config: the `config.analysis` subtree (an `AnalysisConfig`, or its ConfigDict or a mapping).
    model: the Flax model (`models.get_model`); its config must be a `models.ModelConfig`.
    variables: the model's variables ({"params": ..., other collections}).
    batches: at least `analysis.num_batches` batches as the data pipeline gives them, {"inputs", "targets"} or
      {"targets"} (0 = padding); an encoder's are MLM-masked here (see the module docstring).
    out_dir: output directory (created).
    label: subdirectory name and plot titles, e.g. "init" or "step_1000".
    init_fn: `init_fn(key) -> variables` for extra init seeds of the gradient profile (`grad_norm_seeds > 1`).
    step: the training step of `variables` (0 = at init), recorded as `step` and `at_init`; None = unknown.
    batch_source: where the batches come from (split, order), recorded as `batches` in metadata.json.
    mlm_mask_rate: an encoder's masking rate, `train.mlm_mask_rate` (see the module docstring).
    print_fn: where progress lines go.
    progress: Lanczos progress lines (a host callback inside each program); False compiles programs without one,
      which JAX's persistent compilation cache can store, so the next run of the same shapes (a sweep's next seed)
      loads them instead of compiling (`experiments.sweep.analyze` passes False).
    mesh: None (one device), or the device mesh of the run (`train.step.make_mesh`, every process's devices): each
      batch is split over all its devices along the rows (a data-parallel HVP; every process passes the same global
      batches) and the Lanczos vectors and bases along n (`basis_sharding`), so a basis takes (m + 1)·n/D entries
      per device and `analysis.max_basis_bytes` is a per-device limit. Only process 0 writes files.
    optim_config: the run's `config.optim` (its `b1` and `eps`), needed by the stability predictors
      (`analysis.preconditioned_top_k`, `analysis.update_sharpness`); the model's per-layer lr multipliers
      (`models.lr_multipliers`: µP's) enter them as in training.

  Returns:
    The summary dict written to metadata.json plus the top/bottom eigenvalues, trace and stability predictors.
  """
  cfg = as_section(AnalysisConfig, analysis_config)  # the door: a typed section as it is
  dtype = resolved_dtype(cfg.dtype)
  batches = list(batches)
  if len(batches) < cfg.num_batches:
    raise ValueError(f"analysis.num_batches={cfg.num_batches} but only {len(batches)} batches were given")
  batches = batches[: cfg.num_batches]
  for i, b in enumerate(batches):
    if b["targets"].shape[0] != cfg.batch_size:
      raise ValueError(f"analysis.batch_size={cfg.batch_size} but batch {i} has {b['targets'].shape[0]} rows")
  if cfg.grad_norms and cfg.grad_norm_seeds > 1 and init_fn is None:
    raise ValueError(
        f"analysis.grad_norm_seeds={cfg.grad_norm_seeds} needs run_analysis(init_fn=...) to "
        "draw the extra seeds; set it to 1 to use only the given variables"
    )
  adam = stability.adam_constants(cfg, optim_config)
  provenance = dict(step=step, at_init=None if step is None else step == 0, batches=batch_source)
  if model.config.arch == "encoder":
    keys = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), 1), len(batches))
    batches = [mlm_masked(model.config, b, k, mlm_mask_rate) for b, k in zip(batches, keys)]
    provenance["mlm_masking"] = (
        f"BERT masked LM (train.step.mlm_masked of batch['targets'], as the train step does) at rate "
        f"{mlm_mask_rate}, one fixed masking per batch drawn from analysis.seed={cfg.seed}"
    )
  directory = os.path.join(out_dir, label) if label else out_dir
  if is_primary():
    epath.Path(directory).mkdir(parents=True, exist_ok=True)  # a URI (gs://...) too
  with jax.enable_x64(dtype == "float64"):
    timings = {}
    ctx, meta = _context(
        cfg,
        dtype,
        model,
        variables,
        batches,
        label=label,
        init_fn=init_fn,
        provenance=provenance,
        print_fn=print_fn,
        mesh=mesh,
        adam=adam,
        progress=progress,
        timings=timings,
    )
    out = {}
    for name, analysis in ANALYSES.items():  # each sees the records before it (the stability predictors: λ_max)
      t = time.perf_counter()
      record, figures = analysis(dataclasses.replace(ctx, records=types.MappingProxyType(dict(out))))
      if record is None:
        continue
      timings[f"{name}_s"] = time.perf_counter() - t
      out[name] = record
      write_json(directory, f"{name}.json", record)
      for plot, data, filename, kwargs in figures:
        save_plot(plot, jsonable(data), os.path.join(directory, filename), **kwargs)
    if "spectrum" in out:
      meta["sigma"] = out["spectrum"]["sigma"]
    meta["timings"] = timings
    write_json(directory, "metadata.json", meta)
    summary = {RETURNED[name]: record for name, record in out.items() if name in RETURNED}
    return jsonable(dict(summary, metadata=meta))


def on_mesh(batches, mesh, print_fn):
  """The global batches as arrays split along their rows over every device of `mesh` (replicated when the rows do
  not divide evenly: correct, not data-parallel). Built from every process's identical host copy."""
  devices = mesh.devices.size
  rows = int(batches[0]["targets"].shape[0])
  spec = P(tuple(mesh.axis_names)) if rows % devices == 0 else P()
  if rows % devices:
    print_fn(f"analysis.batch_size={rows} is not a multiple of the {devices} devices: the batch is replicated")
  sharding = NamedSharding(mesh, spec)
  put = lambda x: jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index])
  return [{k: put(v) for k, v in b.items()} for b in batches], spec != P()


def check_basis(analysis_config, num_params: int, mesh=None, *, preconditioned: bool = False) -> None:
  """Raise ValueError if the Lanczos bases an analysis keeps, `analysis.lanczos_steps + 1` vectors of `num_params`
  entries in the analysis dtype (one per SLQ probe in lockstep), split along n over `mesh`'s devices, exceed
  `analysis.max_basis_bytes` on one device (`curvax.check_basis_memory`); none is kept without reorthogonalization
  or without an eigenvalue, spectrum, preconditioned or edge-predictor (the Gauss–Newton's λ_max) routine.
  `run_analysis` calls it before any routine, and `experiments.sweep.check_memory` before a sweep's first run."""
  cfg = as_section(AnalysisConfig, analysis_config)  # the door: a typed section as it is
  if cfg.reorthogonalize == "none" or not (
      cfg.top_k or cfg.bottom_k or cfg.spectrum or preconditioned or cfg.edge_predictors
  ):
    return
  lockstep = (probe_batch(cfg, cfg.num_probes) or 1) if cfg.spectrum else 1  # SLQ: a basis per probe
  dtype = jnp.dtype(resolved_dtype(cfg.dtype))
  basis_sharding = None if mesh is None else NamedSharding(mesh, P(tuple(mesh.axis_names)))
  curvax.check_basis_memory(
      cfg.lanczos_steps, num_params, dtype, cfg.max_basis_bytes, lockstep, basis_sharding=basis_sharding
  )


def _context(
    cfg, dtype_name, model, variables, batches, *, label, init_fn, provenance, print_fn, mesh, adam, progress, timings
) -> tuple:
  """(the analyses' `Context`, metadata.json's record): the state cast to the analysis dtype, the batches on the
  mesh, the basis checked against its memory, and the curvature operator built (timed) when an analysis uses it."""
  dtype = jnp.dtype(dtype_name)
  basis_sharding = None
  if mesh is not None:
    batches, split = on_mesh(batches, mesh, print_fn)
    basis_sharding = NamedSharding(mesh, P(tuple(mesh.axis_names)))
    provenance["sharding"] = (
        f"{mesh.devices.size} devices ({dict(mesh.shape)}): batch rows {'split' if split else 'replicated'}, "
        "Lanczos vectors split along n"
    )
  model = model.clone(config=dataclasses.replace(model.config, dtype=dtype, param_dtype=dtype))
  variables = cast_floats(variables, dtype)
  params = variables["params"]
  n = int(sum(np.size(x) for x in jax.tree.leaves(params)))
  check_basis(cfg, n, mesh, preconditioned=bool(adam))
  steps = min(cfg.lanczos_steps, n)
  loss_fn = make_loss_fn(model, variables=variables)
  tokens = [int(num_tokens(b)) for b in batches]
  # Profiles alone (top_k = bottom_k = 0, no spectrum, trace or blocks) need no curvature operator: none is built.
  operator = None
  if cfg.top_k or cfg.bottom_k or cfg.spectrum or cfg.trace_probes or cfg.blocks or adam or cfg.edge_predictors:
    t = time.perf_counter()
    if cfg.operator == "hessian":
      operator = hessian.hvp_fn(loss_fn, params, batches, linearize=cfg.linearize)
    else:
      operator = hessian.ggn_vp_fn(make_logits_fn(model, variables=variables), params, batches)
    operator = jax.block_until_ready(operator)
    timings["build_operator_s"] = time.perf_counter() - t
  key = jax.random.key(cfg.seed)
  ctx = Context(
      cfg=cfg,
      dtype=dtype,
      model=model,
      variables=variables,
      params=params,
      batches=batches,
      loss_fn=loss_fn,
      label=label,
      print_fn=print_fn,
      progress=progress,
      init_fn=init_fn,
      adam=adam,
      basis_sharding=basis_sharding,
      num_params=n,
      steps=steps,
      operator=operator,
      key=key,
      keys=tuple(jax.random.split(key, 5)),
  )
  meta = dict(
      label=label,
      **provenance,
      operator=cfg.operator,
      dtype=dtype_name,
      num_params=n,
      num_batches=len(batches),
      batch_shapes=[{k: list(v.shape) for k, v in b.items()} for b in batches],
      tokens_per_batch=tokens,
      total_tokens=sum(tokens),
      averaging=(
          "single batch"
          if len(batches) == 1
          else f"token-weighted average over {len(batches)} batches: H = sum_b n_b H_b / sum_b n_b"
      ),
      dropout="off (deterministic=True)",
      linearize=cfg.linearize,
      lanczos_steps=steps,
      blocks_operator="hessian (diagonal blocks, other parameters fixed)",
      seed=cfg.seed,
      analysis_config=cfg.to_dict(),
      model_config=model_config_record(model.config),
  )
  return ctx, meta
