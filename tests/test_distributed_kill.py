"""A 2-process run survives losing a process (issue 13): process 1 of `main.py` (2 processes x 2 CPU devices) is
killed with SIGKILL after a checkpoint is on disk; process 0, left waiting in a collective, is killed a few seconds
later (JAX's coordinator would notice the missing heartbeats only after about a minute); rerunning both processes
resumes from the last checkpoint, and the final checkpoint's arrays and metrics.jsonl equal those of an
uninterrupted 2-process run bit for bit, with one record per logged step.

The processes run on 127.0.0.1 with a free port per run, bounded in time, and are killed and reaped at teardown
(`jax_processes` in tests/conftest.py).
"""

import signal
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from train import metrics as metrics_lib
from train.metrics import read_metrics, read_status

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

NUM_STEPS, CHECKPOINT_EVERY = 30, 5
TINY = [
    "--config=configs/xavier_postln.py",
    "--config.model.preset=tiny",
    "--config.model.arch=decoder",  # one decoder layer: the test's time goes to compiling, and this compiles fastest
    "--config.model.num_decoder_layers=1",
    "--config.model.dropout_rate=0.1",  # the rng key must resume too
    "--config.data.embedded.num_train=300",
    "--config.data.embedded.num_eval=16",
    "--config.data.batch_size=8",
    "--config.data.eval_batch_size=8",
    "--config.train.num_decode_examples=0",
    f"--config.train.num_steps={NUM_STEPS}",
    "--config.train.log_every=1",
    "--config.train.eval_every=1000",  # evaluated once, at the end
    f"--config.train.checkpoint_every={CHECKPOINT_EVERY}",
]
TIMEOUT = 240  # seconds for one 2-process run (about 35 s alone on 2 CPU cores, most of it start-up and compiling)
GRACE = 5  # seconds the survivor of the kill may take to die before it is killed


def start(jax_processes, workdir):
  return jax_processes(
      lambda i, address: [
          sys.executable,
          "main.py",
          *TINY,
          f"--workdir={workdir}",
          f"--config.distributed.coordinator_address={address}",
          "--config.distributed.num_processes=2",
          f"--config.distributed.process_id={i}",
          "--config.distributed.initialization_timeout=60",
      ]
  )


def checkpoint_steps(workdir) -> list[int]:
  """Finalized checkpoints, read from the folder names (orbax renames a complete checkpoint to `<step>`); no
  CheckpointManager here: opening one deletes the temporary folder of a save in progress."""
  folder = workdir / "checkpoints"
  return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []


def last_logged_step(workdir) -> int:
  return max((r["step"] for r in read_metrics(str(workdir), split="train")), default=0)


def final_arrays(workdir):
  """The arrays of checkpoint NUM_STEPS of `workdir` as numpy arrays (typed keys as key data), restored onto this
  process's one device (the saved shardings name the 4 devices of the 2-process run)."""
  path = workdir / "checkpoints" / str(NUM_STEPS) / "state"
  checkpointer = ocp.StandardCheckpointer()
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  target = jax.tree.map(
      lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), checkpointer.metadata(path).item_metadata.tree
  )
  tree = checkpointer.restore(path, target)
  keys = lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x  # noqa: E731
  return jax.tree.map(lambda x: np.asarray(keys(x)), tree)


def _ok(results):
  for r in results:
    assert r.returncode == 0, f"process {r.process_id} (returncode {r.returncode}):\n{r.output[-4000:]}"


def test_sigkill_of_one_process_and_the_rerun_equals_an_uninterrupted_run(tmp_path, jax_processes):
  straight_dir, killed_dir = tmp_path / "straight", tmp_path / "killed"
  straight = start(jax_processes, straight_dir)  # beside the killed run: the two share the start-up time
  killed = start(jax_processes, killed_dir)
  deadline = time.monotonic() + TIMEOUT
  # Mid-run: a checkpoint on disk and a step logged after it.
  while not ((steps := checkpoint_steps(killed_dir)) and last_logged_step(killed_dir) > steps[-1]):
    assert all(p.poll() is None for p in killed.procs), killed.wait(timeout=1, grace=0)
    assert time.monotonic() < deadline, "no checkpoint before the timeout"
    time.sleep(0.02)
  killed.kill(1, signal.SIGKILL)
  killed_at = time.monotonic()
  results = killed.wait(timeout=GRACE + 10, grace=GRACE)
  assert time.monotonic() - killed_at < GRACE + 5  # the survivor is gone within the grace period
  assert results[1].returncode == -signal.SIGKILL
  assert results[0].returncode != 0  # it never finishes alone (None: killed after the grace period)
  on_disk, logged = checkpoint_steps(killed_dir), last_logged_step(killed_dir)
  assert 1 <= len(on_disk) and on_disk[-1] < NUM_STEPS and logged < NUM_STEPS, (on_disk, logged)
  assert read_status(str(killed_dir))["status"] == "running"

  rerun = start(jax_processes, killed_dir)
  _ok(rerun.wait(timeout=TIMEOUT))
  _ok(straight.wait(timeout=TIMEOUT))
  for r in rerun.wait(timeout=1):  # every process resumed from the newest checkpoint on disk at the kill
    assert f"from step {on_disk[-1]}" in r.output, r.output[-4000:]

  assert read_status(str(killed_dir))["status"] == "finished"
  records = read_metrics(str(killed_dir))
  assert [r["step"] for r in records if r["split"] == "train"] == list(range(1, NUM_STEPS + 1))
  assert [r["step"] for r in records if r["split"] == "eval"] == [NUM_STEPS]
  assert records == read_metrics(str(straight_dir))  # the same values, bit for bit
  assert checkpoint_steps(killed_dir)[-1] == checkpoint_steps(straight_dir)[-1] == NUM_STEPS
  a, b = final_arrays(straight_dir), final_arrays(killed_dir)
  assert jax.tree.structure(a) == jax.tree.structure(b) and len(jax.tree.leaves(a)) > 10
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(x, y)
  assert (killed_dir / metrics_lib.METRICS_FILE).read_text().endswith("\n")
