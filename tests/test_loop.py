"""End-to-end tests of the training job (train/loop.py): learning on the embedded task, Multi30k, bitwise resume,
divergence, data parallelism on 8 simulated devices, and clear errors for bad configs and data paths."""

import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import tiny
from train import evaluation, loop
from train import metrics as metrics_lib
from train.loss import make_loss_fn
from train.metrics import read_metrics, read_status

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_embedded_task_learns(tmp_path):
  """200 steps: validation loss below half its initial value, exact match above zero."""
  config = tiny.run_config()
  exp = loop.setup(config, str(tmp_path))
  eval_step = jax.jit(loop.step_lib.make_eval_step(exp.model))
  initial = evaluation.evaluate(exp, eval_step, None, exp.state.model_variables())["loss"]
  assert abs(initial - np.log(exp.data.tokenizer.vocab_size)) < 0.5 * np.log(exp.data.tokenizer.vocab_size)
  loop.train_and_evaluate(exp)
  evals = read_metrics(str(tmp_path), split="eval")
  final = evals[-1]
  assert final["step"] == 200
  assert final["loss"] < 0.5 * initial, (initial, final)
  assert final["exact_match"] > 0.0, final
  # A hypothesis equal to its reference contributes matched n-grams of every order, so corpus BLEU is positive;
  # BLEU's value against hand and independent computations is tested in tests/test_decode.py.
  assert 0.0 < final["bleu"] <= 100.0 and final["perplexity"] == pytest.approx(np.exp(final["loss"]), rel=1e-6)
  assert read_status(str(tmp_path))["status"] == "finished"
  train_records = read_metrics(str(tmp_path), split="train")
  assert [r["step"] for r in train_records] == [50, 100, 150, 200]
  assert (tmp_path / "tensorboard").is_dir()


def test_resume_is_bitwise(tmp_path):
  """10 steps, stop, 10 more == 20 uninterrupted: params, optimizer state, step and data position (the resumed half
  past the 5-step warmup, with dropout and the scheduled residual α)."""

  def run(workdir, num_steps):
    config = tiny.run_config(
        **{
            "train.num_steps": num_steps,
            "train.checkpoint_every": 10,
            "train.eval_every": 1000,
            "optim.warmup_steps": 5,
            "train.num_decode_examples": 0,
            "model.residual": "scheduled",
            "model.norm_position": "none",
            "model.norm_type": "none",
            "model.alpha_step": 0.01,
            "model.dropout_rate": 0.1,
        }
    )
    return loop.train_and_evaluate(loop.setup(config, str(workdir)))

  straight = run(tmp_path / "a", 20)
  run(tmp_path / "b", 10)
  resumed = run(tmp_path / "b", 20)
  assert int(resumed.step) == int(straight.step) == 20
  for a, b in zip(
      jax.tree.leaves((straight.params, straight.opt_state, straight.variables)),
      jax.tree.leaves((resumed.params, resumed.opt_state, resumed.variables)),
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  alphas = jax.tree.leaves(resumed.variables["residual_alpha"])
  np.testing.assert_allclose(alphas, 0.2, rtol=1e-5)  # 20 updates of 0.01


def test_multi30k_few_steps_and_loss_at_init(tmp_path, multi30k_copy):
  """Real sentences (a copy of the shared folder: the tokenizer is cached next to the data when it can be, and
  never in the shared folder): loss at init within 10% of ln(vocab) for BERT's small init; a few steps decrease it."""
  config = tiny.run_config(
      **{
          "data.name": "multi30k",
          "data.dir": str(multi30k_copy),
          "data.vocab_size": 1000,
          "train.num_steps": 30,
          "train.log_every": 10,
          "train.eval_every": 1000,
          "train.num_decode_examples": 0,
          "init.scheme": "bert",
          "model.norm_position": "post",
          "optim.learning_rate": 1e-3,
          "optim.warmup_steps": 5,
      }
  )
  exp = loop.setup(config, str(tmp_path))
  loss_fn = jax.jit(make_loss_fn(exp.model, variables=exp.state.variables))
  batch = jax.tree.map(jnp.asarray, exp.batches(1)[0])
  loss0 = float(loss_fn(exp.state.params, batch))
  assert abs(loss0 - np.log(1000)) < 0.1 * np.log(1000), loss0
  loop.train_and_evaluate(exp)
  losses = [r["loss"] for r in read_metrics(str(tmp_path), split="train")]
  assert all(np.isfinite(losses)) and losses[-1] < losses[0] < loss0 + 0.5, losses


def test_divergence_is_clean(tmp_path):
  """A config built to diverge: status.json says diverged, a checkpoint from before it stays, exit code 3,
  no traceback."""
  workdir = tmp_path / "div"
  args = [
      sys.executable,
      "main.py",
      "--config=configs/xavier_postln.py",
      f"--workdir={workdir}",
      "--config.model.preset=tiny",
      "--config.model.num_encoder_layers=1",
      "--config.model.num_decoder_layers=1",
      "--config.optim.name=sgd",
      "--config.optim.learning_rate=1e12",
      "--config.optim.schedule=constant",
      "--config.optim.warmup_steps=0",
      "--config.train.num_steps=50",
      "--config.train.checkpoint_every=1",
      "--config.train.log_every=1",
      "--config.train.num_decode_examples=0",
      "--config.data.embedded.num_train=500",
      "--config.data.embedded.num_eval=32",
      "--config.data.batch_size=8",
      "--config.data.eval_batch_size=8",
  ]
  proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 3, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  status = json.loads((workdir / "status.json").read_text())
  assert status["status"] == "diverged" and status["nonfinite_params"], status
  assert status["last_checkpoint"] is not None and status["last_checkpoint"] < status["step"]
  assert (workdir / "checkpoints" / str(status["last_checkpoint"])).is_dir()
  # A rerun of this workdir with another trained config fails before any compute: one line naming what differs, exit
  # status 2 (train.cli.EXIT_CONFIG), the run's files untouched; so does a bad value, naming the valid choices.
  before = (workdir / "status.json").read_text()
  for extra, message in (
      ["--config.model.d_model=96"],
      r"^main\.py: --workdir=.*config\.json was trained with another config \(model\.d_model: None -> 96\)",
  ), (["--config.model.norm_position=middle"], r"^main\.py: config\.model\.norm_position='middle' is invalid; valid: "):
    rerun = subprocess.run(args + extra, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 2, rerun.stderr[-3000:]
    last = rerun.stderr.strip().splitlines()[-1]
    assert re.match(message, last), last
    assert "Traceback" not in rerun.stderr
  assert (workdir / "status.json").read_text() == before


def test_eight_devices_match_one(tmp_path):
  """On 8 simulated CPU devices the loss and gradients of one step match 1 device within 1e-5."""
  script = REPO / "tests" / "scripts" / "data_parallel_step.py"
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"  # keeps the suite's flags
  env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
  proc = subprocess.run(
      [sys.executable, str(script), str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["num_devices"] == 8
  assert result["loss_diff"] < 1e-5 and result["grad_rel_diff"] < 1e-5, result


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("optim.name", "adamm", r"optim.name"),
        ("optim.warmup_steps", -1, r"optim.warmup_steps"),
        ("init.scheme", "kaiming", r"kaiming"),
        ("model.norm_position", "middle", r"model.norm_position='middle'"),
        ("train.num_steps", -5, r"train.num_steps=-5"),
        ("data.name", "wmt", r"wmt"),
    ],
)
def test_bad_config_values_fail_before_compute(tmp_path, key, value, match):
  with pytest.raises(ValueError, match=match):
    loop.setup(tiny.run_config(**{key: value}), str(tmp_path))


def test_bad_data_paths(tmp_path):
  with pytest.raises((ValueError, FileNotFoundError), match="data.dir"):
    loop.setup(tiny.run_config(**{"data.name": "multi30k", "data.dir": str(tmp_path / "nope")}), str(tmp_path))
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises((ValueError, FileNotFoundError), match="train"):
    loop.setup(tiny.run_config(**{"data.name": "multi30k", "data.dir": str(empty)}), str(tmp_path))


def test_quick_start_log_is_quiet_and_ends_with_the_summary(tmp_path):
  """At the default verbosity the log has the project's lines only (no orbax internals), and ends with the summary;
  `--verbosity=1` brings the libraries' lines back."""
  workdir = tmp_path / "quick"
  args = [
      sys.executable,
      "main.py",
      "--config=configs/t5_init.py",
      f"--workdir={workdir}",
      "--config.model.preset=tiny",
      "--config.model.num_encoder_layers=1",
      "--config.model.num_decoder_layers=1",
      "--config.train.num_steps=4",
      "--config.train.log_every=2",
      "--config.train.eval_every=2",
      "--config.train.checkpoint_every=2",
      "--config.train.num_decode_examples=8",
      "--config.data.embedded.num_train=300",
      "--config.data.embedded.num_eval=16",
      "--config.data.batch_size=8",
      "--config.data.eval_batch_size=8",
  ]
  proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stderr.strip().splitlines()
  sources = {m.group(1) for m in (re.match(r"[IWEF]\d{4} [\d:.]+ +\d+ ([\w.]+):\d+\]", l) for l in lines) if m}
  assert sources <= {"main.py", "metrics.py", "loop.py"}, sources  # the project's files only
  assert not any("orbax" in l or "checkpoint_manager" in l for l in lines)
  assert "Finished at step 4." in lines[-5] and lines[-2].strip().startswith("curves:  tensorboard --logdir"), lines
  assert read_status(str(workdir))["status"] == "finished"
  verbose = subprocess.run([*args, "--verbosity=1"], cwd=REPO, capture_output=True, text=True, timeout=600)
  assert verbose.returncode == 0 and "checkpoint_manager.py" in verbose.stderr


def test_status_json_carries_step_loss_and_eta_while_running(tmp_path, monkeypatch):
  records = []
  original = metrics_lib.write_status
  monkeypatch.setattr(metrics_lib, "write_status", lambda *a, **k: records.append(original(*a, **k)) or records[-1])
  config = tiny.run_config(
      **{
          "train.num_steps": 6,
          "train.log_every": 2,
          "train.eval_every": 6,
          "train.checkpoint_every": 6,
          "train.num_decode_examples": 0,
      }
  )
  exp = loop.setup(config, str(tmp_path))
  loop.train_and_evaluate(exp)
  running = [r for r in records if r["status"] == "running" and r["step"] > 0]
  assert [r["step"] for r in running] == [2, 4, 6]
  for r in running:
    assert np.isfinite(r["loss"]) and r["total_steps"] == 6 and "eta_seconds" in r
  assert running[-1]["eta_seconds"] == 0.0 and running[-1]["steps_per_sec"] > 0
  assert records[-1]["status"] == "finished" and np.isfinite(records[-1]["eval_loss"])


def test_mlm_masked_packed_translation_batch_equals_separate_sequences():
  """The encoder's MLM batch is built from the text in `targets` with the targets' packing keys (train.step
  .mlm_masked): a packed row of two target sentences gives each sentence the logits it gets alone, although the
  packed source `inputs` (not the encoder's) are segmented differently."""
  from models import get_model
  from train.step import mlm_masked

  config = tiny.model_config(vocab_size=11, arch="encoder", scale_embeddings=True, max_len=256)
  model = get_model(config)
  packed = {
      "inputs": jnp.asarray([[5, 6, 7, 8, 9, 10]], jnp.int32),
      "inputs_segmentation": jnp.asarray([[1, 1, 2, 2, 2, 2]], jnp.int32),
      "inputs_position": jnp.asarray([[0, 1, 0, 1, 2, 3]], jnp.int32),
      "targets": jnp.asarray([[3, 4, 5, 6, 7, 0]], jnp.int32),
      "targets_segmentation": jnp.asarray([[1, 1, 1, 2, 2, 0]], jnp.int32),
      "targets_position": jnp.asarray([[0, 1, 2, 0, 1, 0]], jnp.int32),
  }
  masked = mlm_masked(config, packed, jax.random.key(0), mask_rate=0.5)
  assert set(masked) == {"inputs", "targets", "inputs_segmentation", "inputs_position"}
  np.testing.assert_array_equal(masked["inputs_segmentation"], packed["targets_segmentation"])
  np.testing.assert_array_equal(masked["inputs_position"], packed["targets_position"])
  keep = np.asarray(masked["targets"]) == 0
  np.testing.assert_array_equal(np.asarray(masked["inputs"])[keep], np.asarray(packed["targets"])[keep])
  variables = model.init(jax.random.key(1), masked)
  logits = model.apply(variables, masked)
  for segment in (slice(0, 3), slice(3, 5)):
    alone = model.apply(variables, {"inputs": masked["inputs"][:, segment]})
    np.testing.assert_allclose(logits[:, segment], alone, rtol=1e-5, atol=1e-5)
