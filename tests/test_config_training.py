"""Every experiment config in configs/ (the registry tests/test_configs.py loads: each file, no hand-written list)
trains at the tiny preset for 20 steps under FSDP on 2 devices without diverging, and a run cut back to its step-10
checkpoint resumes to the same losses, parameters, optimizer state and variables bit for bit (the rules of 2024-26
included: QK-norm, z-loss, DyT, Derf, LayerScale, Peri-LN, LayerNorm scaling, Mix-LN, HybridNorm, GI-Adam, the
untuned warmup, CompleteP).

One subprocess (tests/scripts/config_train.py, 2 simulated CPU devices, `mesh.fsdp=2`) trains them all in turn with
one persistent compilation cache; each config is then its own test. A config none of whose rules reads a layer's index
or the depth (`tests.depth_rules.reads_depth`) trains at 1 layer per stack; the others keep the preset's 2, checked
against the papers' depth rules below.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import xla_flags
from tests.scripts.config_train import config_reads_depth, tiny
from tests.test_configs import CONFIG_FILES

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "scripts" / "config_train.py"
NAMES = [os.path.basename(f) for f in CONFIG_FILES]
# The configs whose papers' rules read a layer's index l or the depth L, each with the rule: none may train at 1 layer.
DEPTH_RULES = {
    "admin.py": "Admin's ω from a profiling pass over the layers (Liu et al. 2020, Eq. 6)",
    "completep.py": "CompleteP's branch multiplier (L/L_base)^-α (Dey et al. 2025, Table 1)",
    "deepnet.py": "DeepNorm's α and β of N and M (Wang et al. 2022, Table 1)",
    "dsinit.py": "dsinit's α/√l (Zhang, Titov & Sennrich 2019, §3)",
    "layer_norm_scaling.py": "the input norm × 1/√l (Sun et al. 2025, Eq. 8)",
    "layerscale.py": "LayerScale's ε by depth (Touvron et al. 2021, §2.2)",
    "llama_style.py": "GPT-2's output projections × 1/√R, R residual layers (Radford et al. 2019, §2.3)",
    "mitchell.py": "OLMo's 1/√(2dl) output projections (Groeneveld et al. 2024)",
    "mix_ln.py": "Mix-LN's first ⌊αL⌋ Post-LN layers (Li et al. 2025, §4)",
    "tfixup.py": "T-Fixup's (9M)^-1/4 and 0.67·N^-1/4 (Huang et al. 2020, §3)",
}


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
  two = all(n == 2 for n in r["layers"].values())  # the tiny preset's depth; else 1 layer per stack
  assert two or all(n == 1 for n in r["layers"].values()), r["layers"]
  assert two == config_reads_depth(tiny(CONFIG_FILES[NAMES.index(name)])), r["layers"]
  assert two or name not in DEPTH_RULES, (r["layers"], DEPTH_RULES.get(name))
  assert r["mesh"] == {"data": 1, "fsdp": 2} and r["sharded"]  # the [V, D] embedding's D split over 2 devices
  losses = np.asarray(r["losses"])
  assert losses.shape == (20,) and np.all(np.isfinite(losses)), losses
  assert losses.max() < losses[0] + 1.0, losses  # no divergence: nothing climbs far above the loss at the start
  assert r["resumed_from"] == 10 and r["resumed_losses"] == r["losses"][10:]
  assert r["same_params"]


def test_depth_rules_found_from_the_code_are_the_papers():
  """tests.depth_rules finds exactly the papers' depth rules in the model and init code: their configs keep the
  preset's 2 layers, every other config trains at 1 layer per stack (a new depth rule belongs in DEPTH_RULES)."""
  found = {n for n, f in zip(NAMES, CONFIG_FILES, strict=True) if config_reads_depth(tiny(f))}
  assert found == set(DEPTH_RULES), (found - set(DEPTH_RULES), set(DEPTH_RULES) - found)
  for name, path in zip(NAMES, CONFIG_FILES, strict=True):
    mc = tiny(path).model
    assert (mc.num_encoder_layers, mc.num_decoder_layers) == ((None, None) if name in found else (1, 1)), name
