"""Every experiment config in configs/ (the registry tests/test_configs.py loads: each file, no hand-written list)
trains at the tiny preset for 20 steps under FSDP on 2 devices without diverging, and a run cut back to its step-10
checkpoint resumes to the same losses, parameters, optimizer state and variables bit for bit (the rules of 2024-26
included: QK-norm, z-loss, DyT, Derf, LayerScale, Peri-LN, LayerNorm scaling, Mix-LN, HybridNorm, GI-Adam, the
untuned warmup, CompleteP).

One subprocess (tests/scripts/config_train.py, 2 simulated CPU devices, `mesh.fsdp=2`) trains them all in turn with
one persistent compilation cache; each config is then its own test.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import xla_flags
from tests.test_configs import CONFIG_FILES

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "config_train.py"
NAMES = [os.path.basename(f) for f in CONFIG_FILES]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  env = {
      **os.environ,
      "XLA_FLAGS": xla_flags(2),  # the suite's flags (tests/conftest.py)
      "JAX_PLATFORMS": "cpu",
  }
  workdir = tmp_path_factory.mktemp("configs")
  proc = subprocess.run(
      [sys.executable, str(SCRIPT), str(workdir), *CONFIG_FILES],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
  return {r["config"]: r for r in lines}


@pytest.mark.parametrize("name", NAMES)
def test_config_trains_20_steps_under_fsdp_and_resumes_bitwise(records, name):
  r = records[name]
  assert "error" not in r, r.get("error")
  assert r["mesh"] == {"data": 1, "fsdp": 2} and r["sharded"]  # the [V, D] embedding's D split over 2 devices
  losses = np.asarray(r["losses"])
  assert losses.shape == (20,) and np.all(np.isfinite(losses)), losses
  assert losses.max() < losses[0] + 1.0, losses  # no divergence: nothing climbs far above the loss at the start
  assert r["resumed_from"] == 10 and r["resumed_losses"] == r["losses"][10:]
  assert r["same_params"]
