"""The command line: `main.py --config.mode=analyze` at init and on a chosen checkpoint of a trained workdir."""

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

REPO = pathlib.Path(__file__).resolve().parents[1]
TINY = [
    "--config.model.preset=tiny",
    "--config.model.num_encoder_layers=1",  # one layer each: the files and keys tested do not depend on depth
    "--config.model.num_decoder_layers=1",
    "--config.data.embedded.num_train=300",
    "--config.data.embedded.num_eval=16",
    "--config.data.batch_size=8",
    "--config.data.eval_batch_size=8",
    "--config.train.num_decode_examples=0",
]
ANALYSIS = [
    "--config.analysis.batch_size=4",
    "--config.analysis.lanczos_steps=12",
    "--config.analysis.top_k=2",
    "--config.analysis.bottom_k=1",
    "--config.analysis.num_probes=2",
    "--config.analysis.trace_probes=8",
    "--config.analysis.blocks=False",
    "--config.analysis.dtype=float32",
]


def run(*args):
  proc = subprocess.run([sys.executable, "main.py", *args], cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def test_analyze_at_init_and_on_a_checkpoint(tmp_path):
  workdir = tmp_path / "run"
  common = ["--config=configs/xavier_postln.py", f"--workdir={workdir}", *TINY]
  run(*common, "--config.mode=analyze", "--config.analysis.grad_norm_seeds=2", *ANALYSIS)
  init_dir = workdir / "analysis" / "step_0"
  meta = json.loads((init_dir / "metadata.json").read_text())
  assert meta["dtype"] == "float32" and meta["step"] == 0 and meta["at_init"] is True
  assert meta["batches"].startswith("train split") and "shuffle_seed=0" in meta["batches"]
  grads = json.loads((init_dir / "grad_norms.json").read_text())
  assert len(grads["per_pair"]) == 2 and all(r["count"] == 2 for r in grads["aggregate"])  # 2 init seeds x 1 batch
  for name in (
      "eigenvalues.json",
      "spectrum.json",
      "trace.json",
      "grad_norms.json",
      "signal.json",
      "eigenvalues.png",
      "spectrum.png",
      "grad_norms.png",
      "signal.png",
  ):
    assert (init_dir / name).stat().st_size > 0, name
  top_init = json.loads((init_dir / "eigenvalues.json").read_text())

  run(*common, "--config.train.num_steps=4", "--config.train.checkpoint_every=2", "--config.train.eval_every=4")
  only_top = [  # the checkpoint's top eigenvalues are what this part checks
      "--config.analysis.bottom_k=0",
      "--config.analysis.spectrum=False",
      "--config.analysis.trace_probes=0",
      "--config.analysis.grad_norms=False",
      "--config.analysis.signal=False",
  ]
  run(*common, "--config.mode=analyze", "--config.analysis.checkpoint_step=2", *ANALYSIS, *only_top)
  top_trained = json.loads((workdir / "analysis" / "step_2" / "eigenvalues.json").read_text())
  meta = json.loads((workdir / "analysis" / "step_2" / "metadata.json").read_text())
  assert meta["step"] == 2 and meta["at_init"] is False
  assert top_trained != top_init  # the checkpoint's parameters, not the init's


# Runs main.py in this interpreter with counters around the optimizer section's two checks (its own, in
# `OptimConfig.__post_init__`, and the decay horizon), then prints the counts and the learning rate handed to
# `scale_by_peak_lr` (whose state, `PeakLRState`, holds it).
COUNTING = """
import collections, json, runpy, sys
import train.optim as optim
import train.optim_config as optim_config
counts = collections.Counter()
values, horizon, peak = optim_config._check_optim_values, optim_config.check_horizon, optim.scale_by_peak_lr
def counted(name, fn):
  def wrapped(*a, **k):
    counts[name] += 1
    return fn(*a, **k)
  return wrapped
optim_config._check_optim_values = counted("section", values)
optim_config.check_horizon = counted("horizon", horizon)
def peak_lr(lr, *a, **k):
  counts["peak"] += 1
  counts["peak_lr"] = lr
  return peak(lr, *a, **k)
optim.scale_by_peak_lr = peak_lr
sys.argv = ["main.py", *sys.argv[1:]]
try:
  runpy.run_path("main.py", run_name="__main__")
finally:
  print("COUNTS " + json.dumps(counts))
"""


def test_the_optimizer_section_is_validated_once_from_main_py_to_the_schedule(tmp_path):
  """`optim.learning_rate` from the command line to `PeakLRState`: `train.config.resolve` (main.py) types and checks
  the optimizer section once; `train.loop.setup`, `make_optimizer` and `make_schedule` trust the typed section."""
  args = [f"--workdir={tmp_path}", *TINY, "--config.train.num_steps=2", "--config.optim.learning_rate=0.003"]
  args += ["--config.optim.schedule=warmup_cosine", "--config.optim.warmup_steps=1", "--config.train.eval_every=2"]
  proc = subprocess.run([sys.executable, "-c", COUNTING, *args], cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  counts = json.loads(proc.stdout.split("COUNTS ", 1)[1])
  assert counts == {"section": 1, "horizon": 1, "peak": 1, "peak_lr": 0.003}
  config = json.loads((tmp_path / "config.json").read_text())
  assert config["optim"]["learning_rate"] == 0.003 and config["optim"]["schedule"] == "warmup_cosine"
