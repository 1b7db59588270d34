"""The `paper` scale of every claim fits the devices it states, and a sweep whose curvature records or analyses cannot
fit stops before its first run (experiments/hooks.py `check_before_runs`, called by `experiments.sweep.check_memory`
in the run stage).

Found on 2026-11-27 while preparing an H200 run (reports/BENCH_H200.md), by starting that run on the CPU first:
study 13's paper config stopped its SP @ 16+16 layers run at its start, because its float64 records needed a 9.6 GiB
Lanczos basis against the 4 GiB default of `analysis.max_basis_bytes`; a whole paper sweep would have crashed every
deep reference-lr run while the others trained. The same check then found studies 11 and 12's paper configs over it.
"""

import dataclasses
import importlib
import pathlib

import flax.linen as nn
import jax
import numpy as np
import pytest
from jax.sharding import AbstractMesh

import train.config
from configs import default
from experiments import grid as grid_lib
from experiments import hooks, registry, sweep, sweep_config
from models.transformer import Transformer

from .conftest import SHARED_MULTI30K


def _checked_runs(name: str, scale: str):
  """(cell, resolved config, whether it is analyzed) for seed 0 of every cell of claim `name` at `scale`, resolved as
  a sweep resolves it (`experiments.sweep.plan`)."""
  module = importlib.import_module(f"configs.claims.{name}")
  config = module.get_config(scale)
  config.data.dir = str(SHARED_MULTI30K)
  swept = sweep_config.SweepConfig.from_config(config.sweep)
  for cell in grid_lib.cells(config):
    cell_config = grid_lib.cell_config(config, cell, 0, tokenizer_dir="/nonexistent/tokenizer")
    resolved = train.config.resolve(cell_config, groups=sweep.GROUPS)
    analyzes = sweep.analyzed(swept, resolved)
    if resolved.train.curvature_every or analyzes:
      yield cell.name, resolved, analyzes


@pytest.mark.parametrize("name", list(registry.CLAIM_NAMES))
@pytest.mark.slow
def test_paper_scale_curvature_fits_the_devices_the_config_states(name):
  """At the run's full n (SentencePiece gives at most `data.vocab_size` ids), not only the lower bound the sweep
  checks before its runs."""
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K}")
  module = importlib.import_module(f"configs.claims.{name}")
  devices = getattr(module, "DEVICES", {}).get("paper", 1)
  largest = None
  for cell, resolved, analyzes in _checked_runs(name, "paper"):
    n = hooks.num_params_at_vocab(resolved.model, resolved.data.vocab_size)
    try:
      hooks.check_before_runs(resolved, cell, analyzes, mesh=AbstractMesh((devices,), ("data",)), num_params=n)
    except ValueError as e:
      pytest.fail(f"{name} at paper on {devices} device(s): {e}")
    if largest is None or n > largest[-1]:
      largest = (resolved, cell, analyzes, n)
  if devices > 1:  # a stated count above 1 is needed: one device does not hold the largest run's basis
    resolved, cell, analyzes, n = largest
    with pytest.raises(ValueError, match="Lanczos basis too large"):
      hooks.check_before_runs(resolved, cell, analyzes, mesh=AbstractMesh((1,), ("data",)), num_params=n)


def test_the_paper_configs_that_record_curvature_are_the_ones_checked():
  """The parametrized test above is not vacuous: the three studies with curvature records and the Hessian spectrum's
  analyses have such cells."""
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K}")
  checked = {name for name in registry.CLAIM_NAMES if next(_checked_runs(name, "paper"), None)}
  assert {"edge", "width", "depth", "hessian_spectrum"} <= checked


@pytest.mark.slow
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


def _lower_bound_basis_bytes(config) -> int:
  """Bytes of (4 steps + 1) float32 vectors of the per-device share of the lower-bound n (the tiny preset)."""
  n = hooks.num_params_without_vocab(train.config.resolve(config).model)
  return 5 * -(-n // jax.device_count()) * 4


def test_a_sweep_whose_records_cannot_fit_stops_before_any_run(tmp_path):
  needed = _lower_bound_basis_bytes(_tracking_sweep(tmp_path, 1))
  # One byte short of the lower bound's basis: refused before any run, naming the cell and the key, nothing trained.
  config = _tracking_sweep(tmp_path, needed - 1)
  with pytest.raises(ValueError, match=r"sweep cell optim.learning_rate=0.001: train.curvature_every=1 .*too large"):
    sweep.run_sweep(config, str(tmp_path / "sweep"))
  assert not (tmp_path / "sweep" / "cells").exists()
  swept = sweep_config.SweepConfig.from_config(config.sweep)
  runs = sweep.plan(config, str(tmp_path / "sweep"))  # planning alone does not check: prepare and gather plan too
  with pytest.raises(ValueError, match="too large"):
    sweep.check_memory(runs, list(range(len(runs))), swept)
  # The prepare stage (a login node without the training devices) plans without the check.
  config.sweep.stage = "prepare"
  sweep.run_sweep(config, str(tmp_path / "sweep"))
  # Exactly the lower bound's basis passes (the exact n, vocabulary included, is checked at the run's start).
  config = _tracking_sweep(tmp_path, needed)
  runs = sweep.plan(config, str(tmp_path / "sweep2"))
  sweep.check_memory(runs, list(range(len(runs))), swept)
  assert len(runs) == 4


@pytest.mark.parametrize("how", ["sweep.analysis_at_init", "analysis.at_init", "sweep.analysis_steps"])
def test_a_sweep_whose_analysis_cannot_fit_stops_before_any_run(tmp_path, how):
  config = _tracking_sweep(tmp_path, 1)
  config.train.curvature_every = 0
  config.analysis.spectrum = False
  if how == "sweep.analysis_at_init":
    config.sweep.analysis_at_init = True
  elif how == "analysis.at_init":
    config.analysis.at_init = True
  else:
    config.train.checkpoint_every = 2
    config.sweep.analysis_steps = (2,)
  with pytest.raises(ValueError, match=r"sweep cell optim.learning_rate=0.001: the run's analysis .*too large"):
    sweep.run_sweep(config, str(tmp_path / "sweep"))
  assert not (tmp_path / "sweep" / "cells").exists()


def test_a_sweep_without_analysis_or_records_is_not_checked(tmp_path):
  config = _tracking_sweep(tmp_path, 1)
  config.train.curvature_every = 0  # no records, no analysis: no basis, whatever max_basis_bytes says
  runs = sweep.plan(config, str(tmp_path / "sweep"))
  sweep.check_memory(runs, list(range(len(runs))), sweep_config.SweepConfig.from_config(config.sweep))
