"""The registered analyses of one model state: `ANALYSES[name](ctx) -> (record, plots)`.

Contract: an analysis reads a frozen `Context` (the typed `config.analysis`, the model state cast to the analysis
dtype, its batches, the curvature operator when one is needed, the PRNG keys, and `records`: what the analyses before
it returned) and returns its record (None when its keys turn it off) and the plots of that record, each
`(plot function, data, file name, keyword arguments)`. It writes nothing and times nothing: `analysis.run` runs them
in the order of `ANALYSES`, times each (`<name>_s` in metadata.json), writes the record as `<name>.json`, draws its
plots, and returns the records of `RETURNED`. `get_analysis(name)` raises listing the valid names.
"""

import dataclasses
import types
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

import curvax
import models
from analysis import gradients, hessian, init_stats, plots, signal, stability
from analysis.block_spectra import block_spectra
from analysis.config import AnalysisConfig
from analysis.progress import progress_callback
from analysis.records import density_record, extreme_record
from train.loss import make_logits_fn


@dataclasses.dataclass(frozen=True)
class Context:
  """One model state and what every analysis of it reads (built once by `analysis.run.run_analysis`).

  Attributes:
    cfg: the typed `config.analysis`. dtype: the analysis dtype. model, variables, params: the state, cast to it.
    batches: the analysis batches (MLM-masked for an encoder, on the mesh when there is one). loss_fn: their loss.
    label, print_fn, progress: plot titles, progress lines, whether programs carry a progress callback.
    init_fn: `init_fn(key) -> variables` for the gradient profile's extra seeds (or None).
    adam: `stability.adam_constants` ({} when no stability predictor is asked for).
    basis_sharding: the Lanczos vectors' split over the mesh (None: one device).
    num_params, steps: n and the Lanczos steps min(analysis.lanczos_steps, n).
    operator: the configured curvature operator (None when no analysis uses one).
    key: the root key of `analysis.seed`; keys: its five splits (top, bottom, SLQ, trace, blocks).
    records: the records of the analyses run before this one, by name (read-only).
  """

  cfg: AnalysisConfig
  dtype: Any
  model: Any
  variables: dict
  params: Any
  batches: list
  loss_fn: Any
  label: str
  print_fn: Callable[[str], None]
  progress: bool
  init_fn: Optional[Callable[[jax.Array], dict]]
  adam: dict
  basis_sharding: Any
  num_params: int
  steps: int
  operator: Any
  key: jax.Array
  keys: tuple
  records: types.MappingProxyType = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))

  def hessian(self):
    """The Hessian operator of the batches (the configured operator when it is the Hessian)."""
    if self.cfg.operator == "hessian" and self.operator is not None:
      return self.operator
    return hessian.hvp_fn(self.loss_fn, self.params, self.batches, linearize=self.cfg.linearize)

  def gauss_newton(self):
    """The Gauss–Newton operator of the batches, built anew (the edge predictors' λ_max(G))."""
    return hessian.ggn_vp_fn(make_logits_fn(self.model, variables=self.variables), self.params, self.batches)

  def lanczos_options(self, progress_label: Optional[str] = None) -> dict:
    """The Lanczos keyword arguments every curvature analysis passes (a progress line when asked and allowed)."""
    options = dict(max_basis_bytes=self.cfg.max_basis_bytes, reorthogonalize=self.cfg.reorthogonalize)
    if progress_label is not None:
      options["callback"] = (
          progress_callback(f"{self.label} {progress_label}", self.print_fn) if self.progress else None
      )
    return dict(options, basis_sharding=self.basis_sharding)


def cast_floats(tree, dtype):
  """`tree` with its floating leaves cast to `dtype` (integer leaves, e.g. token ids, kept)."""
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def probe_batch(cfg, num_probes):
  """analysis.probe_batch capped at the number of probes; 0 leaves the choice to the backend default."""
  return min(cfg.probe_batch, num_probes) if cfg.probe_batch else None


def eigenvalues(ctx: Context):
  """Top-k and bottom-k Ritz values with their bounds (`analysis.top_k`, `analysis.bottom_k`)."""
  cfg, eigen = ctx.cfg, {}
  if cfg.top_k:
    options = ctx.lanczos_options("top eigenvalues")
    eigen["top"] = extreme_record(
        curvax.top_eigenvalues(ctx.operator, cfg.top_k, num_steps=ctx.steps, key=ctx.keys[0], **options)
    )
  if cfg.bottom_k:
    options = ctx.lanczos_options("bottom eigenvalues")
    eigen["bottom"] = extreme_record(
        curvax.bottom_eigenvalues(ctx.operator, cfg.bottom_k, num_steps=ctx.steps, key=ctx.keys[1], **options)
    )
  if not eigen:
    return None, []
  return eigen, [(plots.plot_eigenvalues, eigen, "eigenvalues.png", dict(title=f"{ctx.label}: extremes"))]


def stability_predictors(ctx: Context):
  """Step-0 stability predictors (`analysis.preconditioned_top_k`, `analysis.update_sharpness`) and the edge
  predictors λ_max(G) and the batch sharpness (`analysis.edge_predictors`), into one record."""
  cfg, record = ctx.cfg, None
  if ctx.adam:
    eigen = ctx.records.get("eigenvalues")
    top = (eigen["top"]["values"][0], eigen["top"]["bounds"][0]) if cfg.top_k else None
    predictors = stability.step0_predictors(
        ctx.operator,
        ctx.loss_fn,
        ctx.params,
        ctx.batches,
        **ctx.adam,
        num_steps=ctx.steps,
        key=jax.random.fold_in(ctx.key, 5),
        top=top,
        lr_multipliers=models.lr_multipliers(ctx.params, ctx.model.config),  # µP's per-layer factors: M·P⁻¹H
        **ctx.lanczos_options(),
    )
    record = dict(operator=cfg.operator, **predictors)
  if cfg.edge_predictors:
    ggn = ctx.operator if cfg.operator == "gauss_newton" else ctx.gauss_newton()
    key = jax.random.fold_in(ctx.key, 6)
    e = curvax.top_eigenvalues(ggn, 1, num_steps=ctx.steps, key=key, **ctx.lanczos_options())
    sharpness = curvax.batch_sharpness(ctx.loss_fn, ctx.params, ctx.batches)
    record = record or dict(operator=cfg.operator)
    record.update(
        ggn_lambda_max=float(e.values[0]),
        ggn_lambda_max_bound=float(e.bounds[0]),
        batch_sharpness=sharpness.value,
        batch_sharpness_std_error=sharpness.std_error,
        batch_sharpness_per_batch=list(sharpness.per_batch),
        edge_thresholds="unstable iff lr * lambda > c: c = 2 for the Gauss-Newton and the batch sharpness",
    )
  return record, []


def spectrum(ctx: Context):
  """The SLQ spectral density with its band (`analysis.spectrum`)."""
  cfg = ctx.cfg
  if not cfg.spectrum:
    return None, []
  options = ctx.lanczos_options("SLQ matvecs")
  options.update(callback_every=max(ctx.steps // 2, 1), probe_batch=probe_batch(cfg, cfg.num_probes))
  d = curvax.spectral_density(
      ctx.operator, num_steps=ctx.steps, num_probes=cfg.num_probes, key=ctx.keys[2], sigma=cfg.sigma or None, **options
  )
  record = density_record(d, cfg.num_probes, ctx.steps)
  kwargs = dict(log_y=cfg.log_density, title=f"{ctx.label}: spectral density", num_params=ctx.num_params)
  return record, [(plots.plot_spectral_density, record, "spectrum.png", kwargs)]


def trace(ctx: Context):
  """The stochastic trace estimate (`analysis.trace_probes`, `analysis.trace_method`)."""
  cfg = ctx.cfg
  if not cfg.trace_probes:
    return None, []
  tr = curvax.trace(
      ctx.operator,
      num_probes=cfg.trace_probes,
      key=ctx.keys[3],
      method=cfg.trace_method,
      probe_batch=probe_batch(cfg, cfg.trace_probes),
  )
  return (
      dict(estimate=float(tr.estimate), std_error=float(tr.std_error), num_matvecs=tr.num_matvecs, method=tr.method),
      [],
  )


def blocks(ctx: Context):
  """Per-block top eigenvalues of the Hessian (`analysis.blocks`, `analysis.block_filter`)."""
  if not ctx.cfg.blocks:
    return None, []
  records = block_spectra(ctx.cfg, ctx.hessian(), ctx.params, ctx.model, ctx.keys[4], ctx.print_fn)
  return records, [
      (plots.plot_block_spectra, records, "blocks.png", dict(title=f"{ctx.label}: blocks")),
      (plots.plot_block_ritz_spectra, records, "block_spectra.png", dict(title=f"{ctx.label}: per-block Ritz spectra")),
  ]


def grad_norms(ctx: Context):
  """Per-parameter gradient norms per (init seed, batch) pair (`analysis.grad_norms`, `analysis.grad_norm_seeds`)."""
  cfg = ctx.cfg
  if not cfg.grad_norms:
    return None, []
  params_list = [ctx.params] + [
      cast_floats(ctx.init_fn(jax.random.key(cfg.seed + i)), ctx.dtype)["params"] for i in range(1, cfg.grad_norm_seeds)
  ]
  prof = gradients.grad_norm_profile(ctx.loss_fn, params_list, ctx.batches, model=ctx.model)
  return prof, [(plots.plot_grad_norms, prof["aggregate"], "grad_norms.png", dict(title=f"{ctx.label}: grad norm"))]


def signal_profiles(ctx: Context):
  """Signal-propagation records per batch (`analysis.signal`)."""
  if not ctx.cfg.signal:
    return None, []
  per_batch = [
      dict(batch_index=i, records=signal.signal_profile(ctx.model, ctx.variables, b)) for i, b in enumerate(ctx.batches)
  ]
  title = f"{ctx.label}: signal (batch 0)"
  return per_batch, [(plots.plot_signal, per_batch[0]["records"], "signal.png", dict(title=title))]


def param_stats(ctx: Context):
  """Realized statistics of every parameter with its role and fans (`analysis.param_stats`)."""
  return (init_stats.param_statistics(ctx.params, ctx.model) if ctx.cfg.param_stats else None), []


def mlp_moments(ctx: Context):
  """E[x_l²] through an `analysis.mlp_depth`-layer LeCun MLP and its mean-field prediction."""
  cfg = ctx.cfg
  if not cfg.mlp_depth:
    return None, []
  activation = ctx.model.config.activation
  moments = init_stats.mlp_second_moments(
      activation, width=cfg.mlp_width, depth=cfg.mlp_depth, rows=cfg.mlp_rows, draws=cfg.mlp_draws, seed=cfg.seed
  )
  return moments, []


# name -> analysis, in the order they run: a record is written to <name>.json. Stability reads the eigenvalues' top.
ANALYSES = {
    "eigenvalues": eigenvalues,
    "stability": stability_predictors,
    "spectrum": spectrum,
    "trace": trace,
    "blocks": blocks,
    "grad_norms": grad_norms,
    "signal": signal_profiles,
    "params": param_stats,
    "mlp_moments": mlp_moments,
}
# The records `run_analysis` returns, under these keys (the others are in their files only).
RETURNED = {
    "eigenvalues": "eigenvalues",
    "stability": "stability",
    "trace": "trace",
    "params": "params",
    "mlp_moments": "mlp",
}


def get_analysis(name: str):
  """The analysis registered under `name`; ValueError listing the valid names."""
  if name not in ANALYSES:
    raise ValueError(f"analysis {name!r} is not registered; valid: {list(ANALYSES)}")
  return ANALYSES[name]
