"""Test-wide setup. Tests run on the CPU; XLA's backend optimizations are turned down because the suite compiles
many tiny programs whose run time is negligible next to their compile time (benchmarks do not use this).
`jax_processes` starts the processes of a multi-process JAX run on this machine, bounded in time and cleaned up.

Compiled programs are dropped (`jax.clear_caches()`) after every test module, and after any test that leaves the
process with more than `MAX_MAPPINGS` memory mappings: every XLA:CPU executable holds ~9 mappings for its code, JAX
keeps every executable it compiled, and the suite compiles thousands in one process, so without this it passed Linux's
default `vm.max_map_count` (65530) two thirds of the way through and XLA's next compile died of a segmentation fault
(measured: 17k mappings four minutes in).

The session's processes (pytest-xdist's workers, the subprocesses of multi-process tests) share one persistent
compilation cache, so a program another test already compiled is read back rather than compiled again. Measured on
six files (427 tests, 2 idle cores): 340 s one after another, 304 s with the cache, 228 s on two workers, 183 s on two
workers with the cache. A cache hit still counts as a compile in JAX's `backend_compile_duration` event, so
tests/test_compile_once.py's counts are unchanged by it."""

import atexit
import contextlib
import dataclasses
import gc
import importlib.metadata
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Optional

import pytest


def _suite_xla_flags() -> str:
  """`--xla_backend_optimization_level=0`, and from jaxlib 0.10 (where they were measured; an XLA that does not know
  a flag aborts at start-up) `--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1`: XLA:CPU
  then emits its fusions with the elemental IR emitters rather than the MLIR fusion emitters, whose per-fusion
  pipeline is most of the compile time of the suite's small programs, and generates code as one LLVM module rather
  than several (less work in all; the split only spreads it over cores, which the suite's workers already use).
  Measured (jaxlib 0.10.2, 2 cores shared with a training job, CPU seconds of compilation): a Lanczos program on a
  30×30 matrix 0.67 s by default, 0.24 without the fusion emitters, 0.16 with one module too; the FSDP train step of
  the tiny model 3.42, 2.58, 2.35. Programs that run long (none here) are what the defaults are for."""
  flags = ["--xla_backend_optimization_level=0"]
  try:
    version = tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2])
  except (importlib.metadata.PackageNotFoundError, ValueError):
    version = (0, 0)
  if version >= (0, 10):
    flags += ["--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1"]
  return " ".join(flags)


os.environ.setdefault("XLA_FLAGS", _suite_xla_flags())  # subprocesses with more devices: `xla_flags`
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _share_compiled_programs() -> None:
  """Points JAX's persistent compilation cache at a folder of this test session (see the module docstring), unless
  the caller chose one (`JAX_COMPILATION_CACHE_DIR`, e.g. to keep it across sessions). Set in the environment, so the
  pytest-xdist workers and the multi-process tests' subprocesses, started later, share it; removed at exit by the
  process that made it."""
  if "JAX_COMPILATION_CACHE_DIR" in os.environ:
    return
  folder = tempfile.mkdtemp(prefix="jax-compilation-cache-")
  atexit.register(shutil.rmtree, folder, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # the suite's programs compile in ms
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


_share_compiled_programs()

# The slowest files, slowest first (pytest --durations, summed per file, on 2 cores): pytest-xdist's loadfile
# scheduling hands files out in collection order, so starting the long ones first keeps one of them from starting
# last and running alone at the end (longest-processing-time-first). The other files follow in their usual order.
SLOW_FILES_FIRST = (
    "test_config_training.py",
    "test_depth_coord_check.py",
    "test_loop.py",
    "test_compile_once.py",
    "test_analysis_run.py",
    "test_sweep.py",
    "test_curvature_every.py",
    "test_mup_coord_check.py",
    "test_claims_init.py",
    "test_sharded_curvature.py",
    "test_distributed.py",
    "test_hessian.py",
    "test_main.py",
    "test_fsdp.py",
    "test_shard.py",
    "test_preemption.py",
)


COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compiles():
  """Yields a list that gets one entry per XLA backend compilation inside the block (a persistent-cache hit counts
  too: module docstring)."""
  import jax  # noqa: PLC0415 (the environment above is set before JAX is imported)

  seen = []

  def listener(event, duration, **kwargs):
    if event == COMPILE_EVENT:
      seen.append(duration)

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield seen
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests keep their order


REPO = pathlib.Path(__file__).resolve().parents[1]
MAX_MAPPINGS = 20_000  # well under vm.max_map_count's default of 65530; one test adds at most a few thousand
# The project's shared, read-only data folder (next to the repository); tests read it and never write into it.
SHARED_MULTI30K = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture
def multi30k_copy(tmp_path):
  """A writable copy of the shared Multi30k folder under tmp_path, so that nothing a test does (a SentencePiece model
  cached next to the data) lands in the shared folder; skips where the shared copy is absent."""
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K} (the project's shared data folder)")
  copy = tmp_path / "multi30k_copy"
  # The data files only: a SentencePiece model cached in the shared folder (it holds one) is not the data, and a
  # test of where models are cached must start from a folder without one.
  shutil.copytree(SHARED_MULTI30K, copy, ignore=lambda _, names: [n for n in names if not n.endswith((".gz", ".md"))])
  os.chmod(copy, 0o755)  # copytree keeps the shared folder's r-x modes
  for path in copy.iterdir():
    os.chmod(path, 0o644)
  return copy


# ------------------------------------------------------------------------------------------- compiled programs


def num_mappings() -> int:
  """The number of this process's memory mappings (lines of /proc/self/maps); 0 where there is no /proc."""
  try:
    with open("/proc/self/maps", "rb") as f:
      return sum(1 for _ in f)
  except OSError:
    return 0


def drop_compiled_programs() -> None:
  """Drops JAX's compiled programs and traces (tests recompile what they use next) and frees what held them."""
  import jax  # pylint: disable=g-import-not-at-top (only once a test has run; conftest itself must not set up jax)

  jax.clear_caches()
  gc.collect()


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs_after_the_module():
  yield
  drop_compiled_programs()


@pytest.fixture(autouse=True)
def _drop_compiled_programs_when_mappings_pile_up():
  yield
  if num_mappings() > MAX_MAPPINGS:
    drop_compiled_programs()


# ------------------------------------------------------------------------------------------- multi-process runs


def xla_flags(num_devices: int) -> str:
  """The session's XLA_FLAGS (those above, or the caller's) for a subprocess with `num_devices` simulated CPU
  devices."""
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
  return " ".join([*flags, f"--xla_force_host_platform_device_count={num_devices}"])


def free_port() -> int:
  """A TCP port on 127.0.0.1 that was free a moment ago (the OS's choice for port 0)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@dataclasses.dataclass
class ProcessResult:
  process_id: int
  returncode: Optional[int]  # None: still running when the job's time ran out (then killed)
  output: str  # stdout and stderr, interleaved


class ProcessJob:
  """N processes of one JAX run on this machine (see the `jax_processes` fixture)."""

  def __init__(self, procs: list, logs: list[pathlib.Path]):
    self.procs, self.logs = procs, logs

  def kill(self, process_id: int, sig: int = signal.SIGKILL) -> None:
    """Sends `sig` to one process (and its process group: nothing else of the job)."""
    proc = self.procs[process_id]
    if proc.poll() is None:
      os.killpg(proc.pid, sig)

  def wait(self, timeout: float, *, grace: float = 20) -> list[ProcessResult]:
    """Waits until every process exited, at most `timeout` seconds; a process that exits non-zero (or was killed)
    gets the others killed `grace` seconds later (they would wait for it until JAX's own timeouts: the coordinator
    of a run whose other process died notices the missing heartbeats only after about a minute); on time out every
    process is killed. A process killed here has returncode None in the results."""
    deadline, failed_at = time.monotonic() + timeout, None
    # poll() every process (a generator in any() would stop at the first one running and never see the others exit)
    while None in [p.poll() for p in self.procs]:
      now = time.monotonic()
      if failed_at is None and any(p.returncode not in (None, 0) for p in self.procs):
        failed_at = now
      if now > deadline or (failed_at is not None and now > failed_at + grace):
        timed_out = [i for i, p in enumerate(self.procs) if p.poll() is None]
        for i in timed_out:
          self.kill(i)
        for p in self.procs:
          p.wait()
        return self._results(timed_out)
      time.sleep(0.1)
    return self._results([])

  def _results(self, timed_out: list[int]) -> list[ProcessResult]:
    return [
        ProcessResult(i, None if i in timed_out else p.returncode, self.logs[i].read_text(errors="replace"))
        for i, p in enumerate(self.procs)
    ]


@pytest.fixture
def jax_processes(tmp_path):
  """Starts the N processes of one JAX distributed run on 127.0.0.1, each with its own simulated CPU devices.

  `start(argv, num_processes=2, devices_per_process=2, env=None) -> ProcessJob`: `argv(process_id, address)` is the
  command of each process, `address` a free "127.0.0.1:<port>" for the coordinator. Outputs go to files (no pipe can
  fill up and block a process). At teardown every process still running is killed (SIGKILL to its own process
  group) and reaped, whatever the test did.
  """
  jobs: list[ProcessJob] = []

  def start(argv, num_processes: int = 2, *, devices_per_process: int = 2, env: Optional[dict] = None) -> ProcessJob:
    address = f"127.0.0.1:{free_port()}"
    procs, logs = [], []
    job = ProcessJob(procs, logs)
    jobs.append(job)
    for i in range(num_processes):
      logs.append(tmp_path / f"process_{len(jobs)}_{i}.log")
      with open(logs[-1], "w") as log:
        procs.append(
            subprocess.Popen(
                argv(i, address),
                cwd=REPO,
                env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags(devices_per_process), **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a kill reaches nothing else
            )
        )
    return job

  try:
    yield start
  finally:
    for job in jobs:
      for i, proc in enumerate(job.procs):
        job.kill(i)
        proc.wait()
