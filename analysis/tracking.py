"""λ_max of the training loss's Hessian recorded during training (`train.curvature_every`), as a step hook's scalars.

Contract: `curvature_hook(analysis_config, model=..., batches=..., schedule=..., num_params=...)` returns
`fn(step, state, batch) -> {name: float}` for a `train.loop.StepHook` (experiments/hooks.py wraps it), giving at the
parameters θ_t after update t (docs/science.md §9):
  curvature/lambda_max(_bound)          the top Ritz value of the Hessian of the token-mean cross-entropy and its
                                        residual bound (Parlett 1998, Thm 13.1.1; `curvax.top_eigenvalues`)
  curvature/learning_rate               η(t) = schedule(t), the base lr of the next update (no per-layer multipliers)
  curvature/lr_times_lambda_max         η(t)·λ_max(t): gradient descent's edge of stability is 2 (Cohen et al. 2021)
  with `analysis.preconditioned_top_k > 0` (Adam or AdamW), also
  curvature/preconditioned_lambda_max(_bound)   λ_max(M·P_t⁻¹H), P_t = diag(√v̂_t + ε) the preconditioner of update t
                                        (v̂_t from the optimizer state), M = diag(m) the per-layer lr multipliers
  curvature/lr_times_preconditioned_lambda_max  η(t)·λ_max(M·P_t⁻¹H), Noci et al. 2024's lr-scaled sharpness; Adam's
                                        threshold is (2 + 2β₁)/(1 − β₁) = 38 at β₁ = 0.9 (Cohen et al. 2022)
The Hessian is `analysis.run`'s (operator, dtype, Lanczos steps, start vector) on batches FIXED for the whole run
(the first `analysis.num_batches` of a fresh pass), so a record at step t equals `eigenvalues.json`'s top value of
`analysis/step_<t>/` and the curve follows the parameters, not the sampling of batches.
Warm start (`analysis.tracking_tol > 0`): a record after the first starts from the previous top Ritz vector plus a
random part (`analysis.tracking_mix`, `curvax.warm_start`) that keeps it from being orthogonal to the top
eigenvector, and stops once the bound is ≤ tracking_tol·|λ| (`curvature/lanczos_steps` counts the products). A
resumed run starts cold: its records agree with an uninterrupted run's within their bounds, not bit for bit.
The operator is data, so the records after the first compile nothing (tests/test_curvature_every.py). Across
processes every process computes, no progress callback runs (a host callback would hang the run), and only process
0 writes.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import curvax
from analysis import hessian
from analysis.config import AnalysisConfig, resolved_dtype
from analysis.preconditioner import adam_state_preconditioner_scale, check_beta2_eps, lr_multiplier_scale
from analysis.run import on_mesh
from analysis.stability import momentum_stability_threshold
from configs.schema import as_section
from train.loss import make_loss_fn
from train.step import mlm_masked

NAMES = (
    "curvature/lambda_max",
    "curvature/lambda_max_bound",
    "curvature/learning_rate",
    "curvature/lr_times_lambda_max",
)
WARM_NAMES = ("curvature/lanczos_steps",)  # with analysis.tracking_tol > 0: the matvecs of λ_max(H)'s record
PRECONDITIONED_NAMES = (
    "curvature/preconditioned_lambda_max",
    "curvature/preconditioned_lambda_max_bound",
    "curvature/lr_times_preconditioned_lambda_max",
)
ADAM_OPTIMIZERS = ("adam", "adamw")  # optax scale_by_adam: the preconditioner P_t = diag(√v̂_t + ε)


def adam_state(opt_state: Any) -> optax.ScaleByAdamState:
  """The one `optax.ScaleByAdamState` (count, mu, nu) in an optimizer state (ValueError if there is none or several)."""
  found = [
      s
      for s in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
      if isinstance(s, optax.ScaleByAdamState)
  ]
  if len(found) != 1:
    raise ValueError(
        f"the optimizer state has {len(found)} Adam states (optax.ScaleByAdamState); the preconditioned λ_max "
        f"needs exactly one (optim.name in {list(ADAM_OPTIMIZERS)})"
    )
  return found[0]


def check_basis(analysis_config: Any, num_params: int, mesh: Optional[jax.sharding.Mesh] = None) -> None:
  """Raise ValueError if a record's Lanczos basis, `min(analysis.lanczos_steps, n) + 1` vectors of `num_params` = n
  entries in the analysis dtype, split along n over `mesh`'s devices, exceeds `analysis.max_basis_bytes` on one
  device (`curvax.check_basis_memory`). No basis is kept without reorthogonalization and warm start. `curvature_hook`
  calls it before its first record, and `experiments.sweep.check_memory` before a sweep's first run."""
  cfg = as_section(AnalysisConfig, analysis_config)  # the door: a typed section as it is
  if cfg.reorthogonalize == "none" and cfg.tracking_tol <= 0:  # a warm start keeps the basis for its Ritz vector
    return
  dtype = jnp.dtype(resolved_dtype(cfg.dtype))
  basis_sharding = None if mesh is None else NamedSharding(mesh, P(tuple(mesh.axis_names)))
  steps = min(cfg.lanczos_steps, num_params)
  curvax.check_basis_memory(steps, num_params, dtype, cfg.max_basis_bytes, 1, basis_sharding=basis_sharding)


def curvature_hook(
    analysis_config: Any,
    *,
    model: Any,
    batches: Sequence[dict],
    schedule: Callable[[int], Any],
    num_params: int,
    mesh: Optional[jax.sharding.Mesh] = None,
    mlm_mask_rate: float = 0.15,
    adam: Optional[dict] = None,
    lr_multipliers: Any = None,
) -> Callable[[int, Any, dict], dict]:
  """The step hook's function recording λ_max of the training loss's Hessian (see the module docstring).

  Everything that can fail is checked here, before training: the batches' rows and count, the Lanczos basis's
  memory (`analysis.max_basis_bytes`).

  Args:
    analysis_config: the `config.analysis` subtree (operator settings: dtype, num_batches, batch_size, lanczos_steps,
      reorthogonalize, linearize, seed, max_basis_bytes).
    model: the run's Flax model (`Experiment.model`).
    batches: at least `analysis.num_batches` global batches of `analysis.batch_size` rows, the same on every process.
    schedule: the run's learning-rate schedule, `schedule(t)` the base lr of update t + 1.
    num_params: the number of parameters n (Lanczos takes min(analysis.lanczos_steps, n) steps).
    mesh: the run's device mesh (batches split over its devices, Lanczos vectors along n), or None (one device).
    mlm_mask_rate: an encoder's masking rate, `train.mlm_mask_rate`.
    adam: Adam's constants {"beta1", "beta2", "eps"} (`adam_constants`) when `analysis.preconditioned_top_k > 0`:
      the records add λ_max(P_t⁻¹H) (`PRECONDITIONED_NAMES`); None otherwise.
    lr_multipliers: the run's per-leaf learning-rate multipliers (`models.lr_multipliers`; µP's), a pytree like the
      params: the preconditioned records are then of M·P_t⁻¹H (module docstring); None: all 1.

  Returns:
    `fn(step, state, batch) -> {name: float}` over `NAMES` (and `PRECONDITIONED_NAMES`); `state` is a
    `train.state.TrainState`, `batch` is unused.
  """
  cfg = as_section(AnalysisConfig, analysis_config)  # the door: a typed section as it is
  dtype = jnp.dtype(resolved_dtype(cfg.dtype))
  batches = list(batches)[: cfg.num_batches]
  if len(batches) < cfg.num_batches:
    raise ValueError(f"analysis.num_batches={cfg.num_batches} but only {len(batches)} batches were given")
  for i, b in enumerate(batches):
    if b["targets"].shape[0] != cfg.batch_size:
      raise ValueError(f"analysis.batch_size={cfg.batch_size} but batch {i} has {b['targets'].shape[0]} rows")
  steps = min(cfg.lanczos_steps, num_params)
  check_basis(analysis_config, num_params, mesh)
  basis_sharding = None if mesh is None else NamedSharding(mesh, P(tuple(mesh.axis_names)))
  if model.config.arch == "encoder":  # the masking of analysis.run: one fixed masking per batch
    keys = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), 1), len(batches))
    batches = [mlm_masked(model.config, b, k, mlm_mask_rate) for b, k in zip(batches, keys)]
  if mesh is not None:
    batches, _ = on_mesh(batches, mesh, lambda _: None)
  # One model object for every record: Linen modules are static parts of the loss pytree, so a new clone per record
  # would be equal but the cast is done once anyway.
  model = model.clone(config=dataclasses.replace(model.config, dtype=dtype, param_dtype=dtype))
  key = jax.random.split(jax.random.key(cfg.seed), 5)[0]  # analysis.run's start vector of the top eigenvalues
  pre_key = jax.random.fold_in(key, 1)
  preconditioned = cfg.preconditioned_top_k > 0
  if preconditioned:
    if not adam:
      raise ValueError(
          f"analysis.preconditioned_top_k={cfg.preconditioned_top_k} with train.curvature_every records λ_max of "
          "Adam's preconditioned Hessian: pass adam= (beta1, beta2, eps; experiments/hooks.py does) or set "
          "analysis.preconditioned_top_k=0"
      )
    momentum_stability_threshold(adam["beta1"])  # checks β₁ before training
    check_beta2_eps(adam["beta2"], adam["eps"])
  lanczos = dict(
      num_steps=steps,
      max_basis_bytes=cfg.max_basis_bytes,
      reorthogonalize=cfg.reorthogonalize,
      callback=None,  # no progress lines inside training (and none may run across processes)
      basis_sharding=basis_sharding,
  )

  warm = cfg.tracking_tol > 0
  previous = {}  # the last record's top Ritz vectors (warm starts), by operator: "hessian", "preconditioned"

  def extreme(name, op, start_key, step):
    """λ_max of `op`: from `start_key` (cold: every record, or the first when warm) or from the previous record's
    Ritz vector (warm), stopping at the bound tracking_tol·|λ|; keeps this record's Ritz vector for the next."""
    options = dict(lanczos)
    if warm:
      options.update(tol=cfg.tracking_tol, return_basis=True)
      if name in previous:
        options["v0"] = curvax.warm_start(previous[name], jax.random.fold_in(start_key, step), cfg.tracking_mix)
      else:
        options["key"] = start_key
    else:
      options["key"] = start_key
    top = curvax.top_eigenvalues(op, 1, **options)
    if warm:
      previous[name] = curvax.ritz_vector(op, top)
    return top

  def fn(step: int, state: Any, batch: dict) -> dict:
    del batch  # the curvature batches are fixed (module docstring)
    with jax.enable_x64(dtype == jnp.float64):
      variables = jax.tree.map(
          lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, state.model_variables()
      )
      params = variables["params"]
      operator = hessian.hvp_fn(make_loss_fn(model, variables=variables), params, batches, linearize=cfg.linearize)
      if preconditioned:  # H as D·H·D with D = 1: one compiled Lanczos program serves H and P⁻¹H
        operator = curvax.diagonal_preconditioned(operator, jnp.ones((operator.size,), dtype))
      top = extreme("hessian", operator, key, step)
      lam, bound, taken = float(top.values[0]), float(top.bounds[0]), int(top.lanczos.num_steps_taken)
      if preconditioned:
        opt = adam_state(state.opt_state)
        scale = adam_state_preconditioner_scale(opt.nu, opt.count, adam["beta2"], adam["eps"], dtype)
        if lr_multipliers is not None:
          scale = scale * lr_multiplier_scale(lr_multipliers, params, dtype)
        pre = extreme("preconditioned", curvax.diagonal_preconditioned(operator.inner, scale), pre_key, step)
        lam_p, bound_p = float(pre.values[0]), float(pre.bounds[0])
    lr = float(np.asarray(schedule(step)))
    out = dict(zip(NAMES, (lam, bound, lr, lr * lam)))
    if warm:
      out[WARM_NAMES[0]] = float(taken)
    if preconditioned:
      out.update(zip(PRECONDITIONED_NAMES, (lam_p, bound_p, lr * lam_p)))
    return out

  return fn
