"""Multi-process runs (issue 13): start-up from `config.distributed`, one writer, evaluation and decoding split across
processes and gathered, the SentencePiece model trained once.

The multi-process tests start real JAX processes on 127.0.0.1 (a free port), 2 simulated CPU devices each, CPU
collectives through gloo, bounded in time and killed at teardown (`jax_processes` in tests/conftest.py).
"""

import json
import os
import pathlib
import subprocess
import sys

import ml_collections
import pytest

from configs import default
from train import distributed
from train import metrics as metrics_lib
from train.metrics import read_metrics, read_status

REPO = pathlib.Path(__file__).resolve().parents[1]
WORKER = str(REPO / "tests" / "distributed_worker.py")
# Every variable some cluster environment of JAX is detected by (jax 0.10.2, jax/_src/clusters/).
CLUSTER_VARS = (
    "JAX_COORDINATOR_ADDRESS",
    "SLURM_JOB_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_NTASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "OMPI_MCA_orte_hnp_uri",
    "KUBERNETES_SERVICE_HOST",
    "TPU_WORKER_HOSTNAMES",
    "TPU_PROCESS_ADDRESSES",
)


def dist_config(**values):
  """config.distributed with `values` (a plain copy, so a value of the wrong type reaches the validation)."""
  return ml_collections.ConfigDict({**default.get_config().distributed.to_dict(), **values})


@pytest.fixture
def no_cluster(monkeypatch):
  for var in CLUSTER_VARS:
    monkeypatch.delenv(var, raising=False)
  return monkeypatch


def slurm(monkeypatch, ntasks: int, procid: int):
  for var, value in (
      ("SLURM_JOB_ID", "4242"),
      ("SLURM_STEP_NODELIST", "node[001-004]"),
      ("SLURM_NTASKS", str(ntasks)),
      ("SLURM_PROCID", str(procid)),
      ("SLURM_LOCALID", "0"),
  ):
    monkeypatch.setenv(var, value)


# ------------------------------------------------------------------------------------------------ start-up


@pytest.mark.parametrize(
    "values, match",
    [
        ({"enabled": "yes"}, r"config.distributed.enabled='yes' is invalid; valid: \['auto', 'true', 'false'\]"),
        ({"coordinator_address": "localhost"}, r"config.distributed.coordinator_address='localhost' is invalid"),
        ({"coordinator_address": "h:0"}, r"coordinator_address='h:0' is invalid; valid: '' \(detect\) or 'host:port'"),
        (
            {"num_processes": -1},
            r"config.distributed.num_processes=-1 is invalid; valid: an integer >= 0 \(0: detect\)",
        ),
        ({"process_id": -2}, r"config.distributed.process_id=-2 is invalid; valid: an integer >= -1 \(-1: detect\)"),
        ({"initialization_timeout": 0}, r"config.distributed.initialization_timeout=0 is invalid"),
        ({"num_processes": 2, "process_id": 2}, r"process_id=2 contradicts config.distributed.num_processes=2"),
        ({"enabled": "false", "num_processes": 4}, r"enabled='false' contradicts config.distributed.num_processes=4"),
        (
            {"enabled": "false", "coordinator_address": "h:1"},
            r"enabled='false' contradicts .*coordinator_address='h:1'",
        ),
        ({"enabled": False}, r"config.distributed.enabled=False is invalid; valid: a string"),
    ],
)
def test_bad_values_name_the_key_the_value_and_the_choices(values, match):
  with pytest.raises(ValueError, match=match):
    distributed.validate(dist_config(**values))


def test_unknown_and_missing_keys():
  cfg = dist_config()
  cfg.unlock()
  cfg.port = 1234
  with pytest.raises(ValueError, match=r"config.distributed.port=1234 is invalid \(unknown key\)"):
    distributed.validate(cfg)
  with pytest.raises(ValueError, match=r"config.distributed=None is invalid \(missing\)"):
    distributed.validate(None)


def test_a_single_process_needs_nothing(no_cluster):
  for enabled in ("auto", "false"):
    assert distributed.plan(dist_config(enabled=enabled)) is None
  assert distributed.initialize(dist_config()) is False  # validated (the defaults are valid), nothing started
  slurm(no_cluster, ntasks=1, procid=0)  # a one-task SLURM job: JAX would pin it to one GPU; 'auto' leaves it alone
  assert distributed.detected_cluster().__name__ == "SlurmCluster"
  assert distributed.plan(dist_config()) is None
  assert distributed.plan(dist_config(enabled="true"))["num_processes"] is None  # 'true': JAX's detection decides


def test_auto_follows_the_cluster_jax_detects(no_cluster):
  slurm(no_cluster, ntasks=4, procid=2)
  cluster = distributed.detected_cluster()
  assert (cluster.__name__, cluster.get_process_count(), cluster.get_process_id()) == ("SlurmCluster", 4, 2)
  kwargs = distributed.plan(dist_config(initialization_timeout=77))
  assert kwargs == {
      "coordinator_address": None,
      "num_processes": None,
      "process_id": None,
      "initialization_timeout": 77,
  }
  assert distributed.plan(dist_config(enabled="false")) is None  # 'false' wins over the environment
  # The config overrides what it sets; JAX detects the rest.
  assert distributed.plan(dist_config(coordinator_address="node001:1234"))["coordinator_address"] == "node001:1234"


def test_auto_on_a_tpu_pod_slice(no_cluster):
  """A GKE TPU pod slice of 4 hosts (what `import jax` and the TPU environment variables tell JAX on one)."""
  no_cluster.setattr("jax._src.clusters.cloud_tpu_cluster.running_in_cloud_tpu_vm", True)
  no_cluster.setenv("TPU_SKIP_MDS_QUERY", "1")  # no GCE metadata server here
  no_cluster.setenv("MEGASCALE_NUM_SLICES", "1")
  no_cluster.setenv("MEGASCALE_SLICE_ID", "0")
  no_cluster.setenv("TPU_WORKER_HOSTNAMES", "t0,t1,t2,t3")
  no_cluster.setenv("TPU_WORKER_ID", "3")
  cluster = distributed.detected_cluster()
  assert (cluster.__name__, cluster.get_process_count(), cluster.get_process_id()) == ("GkeTpuCluster", 4, 3)
  assert distributed.plan(dist_config())["process_id"] is None
  no_cluster.setenv("TPU_WORKER_HOSTNAMES", "t0")  # a single-host TPU VM: one process, nothing to start
  assert distributed.plan(dist_config()) is None


def test_explicit_keys_and_the_standard_variable(no_cluster):
  kwargs = distributed.plan(dist_config(coordinator_address="10.0.0.1:1234", num_processes=8, process_id=5))
  assert kwargs == {
      "coordinator_address": "10.0.0.1:1234",
      "num_processes": 8,
      "process_id": 5,
      "initialization_timeout": 300,
  }
  with pytest.raises(
      ValueError, match=r"coordinator_address='' is invalid \(distributed.enabled='auto' starts a run of several"
  ):
    distributed.plan(dist_config(num_processes=2, process_id=0))  # nothing to detect the coordinator from
  with pytest.raises(ValueError, match=r"config.distributed.coordinator_address='' is invalid"):
    distributed.plan(dist_config(enabled="true"))
  no_cluster.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:1234")  # read by JAX itself
  with pytest.raises(
      ValueError, match=r"config.distributed.num_processes=0 is invalid .*\(JAX_COORDINATOR_ADDRESS is set\)"
  ):
    distributed.plan(dist_config())
  assert distributed.plan(dist_config(num_processes=2, process_id=1))["coordinator_address"] is None


# ------------------------------------------------------------------------------------------------ one writer


def test_only_process_0_writes_files(tmp_path):
  """A non-primary process checks its records like process 0 and writes nothing (not even the workdir); process 0,
  the default of a single process, writes. (In a 2-process run on one disk both writers' files can look like one:
  the second writer's resume rewrite unlinks the first one's metrics.jsonl; so this is checked here.)"""
  other, primary = tmp_path / "other", tmp_path / "primary"
  for workdir, flag in ((other, False), (primary, None)):
    writer = metrics_lib.MetricWriter(str(workdir), resume_step=0, primary=flag)
    writer.write_scalars(1, {"loss": 2.5})
    with pytest.raises(ValueError, match="reserved"):
      writer.write_scalars(2, {"step": 1.0})
    writer.close()
    record = metrics_lib.write_status(str(workdir), "running", 1, primary=flag, loss=2.5)
    assert (record["status"], record["step"], record["loss"]) == ("running", 1, 2.5)
  assert not other.exists()
  assert [(r["step"], r["loss"]) for r in read_metrics(str(primary))] == [(1, 2.5)]
  assert read_status(str(primary))["step"] == 1 and len(list((primary / "tensorboard" / "train").iterdir())) == 1


# ------------------------------------------------------------------------------------------------ multi-process

TINY = [
    "--config=configs/default.py",
    "--config.model.preset=tiny",
    "--config.model.num_encoder_layers=1",  # one layer each: what is compared does not depend on depth
    "--config.model.num_decoder_layers=1",
    "--config.data.embedded.num_train=300",
    "--config.data.embedded.num_eval=16",
    "--config.data.batch_size=8",
    "--config.data.eval_batch_size=8",
    "--config.train.num_decode_examples=12",
    "--config.train.num_steps=20",
    "--config.train.log_every=1",
    "--config.train.eval_every=10",
    "--config.train.checkpoint_every=20",
    "--config.optim.warmup_steps=5",
    "--config.optim.learning_rate=5e-3",
]


# The analysis at init before training (main.py in train mode with analysis.at_init): the reference run and the FSDP
# run both do it, so one 2-process job tests training and analysis across processes.
AT_INIT = [
    "--config.analysis.at_init=true",
    "--config.analysis.batch_size=8",
    "--config.analysis.lanczos_steps=10",
    "--config.analysis.top_k=1",
    "--config.analysis.bottom_k=0",
    "--config.analysis.spectrum=false",
    "--config.analysis.blocks=false",
    "--config.analysis.trace_probes=0",
]


def _ok(results):
  for r in results:
    assert r.returncode == 0, f"process {r.process_id} (returncode {r.returncode}):\n{r.output[-4000:]}"


def _one_process(workdir: pathlib.Path, extra: list) -> pathlib.Path:
  """main.py with `TINY + extra` as 1 process × 4 simulated devices (data parallelism): the reference of the
  two-process runs, bounded to 300 s."""
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": " ".join([*flags, "--xla_force_host_platform_device_count=4"])}  # fmt: skip
  argv = [sys.executable, "main.py", *TINY, *extra, f"--workdir={workdir}"]
  proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
  return workdir


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
  """The 1-process reference of TINY's training with its analysis at init, shared by the data-parallel and the FSDP
  test (the analysis at init changes no training number: the losses with and without it are the same bits)."""
  return _one_process(tmp_path_factory.mktemp("one") / "run", AT_INIT)


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_four_devices(tmp_path, jax_processes, one_process):
  """2 processes x 2 CPU devices through main.py == 1 process x 4 devices through main.py (the global batches do not
  depend on the process count, train/data/pipeline.py): the 20 train losses and the evals to 1e-6 relative; metrics.jsonl, TensorBoard, status.json and config.json written once (by
  process 0); every process logs."""
  two = tmp_path / "two"
  job = jax_processes(
      lambda i, address: [
          sys.executable,
          "main.py",
          *TINY,
          f"--workdir={two}",
          f"--config.distributed.coordinator_address={address}",
          "--config.distributed.num_processes=2",
          f"--config.distributed.process_id={i}",
      ]
  )
  results = job.wait(timeout=300)
  _ok(results)
  one = one_process  # the reference: the same command as one process with 4 devices

  train_two, train_one = read_metrics(str(two), split="train"), read_metrics(str(one), split="train")
  assert [r["step"] for r in train_two] == list(range(1, 21))  # one record per logged step, not one per process
  assert [r["step"] for r in train_one] == list(range(1, 21))
  losses_two, losses_one = [r["loss"] for r in train_two], [r["loss"] for r in train_one]
  assert losses_two == pytest.approx(losses_one, rel=1e-6, abs=0)
  assert losses_two[-1] < 0.85 * losses_two[0]  # it trained: the comparison is not of 20 equal numbers
  evals_two, evals_one = read_metrics(str(two), split="eval"), read_metrics(str(one), split="eval")
  assert [r["step"] for r in evals_two] == [r["step"] for r in evals_one] == [10, 20]
  for a, b in zip(evals_two, evals_one):
    assert set(a) == set(b) == {"step", "split", "loss", "accuracy", "perplexity", "bleu", "bleu_lc", "exact_match"}
    for key in ("loss", "accuracy", "perplexity", "bleu", "bleu_lc", "exact_match"):
      assert a[key] == pytest.approx(b[key], rel=1e-6, abs=0), key
  for split in ("train", "eval"):
    assert len(list((two / "tensorboard" / split).iterdir())) == 1, split  # one event file: process 0's
  status = read_status(str(two))
  assert (status["status"], status["step"]) == ("finished", 20)
  assert json.loads((two / "config.json").read_text())["distributed"]["num_processes"] == 2
  for r in results:  # every process logs its progress and the evals
    assert "step 20/20" in r.output and "eval at step 20" in r.output, r.process_id
    assert f"process {r.process_id} of 2" in r.output


@pytest.mark.slow
def test_tokenizer_trained_once_and_decoding_gathered(tmp_path, jax_processes):
  """2 processes with a tokenizer cache each (hosts without a shared disk): process 0 alone reads the corpus and
  writes the model, process 1 gets the same model; decoding 11 examples (global batches of 8 + 3) split across the
  processes gives every hypothesis, in order, on both (a "decoder" that copies its input makes hypothesis = source)."""
  job = jax_processes(
      lambda i, address: [
          sys.executable,
          WORKER,
          "--task=checks",
          f"--address={address}",
          f"--process_id={i}",
          "--num_processes=2",
          f"--out={tmp_path}",
      ]
  )
  _ok(job.wait(timeout=240))
  p0, p1 = (json.loads((tmp_path / f"process_{i}.json").read_text()) for i in range(2))
  assert [(p["process_index"], p["process_count"]) for p in (p0, p1)] == [(0, 2), (1, 2)]
  assert (p0["corpus_reads"], p1["corpus_reads"]) == (1, 0)
  assert (p0["cache_files"], p1["cache_files"]) == (["spm_k.model"], [])
  assert p1["path"] == p0["path"] == str(tmp_path / "cache_0" / "spm_k.model")
  assert p0["vocab_size"] == p1["vocab_size"] > 3 and p0["ids"] == p1["ids"] and len(p0["ids"]) >= 4
  assert len(p0["sources"]) == 11 and len(set(p0["sources"])) == 11
  for p in (p0, p1):
    assert p["hypotheses"] == p["sources"] == p0["sources"]


def _fsdp(tmp_path, jax_processes, extra: list) -> pathlib.Path:
  """Runs main.py with `TINY + extra` as 2 processes × 2 devices under FSDP 1 × 4; returns its workdir (bounded to
  400 s)."""
  fsdp = tmp_path / "fsdp"
  job = jax_processes(
      lambda i, address: [
          sys.executable,
          "main.py",
          *TINY,
          *extra,
          "--config.mesh.fsdp=4",
          f"--workdir={fsdp}",
          f"--config.distributed.coordinator_address={address}",
          "--config.distributed.num_processes=2",
          f"--config.distributed.process_id={i}",
      ]
  )
  _ok(job.wait(timeout=400))
  return fsdp


@pytest.mark.slow
def test_fsdp_across_two_processes_trains_evaluates_decodes_and_analyzes_like_one_process(
    tmp_path, jax_processes, one_process
):
  """FSDP over the devices of two processes (mesh 1 × 4: every parameter and Adam moment split across hosts) gives
  the losses and the evaluation (BLEU of the gathered greedy decodes included) of one process with four devices in
  plain data parallelism, to 1e-5 relative; its analysis at init, with parameters and batch rows split over the two
  processes, gives the top Hessian eigenvalue, the gradient norms and the signal profile of the one process (float64).
  Lanczos prints no progress across processes (a host callback in a program spanning processes hangs)."""
  fsdp, one = _fsdp(tmp_path, jax_processes, AT_INIT), one_process
  losses = {p: [r["loss"] for r in read_metrics(str(p), split="train")] for p in (fsdp, one)}
  assert len(losses[fsdp]) == 20 and losses[fsdp] == pytest.approx(losses[one], rel=1e-5, abs=0)
  assert json.loads((fsdp / "config.json").read_text())["mesh"]["fsdp"] == 4
  evals = [read_metrics(str(p), split="eval") for p in (fsdp, one)]
  assert [r["step"] for r in evals[0]] == [10, 20]
  for a, b in zip(*evals):
    for key in ("loss", "accuracy", "bleu", "exact_match"):
      assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-9), key
  step_0 = {p: p / "analysis" / "step_0" for p in (fsdp, one)}
  top = {p: json.loads((d / "eigenvalues.json").read_text())["top"]["values"][0] for p, d in step_0.items()}
  assert top[fsdp] == pytest.approx(top[one], rel=1e-8)
  meta = json.loads((step_0[fsdp] / "metadata.json").read_text())
  assert meta["dtype"] == "float64" and "4 devices" in meta["sharding"]
  norms = {p: json.loads((d / "grad_norms.json").read_text())["per_pair"][0]["records"] for p, d in step_0.items()}
  assert [r["path"] for r in norms[fsdp]] == [r["path"] for r in norms[one]]
  for a, b in zip(norms[fsdp], norms[one]):
    assert a["norm"] == pytest.approx(b["norm"], rel=1e-8, abs=1e-12), a["path"]
  signal = {p: json.loads((d / "signal.json").read_text())[0]["records"] for p, d in step_0.items()}
  assert norms[one] and signal[one] and len(signal[fsdp]) == len(signal[one])
  for a, b in zip(signal[fsdp], signal[one]):
    for key in ("second_moment_out", "x0_coefficient"):
      if key in b:
        assert a[key] == pytest.approx(b[key], rel=1e-8), (a["stack"], a["layer"], a["sublayer"], key)
