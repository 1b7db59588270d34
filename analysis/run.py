"""The analysis command: curvature, gradient and signal profiles of one model state, written as JSON + PNG.

Contract: `run_analysis(analysis_config, model=..., variables=..., batches=..., out_dir=..., label=...)` analyzes
the model at `variables` (at init or from a checkpoint: the caller passes the `step`, recorded with `at_init = step
== 0`) on the first `analysis.num_batches` of `batches` (the caller says where they come from in `batch_source`,
recorded), dropout off, and writes into `out_dir/<label>/`:
  metadata.json     operator (Hessian or Gauss–Newton of the token-mean loss over the union of the k batches),
                    batch shapes and non-padding token counts, dtype, Lanczos steps, seeds, timings, model config
  eigenvalues.json  top-k / bottom-k Ritz values with residual bounds, `separated`, full Lanczos coefficients
                    (absent when top_k = bottom_k = 0)
  spectrum.json     SLQ density, its band and σ, and the raw nodes and weights of every probe
  trace.json        Hutchinson / Hutch++ estimate and standard error
  blocks.json       per-block top eigenvalues with bounds and each block's Lanczos run (`analysis.blocks`;
                    analysis/block_spectra.py)
  grad_norms.json   per-parameter gradient norms per (seed, batch) pair and aggregated
  signal.json       signal-propagation records per batch
  params.json       realized mean / std / max |x| / kurtosis of every parameter with its role and fans
                    (`analysis.param_stats`; analysis/init_stats.py)
  mlp_moments.json  E[x_l²] through an `analysis.mlp_depth`-layer LeCun MLP with the model's activation, per weight
                    draw, and its mean-field prediction (analysis/init_stats.py)
  stability.json    step-0 stability predictors (`analysis.preconditioned_top_k`, `analysis.update_sharpness`;
                    analysis/stability.py): 2/λ_max(H), λ_max of Adam's preconditioned Hessian with its bound and
                    (2 + 2β₁)/((1 − β₁)λ), the sharpness along Adam's first update; β₁, ε from `optim_config`;
                    with `analysis.edge_predictors`, λ_max of the Gauss–Newton and the batch sharpness over the
                    analysis batches (`curvax.batch_sharpness`), each read against c = 2
and the PNGs spectrum.png, eigenvalues.png, blocks.png (top eigenvalue per block), block_spectra.png (each block's
Ritz values with their quadrature weights and bounds), grad_norms.png, signal.png. Each is skipped when its keys turn
it off (`top_k = bottom_k = 0`: no eigenvalues); the curvature operator is built only when an analysis uses it.
The subtree is typed and checked by `analysis.config.AnalysisConfig`; the files hold the records of
`analysis.records`, written by process 0 only.

With `analysis.dtype = "float64"` the whole analysis runs under `jax.enable_x64(True)` (x64 on for the analysis only)
with the model's compute and parameter dtypes and the variables cast to float64.

An encoder (arch="encoder") is analyzed on the loss it trains on, BERT's masked LM: every batch, whatever keys it
carries, goes through `train.step.mlm_masked` as in the train step (the text in `targets` is corrupted into the
encoder's `inputs`; a translation batch's source `inputs` are not the encoder's and are dropped) at `mlm_mask_rate`
with keys drawn from `analysis.seed` (one fixed masking per batch, recorded as `mlm_masking` in metadata.json), so
every operator and profile sees the same masked batches.
"""

import dataclasses
import os
import time
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import curvax
import models
from analysis import gradients, hessian, init_stats, plots, signal, stability
from analysis.block_spectra import block_spectra
from analysis.config import AnalysisConfig, resolved_dtype
from analysis.progress import progress_callback
from analysis.records import (
    density_record,
    extreme_record,
    is_primary,
    jsonable,
    model_config_record,
    save_plot,
    write_json,
)
from train.loss import make_logits_fn, make_loss_fn, num_tokens
from train.step import mlm_masked


def _probe_batch(cfg, num_probes):
  """analysis.probe_batch capped at the number of probes; 0 leaves the choice to the backend default."""
  return min(cfg.probe_batch, num_probes) if cfg.probe_batch else None


def _cast(tree, dtype):
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


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
  cfg = AnalysisConfig.from_config(analysis_config)
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
    return _run(
        cfg, dtype, model, variables, batches, directory, label, init_fn, provenance, print_fn, mesh, adam, progress
    )


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
  cfg = AnalysisConfig.from_config(analysis_config)
  if cfg.reorthogonalize == "none" or not (
      cfg.top_k or cfg.bottom_k or cfg.spectrum or preconditioned or cfg.edge_predictors
  ):
    return
  lockstep = (_probe_batch(cfg, cfg.num_probes) or 1) if cfg.spectrum else 1  # SLQ: a basis per probe
  dtype = jnp.dtype(resolved_dtype(cfg.dtype))
  basis_sharding = None if mesh is None else NamedSharding(mesh, P(tuple(mesh.axis_names)))
  curvax.check_basis_memory(
      cfg.lanczos_steps, num_params, dtype, cfg.max_basis_bytes, lockstep, basis_sharding=basis_sharding
  )


def _run(
    cfg, dtype_name, model, variables, batches, directory, label, init_fn, provenance, print_fn, mesh, adam, progress
):
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
  variables = _cast(variables, dtype)
  params = variables["params"]
  n = int(sum(np.size(x) for x in jax.tree.leaves(params)))
  check_basis(cfg, n, mesh, preconditioned=bool(adam))
  steps = min(cfg.lanczos_steps, n)
  loss_fn = make_loss_fn(model, variables=variables)
  timings, out = {}, {}
  tokens = [int(num_tokens(b)) for b in batches]
  build_hvp = lambda fn, p: hessian.hvp_fn(fn, p, batches, linearize=cfg.linearize)
  build_ggn = lambda p: hessian.ggn_vp_fn(make_logits_fn(model, variables=variables), p, batches)
  build = build_hvp if cfg.operator == "hessian" else lambda fn, p: build_ggn(p)
  # Profiles alone (top_k = bottom_k = 0, no spectrum, trace or blocks) need no curvature operator: none is built.
  curvature = bool(
      cfg.top_k or cfg.bottom_k or cfg.spectrum or cfg.trace_probes or cfg.blocks or adam or cfg.edge_predictors
  )
  matvec = None
  if curvature:
    t = time.perf_counter()
    matvec = jax.block_until_ready(build(loss_fn, params))
    timings["build_operator_s"] = time.perf_counter() - t
  key = jax.random.key(cfg.seed)
  k_top, k_bottom, k_slq, k_trace, k_blocks = jax.random.split(key, 5)
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

  eigen = {}
  if cfg.top_k:
    t = time.perf_counter()
    top = curvax.top_eigenvalues(
        matvec,
        cfg.top_k,
        num_steps=steps,
        key=k_top,
        max_basis_bytes=cfg.max_basis_bytes,
        reorthogonalize=cfg.reorthogonalize,
        callback=progress_callback(f"{label} top eigenvalues", print_fn) if progress else None,
        basis_sharding=basis_sharding,
    )
    eigen["top"] = extreme_record(top)
    timings["top_eigenvalues_s"] = time.perf_counter() - t
  if cfg.bottom_k:
    t = time.perf_counter()
    bottom = curvax.bottom_eigenvalues(
        matvec,
        cfg.bottom_k,
        num_steps=steps,
        key=k_bottom,
        max_basis_bytes=cfg.max_basis_bytes,
        reorthogonalize=cfg.reorthogonalize,
        callback=progress_callback(f"{label} bottom eigenvalues", print_fn) if progress else None,
        basis_sharding=basis_sharding,
    )
    eigen["bottom"] = extreme_record(bottom)
    timings["bottom_eigenvalues_s"] = time.perf_counter() - t
  if eigen:
    write_json(directory, "eigenvalues.json", eigen)
    save_plot(
        plots.plot_eigenvalues, jsonable(eigen), os.path.join(directory, "eigenvalues.png"), title=f"{label}: extremes"
    )
    out["eigenvalues"] = eigen

  if adam:
    t = time.perf_counter()
    top = (eigen["top"]["values"][0], eigen["top"]["bounds"][0]) if cfg.top_k else None
    lanczos = dict(
        max_basis_bytes=cfg.max_basis_bytes, reorthogonalize=cfg.reorthogonalize, basis_sharding=basis_sharding
    )
    predictors = stability.step0_predictors(
        matvec,
        loss_fn,
        params,
        batches,
        **adam,
        num_steps=steps,
        key=jax.random.fold_in(key, 5),
        top=top,
        lr_multipliers=models.lr_multipliers(params, model.config),  # µP's per-layer factors: M·P⁻¹H
        **lanczos,
    )
    out["stability"] = dict(operator=cfg.operator, **predictors)
    timings["stability_s"] = time.perf_counter() - t

  if cfg.edge_predictors:
    t = time.perf_counter()
    ggn = matvec if cfg.operator == "ggn" else build_ggn(params)
    lanczos_kw = dict(
        max_basis_bytes=cfg.max_basis_bytes, reorthogonalize=cfg.reorthogonalize, basis_sharding=basis_sharding
    )
    e = curvax.top_eigenvalues(ggn, 1, num_steps=steps, key=jax.random.fold_in(key, 6), **lanczos_kw)
    sharpness = curvax.batch_sharpness(loss_fn, params, batches)
    out.setdefault("stability", dict(operator=cfg.operator)).update(
        ggn_lambda_max=float(e.values[0]),
        ggn_lambda_max_bound=float(e.bounds[0]),
        batch_sharpness=sharpness.value,
        batch_sharpness_std_error=sharpness.std_error,
        batch_sharpness_per_batch=list(sharpness.per_batch),
        edge_thresholds="unstable iff lr * lambda > c: c = 2 for the Gauss-Newton and the batch sharpness",
    )
    timings["edge_predictors_s"] = time.perf_counter() - t

  if "stability" in out:
    write_json(directory, "stability.json", out["stability"])

  if cfg.spectrum:
    t = time.perf_counter()
    d = curvax.spectral_density(
        matvec,
        num_steps=steps,
        num_probes=cfg.num_probes,
        key=k_slq,
        sigma=cfg.sigma or None,
        max_basis_bytes=cfg.max_basis_bytes,
        reorthogonalize=cfg.reorthogonalize,
        callback=progress_callback(f"{label} SLQ matvecs", print_fn) if progress else None,
        callback_every=max(steps // 2, 1),
        probe_batch=_probe_batch(cfg, cfg.num_probes),
        basis_sharding=basis_sharding,
    )
    spec = density_record(d, cfg.num_probes, steps)
    timings["spectrum_s"] = time.perf_counter() - t
    write_json(directory, "spectrum.json", spec)
    save_plot(
        plots.plot_spectral_density,
        jsonable(spec),
        os.path.join(directory, "spectrum.png"),
        log_y=cfg.log_density,
        title=f"{label}: spectral density",
        num_params=n,
    )
    meta["sigma"] = float(d.sigma)

  if cfg.trace_probes:
    t = time.perf_counter()
    tr = curvax.trace(
        matvec,
        num_probes=cfg.trace_probes,
        key=k_trace,
        method=cfg.trace_method,
        probe_batch=_probe_batch(cfg, cfg.trace_probes),
    )
    out["trace"] = dict(
        estimate=float(tr.estimate), std_error=float(tr.std_error), num_matvecs=tr.num_matvecs, method=tr.method
    )
    timings["trace_s"] = time.perf_counter() - t
    write_json(directory, "trace.json", out["trace"])

  if cfg.blocks:
    t = time.perf_counter()
    block_full = matvec if cfg.operator == "hessian" else build_hvp(loss_fn, params)
    records = block_spectra(cfg, block_full, params, model, k_blocks, print_fn)
    timings["blocks_s"] = time.perf_counter() - t
    write_json(directory, "blocks.json", records)
    save_plot(
        plots.plot_block_spectra, jsonable(records), os.path.join(directory, "blocks.png"), title=f"{label}: blocks"
    )
    save_plot(
        plots.plot_block_ritz_spectra,
        jsonable(records),
        os.path.join(directory, "block_spectra.png"),
        title=f"{label}: per-block Ritz spectra",
    )

  if cfg.grad_norms:
    t = time.perf_counter()
    params_list = [params] + [
        _cast(init_fn(jax.random.key(cfg.seed + i)), dtype)["params"] for i in range(1, cfg.grad_norm_seeds)
    ]
    prof = gradients.grad_norm_profile(loss_fn, params_list, batches, model=model)
    timings["grad_norms_s"] = time.perf_counter() - t
    write_json(directory, "grad_norms.json", prof)
    save_plot(
        plots.plot_grad_norms,
        jsonable(prof["aggregate"]),
        os.path.join(directory, "grad_norms.png"),
        title=f"{label}: grad norm",
    )

  if cfg.signal:
    t = time.perf_counter()
    per_batch = [dict(batch_index=i, records=signal.signal_profile(model, variables, b)) for i, b in enumerate(batches)]
    timings["signal_s"] = time.perf_counter() - t
    write_json(directory, "signal.json", per_batch)
    save_plot(
        plots.plot_signal,
        jsonable(per_batch[0]["records"]),
        os.path.join(directory, "signal.png"),
        title=f"{label}: signal (batch 0)",
    )

  if cfg.param_stats:
    t = time.perf_counter()
    out["params"] = init_stats.param_statistics(params, model)
    timings["param_stats_s"] = time.perf_counter() - t
    write_json(directory, "params.json", out["params"])

  if cfg.mlp_depth:
    t = time.perf_counter()
    out["mlp"] = init_stats.mlp_second_moments(
        model.config.activation,
        width=cfg.mlp_width,
        depth=cfg.mlp_depth,
        rows=cfg.mlp_rows,
        draws=cfg.mlp_draws,
        seed=cfg.seed,
    )
    timings["mlp_s"] = time.perf_counter() - t
    write_json(directory, "mlp_moments.json", out["mlp"])

  meta["timings"] = timings
  write_json(directory, "metadata.json", meta)
  out["metadata"] = meta
  return jsonable(out)
