"""The `config.analysis` subtree, typed and checked at one boundary (each key's meaning: configs/default.py).

Contract: `AnalysisConfig.from_config(config.analysis)` (an `AnalysisConfig`, its ConfigDict or a mapping) returns a
frozen dataclass whose values were all checked before any compute: the choices of `dtype` (`DTYPES`), `operator`
(`OPERATORS`), `trace_method`, `reorthogonalize` and `progress`, the integer ranges, `top_k` / `bottom_k` /
`preconditioned_top_k` ≤ `lanczos_steps`, enough trace probes for the method, `block_filter` a regular expression
and `sigma` ≥ 0; a bad value raises ValueError naming `analysis.<key>`, the value and the valid choices.
`ANALYSIS_KEYS` lists every key; `resolved_dtype` turns `analysis.dtype = "auto"` into the backend's dtype and
`progress_enabled` `analysis.progress` into whether progress lines are printed.
main.py passes the class to `train.config.resolve` (through `experiments.GROUPS`), which types the subtree once;
`analysis.run.run_analysis` and `analysis.tracking` trust a typed section and type a ConfigDict at their door
(`configs.schema.as_section`).
"""

import dataclasses
import re

import jax

import curvax
from configs.schema import Section, contradiction, invalid

DTYPES = ("auto", "float64", "float32")
# The trace estimators `analysis.trace_method` offers: curvax's (`curvax.TRACE_METHODS`) but XTrace, which needs the
# optional matfree.
TRACE_METHODS = tuple(m for m in curvax.TRACE_METHODS if m != "xtrace")
OPERATORS = ("hessian", "gauss_newton")
PROGRESS = ("auto", "on", "off")
# `analysis.progress='auto'` prints Lanczos/SLQ progress lines from this many parameters on (`progress_enabled`).
PROGRESS_MIN_PARAMS = 5_000_000
_INT_KEYS = dict(
    checkpoint_step=-1,
    probe_batch=0,
    num_batches=1,
    batch_size=1,
    lanczos_steps=1,
    num_probes=2,
    top_k=0,
    bottom_k=0,
    preconditioned_top_k=0,
    block_lanczos_steps=1,
    grad_norm_seeds=1,
    trace_probes=0,
    seed=0,
    max_basis_bytes=1,
    mlp_depth=0,
    mlp_width=1,
    mlp_rows=1,
    mlp_draws=1,
)


@dataclasses.dataclass(frozen=True)
class AnalysisConfig(Section):
  """The `config.analysis` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "analysis"
  at_init: bool
  checkpoint_step: int
  dtype: str
  operator: str
  num_batches: int
  batch_size: int
  linearize: bool
  lanczos_steps: int
  reorthogonalize: str
  top_k: int
  bottom_k: int
  spectrum: bool
  num_probes: int
  probe_batch: int
  sigma: float
  log_density: bool
  trace_probes: int
  trace_method: str
  blocks: bool
  block_lanczos_steps: int
  block_filter: str
  grad_norms: bool
  grad_norm_seeds: int
  signal: bool
  param_stats: bool
  mlp_depth: int
  mlp_width: int
  mlp_rows: int
  mlp_draws: int
  preconditioned_top_k: int
  update_sharpness: bool
  edge_predictors: bool
  tracking_tol: float
  tracking_mix: float
  seed: int
  max_basis_bytes: int
  progress: str

  def __post_init__(self):
    _check_values(self)


# Every key of `config.analysis` (declared with its default and comment in configs/default.py).
ANALYSIS_KEYS = tuple(f.name for f in dataclasses.fields(AnalysisConfig))


def _check_values(cfg: AnalysisConfig) -> None:
  for key, choices in (
      ("dtype", DTYPES),
      ("operator", OPERATORS),
      ("trace_method", TRACE_METHODS),
      ("reorthogonalize", curvax.REORTHOGONALIZATIONS),
      ("progress", PROGRESS),
  ):
    if cfg[key] not in choices:
      raise invalid(f"analysis.{key}", cfg[key], list(choices))
  for key, minimum in _INT_KEYS.items():
    value = cfg[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
      raise invalid(f"analysis.{key}", value, f"an integer >= {minimum}")
  for key in ("top_k", "bottom_k", "preconditioned_top_k"):
    if cfg[key] > cfg.lanczos_steps:
      raise contradiction(
          f"analysis.{key}",
          cfg[key],
          "analysis.lanczos_steps",
          cfg.lanczos_steps,
          "Lanczos gives at most num_steps Ritz values",
      )
  minimum = 4 if cfg.trace_method == "hutch++" else 2
  if cfg.trace_probes and cfg.trace_probes < minimum:
    raise contradiction(
        "analysis.trace_probes",
        cfg.trace_probes,
        "analysis.trace_method",
        cfg.trace_method,
        f"valid: 0 (skip) or >= {minimum} probes",
    )
  try:
    re.compile(cfg.block_filter)
  except (re.error, TypeError) as e:
    raise invalid("analysis.block_filter", cfg.block_filter, "a regular expression", str(e)) from e
  tol = cfg.tracking_tol
  if isinstance(tol, bool) or not (isinstance(tol, (int, float)) and 0 <= tol < 1):
    raise invalid("analysis.tracking_tol", tol, "a number in [0, 1) (0: a cold Lanczos at every record)")
  mix = cfg.tracking_mix
  if isinstance(mix, bool) or not (isinstance(mix, (int, float)) and 0 < mix <= 1):
    raise invalid("analysis.tracking_mix", mix, "a number in (0, 1] (the warm start's random part, e.g. 0.1)")
  if isinstance(cfg.sigma, bool) or not (isinstance(cfg.sigma, (int, float)) and cfg.sigma >= 0):
    raise invalid("analysis.sigma", cfg.sigma, "a number >= 0 (0: 1% of the node range)")


def progress_enabled(setting: str, num_params: int) -> bool:
  """Whether the analysis prints Lanczos/SLQ progress lines (`analysis.progress`). A progress line is a host callback
  inside the compiled program, and JAX's persistent compilation cache does not store programs that hold one, so the
  choice is between progress lines and a second run that loads its programs instead of compiling them. 'auto' picks
  by size: from `PROGRESS_MIN_PARAMS` parameters on (the 'small' preset's 5.8M and up: on 2 CPU cores a Lanczos
  product takes about a second there, so a routine runs for minutes and its compile is a small part) the lines;
  below, the cache (a `tiny` analysis computes in about a second and compiles for ten: bench/vs_pyhessian.py)."""
  if setting not in PROGRESS:
    raise invalid("analysis.progress", setting, list(PROGRESS))
  return setting == "on" or (setting == "auto" and num_params >= PROGRESS_MIN_PARAMS)


def resolved_dtype(name: str) -> str:
  """`analysis.dtype`: 'auto' is float64 where the backend computes it natively (CPU, GPU) and float32 on TPU,
  which has no native float64 (XLA emulates it there, slowly)."""
  if name != "auto":
    return name
  return "float32" if jax.default_backend() == "tpu" else "float64"
