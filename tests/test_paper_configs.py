"""The `paper` scale of every claim fits the devices it states, and a sweep whose curvature records cannot fit stops
before its first run (experiments/hooks.py `check_before_runs`, called by `experiments.sweep.plan`).

Found on an H200 (2026-11-27): study 13's paper config stopped its SP @ 16+16 layers run at its start, after the
shallow runs before it had trained, because its float64 records needed a 9.6 GiB Lanczos basis against the 4 GiB
default of `analysis.max_basis_bytes`; the same check then found studies 11 and 12's paper configs over it too.
"""

import dataclasses
import importlib
import pathlib

import flax.linen as nn
import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh

import analysis.run
import analysis.tracking
import train.config
from configs import default
from experiments import claims, hooks, sweep
from experiments import grid as grid_lib
from models.transformer import Transformer

from .conftest import SHARED_MULTI30K


def _curvature_runs(name: str, scale: str):
  """(cell, resolved config, whether it is analyzed) for seed 0 of every cell of claim `name` at `scale` that
  records curvature or is analyzed, resolved as a sweep resolves it (`experiments.sweep.plan`)."""
  module = importlib.import_module(f"configs.claims.{name}")
  config = module.get_config(scale)
  config.data.dir = str(SHARED_MULTI30K)
  swept = grid_lib.SweepConfig.from_config(config.sweep)
  for cell in grid_lib.cells(config):
    cell_config = grid_lib.cell_config(config, cell, 0, tokenizer_dir="/nonexistent/tokenizer")
    resolved = train.config.resolve(cell_config, groups=sweep.GROUPS)
    analyzes = swept.analysis_at_init or bool(swept.analysis_steps) or resolved.analysis.at_init
    if resolved.train.curvature_every or analyzes:
      yield cell.name, resolved, analyzes


def _check(resolved, analyzes, n, mesh):
  """The two checks `hooks.check_before_runs` makes, on a mesh of the devices the config states."""
  if resolved.train.curvature_every:
    analysis.tracking.check_basis(resolved.analysis, n, mesh)
  if analyzes:
    a = resolved.analysis
    analysis.run.check_basis(a, n, mesh, preconditioned=bool(a.preconditioned_top_k or a.update_sharpness))


@pytest.mark.parametrize("name", list(claims.CLAIM_NAMES))
def test_paper_scale_curvature_records_fit_the_devices_the_config_states(name):
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K}")
  module = importlib.import_module(f"configs.claims.{name}")
  devices = getattr(module, "DEVICES", {}).get("paper", 1)
  mesh = AbstractMesh((devices,), ("data",))
  largest = {}
  for cell, resolved, analyzes in _curvature_runs(name, "paper"):
    n = hooks.num_params_without_vocab(resolved.model)
    try:
      _check(resolved, analyzes, n, mesh)
    except ValueError as e:
      pytest.fail(f"{name} at paper on {devices} device(s), cell {cell}: {e}")
    largest = max(largest, {"n": n, "args": (resolved, analyzes, n)}, key=lambda r: r.get("n", 0))
  if devices > 1:  # a stated count above 1 is needed: one device does not hold the largest run's basis
    with pytest.raises(ValueError, match="Lanczos basis too large"):
      _check(*largest["args"], AbstractMesh((1,), ("data",)))


def test_the_paper_configs_that_record_curvature_are_the_ones_checked():
  """The parametrized test above is not vacuous: the three studies with curvature records and the Hessian spectrum's
  analyses have such cells."""
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K}")
  checked = {name for name in claims.CLAIM_NAMES if next(_curvature_runs(name, "paper"), None)}
  assert {"edge", "width", "depth", "hessian_spectrum"} <= checked


def test_num_params_without_vocab_is_the_model_at_three_ids_and_a_lower_bound():
  config = default.get_config()
  config.model.preset = "tiny"
  model_config = train.config.resolve(config).model
  batch = {k: np.ones((1, 1), np.int32) for k in ("inputs", "targets")}

  def n(vocab):  # an independent count: a real init, arrays and all
    params = Transformer(dataclasses.replace(model_config, vocab_size=vocab)).init(jax.random.key(0), batch)
    return sum(np.size(x) for x in jax.tree.leaves(nn.unbox(params["params"])))

  lower = hooks.num_params_without_vocab(model_config)
  assert lower == n(3)
  assert lower < n(1000)


def _tracking_sweep(workdir: pathlib.Path, max_basis_bytes: int):
  config = default.get_config()
  config.model.preset = "tiny"
  config.train.num_steps = 2
  config.train.curvature_every = 1
  config.analysis.lanczos_steps = 4
  config.analysis.top_k, config.analysis.bottom_k = 1, 0
  config.analysis.dtype = "float32"
  config.analysis.max_basis_bytes = max_basis_bytes
  config.sweep.grid = "optim.learning_rate=1e-3,2e-3"
  config.sweep.seeds = 2
  return config


def test_a_sweep_whose_records_cannot_fit_stops_before_any_run(tmp_path):
  n = hooks.num_params_without_vocab(train.config.resolve(_tracking_sweep(tmp_path, 1)).model)
  mesh_devices = jax.device_count()
  per_device = -(-n // mesh_devices)
  needed = 5 * per_device * 4  # (4 steps + 1) float32 vectors of the per-device share of n
  # One byte short of the lower bound's basis: refused at plan time, naming the cell and the key, nothing trained.
  config = _tracking_sweep(tmp_path, needed - 1)
  with pytest.raises(ValueError, match=r"sweep cell optim.learning_rate=0.001: train.curvature_every=1 .*too large"):
    sweep.run_sweep(config, str(tmp_path / "sweep"))
  assert not (tmp_path / "sweep" / "cells").exists()
  # Exactly the lower bound's basis: the plan passes (the exact n, vocabulary included, is checked at run start).
  runs = sweep.plan(_tracking_sweep(tmp_path, needed), str(tmp_path / "sweep2"))
  assert len(runs) == 4


def test_a_sweep_whose_analysis_cannot_fit_stops_before_any_run(tmp_path):
  config = _tracking_sweep(tmp_path, 1)
  config.train.curvature_every = 0
  config.sweep.analysis_at_init = True
  config.analysis.spectrum = False
  with pytest.raises(ValueError, match=r"sweep cell optim.learning_rate=0.001: the run's analysis .*too large"):
    sweep.run_sweep(config, str(tmp_path / "sweep"))
  assert not (tmp_path / "sweep" / "cells").exists()
  config.sweep.analysis_at_init = False  # no analysis, no basis: nothing to check
  assert len(sweep.plan(config, str(tmp_path / "sweep2"))) == 4
