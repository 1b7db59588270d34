"""A sweep spread over the tasks of a job array: which runs a shard takes, and a claim per run so that no two
processes train the same run.

Sharding (`sweep.shard`): shard i of N runs the runs (cell, seed) whose index in the sweep's plan (grid order, seeds
fastest) is ≡ i mod N, in one workdir shared by every shard. 'i/N' names it; 'auto' (the default) reads, in order:
TRANSFORMER_INIT_SHARD=i/N (this project's own variable); SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (the task's
position (ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP, so `--array=1-15:2` works too); JOB_COMPLETION_INDEX
(a Kubernetes indexed Job, with `sweep.num_shards` its completions; only when a run is one process: a multi-host run
takes its shard from the job level, never the host); else 0/1. Every process of a multi-host shard takes the same runs.

Parallel runs on one machine (`sweep.parallel=k`): main.py starts k processes of itself, child j the shard
(i + N·j)/(N·k) of this invocation's shard i/N, each pinned to its own devices (`child_env`: a contiguous slice of
the GPUs, or its own host-platform devices on the CPU); the last to finish gathers. Not on TPU, where one process owns
a host's chips: shard over hosts instead.

Claims. Before a shard trains a run it claims it: an atomic exclusive create of `<run>/claim.json` ({owner, host,
pid, heartbeat}), the heartbeat rewritten every `timeout/4` seconds while the run trains (`Heartbeat`). A claim whose
heartbeat is older than `sweep.claim_timeout_s`, or whose pid is gone from this host (`dead_here`), is stale and is
taken over; a fresh one is not, so overlapping shard sets, a re-submitted array or two sweeps on one workdir never
train a run twice. The claim is removed when the run ends; a finished run is skipped by its status.json. Written by
hand (no library claims files on a shared filesystem without a server); `O_CREAT | O_EXCL` is atomic on local and
NFSv3+ filesystems (tests/test_shard.py). On an object store (`gs://...`, through `etils.epath`) the create is an
open in mode 'xb', a conditional upload in gcsfs and s3fs; what that store lacks (an atomic rename, so a stale claim
may be taken twice) and what to do about it: docs/scaling.md.
"""

import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Callable, Mapping, Optional

from etils import epath

from configs.schema import invalid

CLAIM_FILE = "claim.json"
SHARD_ENV = "TRANSFORMER_INIT_SHARD"


def _invalid(key: str, value, valid: str) -> ValueError:
  """The config boundary's error for a config key; the same format, without `config.`, for an environment
  variable (upper case)."""
  if key.isupper():
    return ValueError(f"{key}={value!r} is invalid; valid: {valid}")
  return invalid(key, value, valid)


def parse_shard(spec: str, key: str = "sweep.shard") -> tuple[int, int]:
  """(i, N) from 'i/N' with 0 ≤ i < N; a ValueError in the config boundary's format otherwise."""
  valid = "'i/N' with 0 <= i < N (shard i of N)" + (", or 'auto'" if key == "sweep.shard" else "")
  try:
    i, n = (int(x) for x in spec.split("/"))
  except ValueError:
    raise _invalid(key, spec, valid) from None
  if not 0 <= i < n:
    raise _invalid(key, spec, valid)
  return i, n


def _env_int(env: Mapping[str, str], name: str, low: int, default: Optional[int] = None) -> int:
  """The integer `env[name]` (>= low), or `default` when unset; else the one-line error naming the variable."""
  text = env.get(name)
  if text is None and default is not None:
    return default
  try:
    value = int(text)
  except (TypeError, ValueError):
    value = None
  if value is None or value < low:
    raise _invalid(name, text, f"an integer >= {low}")
  return value


def resolve_shard(
    spec: str, num_shards: int = 0, env: Optional[Mapping[str, str]] = None, process_count: int = 1
) -> tuple[int, int, str]:
  """(i, N, where it came from) for `sweep.shard` = `spec` (module docstring)."""
  env = os.environ if env is None else env
  if spec != "auto":
    return (*parse_shard(spec), "sweep.shard")
  if env.get(SHARD_ENV):
    return (*parse_shard(env[SHARD_ENV], SHARD_ENV), SHARD_ENV)
  if env.get("SLURM_ARRAY_TASK_ID") is not None and env.get("SLURM_ARRAY_TASK_COUNT"):
    task, count = _env_int(env, "SLURM_ARRAY_TASK_ID", 0), _env_int(env, "SLURM_ARRAY_TASK_COUNT", 1)
    low, step = _env_int(env, "SLURM_ARRAY_TASK_MIN", 0, 0), _env_int(env, "SLURM_ARRAY_TASK_STEP", 1, 1)
    position, off = divmod(task - low, step)
    if off or not 0 <= position < count:
      raise _invalid(
          "SLURM_ARRAY_TASK_ID",
          task,
          f"a task of the array {low}..{low + step * (count - 1)} step {step} (SLURM_ARRAY_TASK_MIN/STEP/COUNT)",
      )
    return position, count, "SLURM_ARRAY_TASK_ID"
  if env.get("JOB_COMPLETION_INDEX") is not None:
    if num_shards < 1:
      raise invalid(
          "sweep.num_shards",
          num_shards,
          "the indexed Job's completions (>= 1): JOB_COMPLETION_INDEX is set, and Kubernetes does not export the count",
      )
    if process_count > 1:
      raise invalid(
          "sweep.shard",
          spec,
          f"'i/N' or {SHARD_ENV}: JOB_COMPLETION_INDEX differs between the {process_count} processes of one run "
          "(take the shard from the job level, e.g. JobSet's job index)",
      )
    return (*parse_shard(f"{env['JOB_COMPLETION_INDEX']}/{num_shards}", "JOB_COMPLETION_INDEX"), "JOB_COMPLETION_INDEX")
  return 0, 1, "no array variable: the whole sweep"


def child_shards(shard: tuple[int, int], k: int) -> list[str]:
  """The shards of k local children splitting shard (i, N): (i + N·j)/(N·k), j = 0..k−1."""
  i, n = shard
  return [f"{i + n * j}/{n * k}" for j in range(k)]


def _gpus(env: Mapping[str, str]) -> list[str]:
  """The GPUs this process may use, without initializing JAX (which would take their memory): CUDA_VISIBLE_DEVICES,
  else the ones nvidia-smi lists; [] without GPUs."""
  if env.get("CUDA_VISIBLE_DEVICES") is not None:
    return [d for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
  try:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
  except (OSError, subprocess.SubprocessError):
    return []
  return [str(n) for n, line in enumerate(line for line in listed.splitlines() if line.startswith("GPU "))]


def _host_devices(flags: str) -> int:
  m = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
  return int(m.group(1)) if m else 1


def child_env(j: int, k: int, env: Mapping[str, str]) -> dict[str, str]:
  """The environment of local child j of k (module docstring): its slice of the GPUs, or on the CPU its share of the
  host-platform devices (at least one). A ValueError before any child starts if the devices do not split."""
  env = dict(env)
  if env.get("JAX_PLATFORMS", "").startswith("tpu") or os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio/0"):
    raise invalid("sweep.parallel", k, "1 on a TPU host (one process owns its chips): shard over hosts instead")
  gpus = [] if env.get("JAX_PLATFORMS", "").startswith("cpu") else _gpus(env)
  if gpus:
    if len(gpus) < k or len(gpus) % k:
      raise invalid("sweep.parallel", k, f"a divisor of this host's {len(gpus)} GPU(s) (each run gets its own)")
    per = len(gpus) // k
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[j * per : (j + 1) * per])
    return env
  flags = env.get("XLA_FLAGS", "")
  count = max(1, _host_devices(flags) // k)
  rest = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags).strip()
  env["XLA_FLAGS"] = f"{rest} --xla_force_host_platform_device_count={count}".strip()
  return env


def run_parallel(argv: list[str], k: int, shard: tuple[int, int], env: Optional[Mapping[str, str]] = None) -> int:
  """Runs `python main.py <argv>` as k children at once (module docstring); returns the first non-zero exit status
  (0 when all succeed). Their output goes to this process's."""
  env = os.environ if env is None else env
  keep = [a for a in argv if not a.startswith(("--config.sweep.shard=", "--config.sweep.parallel="))]
  envs = [child_env(j, k, env) for j in range(k)]  # every child's devices checked before any starts
  children = [
      subprocess.Popen(
          [
              sys.executable,
              os.path.abspath(sys.argv[0]),
              *keep,
              f"--config.sweep.shard={spec}",
              "--config.sweep.parallel=1",
          ],
          env=child,
      )
      for spec, child in zip(child_shards(shard, k), envs)
  ]
  codes = [c.wait() for c in children]
  return next((c for c in codes if c), 0)


def mine(index: int, shard: tuple[int, int]) -> bool:
  """Whether run number `index` of the plan is shard (i, N)'s."""
  i, n = shard
  return index % n == i


def owner_id() -> str:
  """This invocation's name in claims: host, pid and a random suffix (a pid is reused across hosts and reboots)."""
  return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _remote(path: str) -> bool:
  return "://" in os.fspath(path)


def _read(path: str) -> Optional[dict]:
  try:
    return json.loads(epath.Path(path).read_text(encoding="utf-8"))
  except (OSError, ValueError):  # gone, or caught between create and write: treated as fresh by its mtime below
    return None


def _create(path: str, record: dict) -> bool:
  """Creates the claim file `path` holding `record` if there is none (atomically: module docstring); False if one
  exists."""
  if not _remote(path):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      json.dump(record, f)
    return True
  try:
    # epath.Path.open has no exclusive-create mode 'x', so its backend, the layer that reaches fsspec (gcsfs/s3fs: a
    # conditional upload, refused at open or at close), is asked directly.
    backend = epath.Path(path)._backend  # noqa: SLF001
    with backend.open(os.fspath(path), "xb") as f:
      f.write(json.dumps(record).encode())
  except FileExistsError:
    return False
  except (ValueError, NotImplementedError, io.UnsupportedOperation) as e:
    raise RuntimeError(
        f"{path}: this filesystem layer cannot create a file exclusively ({type(e).__name__}: {e}), which a run's "
        "claim needs; use gcsfs/s3fs 2024.12 or later, or keep the runs on a local or NFS folder "
        "(config.sweep.cells_dir; experiments/shard.py)"
    ) from e
  return True


def _set_aside(path: str) -> None:
  """Removes a stale claim so that it can be created again: an atomic rename locally (one taker wins); on an object
  store, which has no rename, a delete (module docstring)."""
  try:
    if _remote(path):
      epath.Path(path).unlink()
    else:
      os.rename(path, f"{path}.stale-{uuid.uuid4().hex[:8]}")
  except OSError:
    pass


def claim(run_dir: str, owner: str, timeout_s: float, *, clock: Callable[[], float] = time.time) -> Optional[str]:
  """Claims the run in `run_dir` for `owner`: None when claimed, else the holder of a fresh claim (module docstring).
  A stale claim (heartbeat older than `timeout_s`) is taken over: set aside (`_set_aside`: locally an atomic rename,
  one taker wins it), then created again."""
  epath.Path(run_dir).mkdir(parents=True, exist_ok=True)
  path = os.path.join(run_dir, CLAIM_FILE)
  for _ in range(3):  # create; or take over a stale claim once and create; a racing taker may win in between
    if _create(path, _claim_record(owner, clock())):
      return None
    held = _read(path)
    beat = held.get("heartbeat") if held else None
    if beat is None:
      try:
        beat = epath.Path(path).stat().mtime
      except OSError:
        continue  # released meanwhile: try again
    if clock() - beat <= timeout_s and not dead_here(held):
      return (held or {}).get("owner", "another process (its claim is being written)")
    _set_aside(path)  # stale: its owner died (its heartbeat stopped, or its pid is gone from this host)
  held = _read(path)
  return (held or {}).get("owner", "another process")


def claim_together(run_dir: str, owner: str, timeout_s: float) -> Optional[str]:
  """`claim` by process 0, its answer broadcast, so every process of a multi-host run trains the run or skips it
  together. None: claimed; else the holder."""
  import jax  # noqa: PLC0415 (the rest of this module is plain Python)

  holder = claim(run_dir, owner, timeout_s) if jax.process_index() == 0 else None
  if jax.process_count() > 1:
    import numpy as np  # noqa: PLC0415
    from jax.experimental import multihost_utils  # noqa: PLC0415

    taken = multihost_utils.broadcast_one_to_all(np.asarray(holder is not None))
    holder = (holder or "another shard") if bool(taken) else None
  return holder


def dead_here(held: Optional[dict]) -> bool:
  """Whether the claim `held` names a process of this host that no longer exists (kill -9, a crash): its claim is
  then stale at once, not after `claim_timeout_s`. A pid that exists may be another process reusing it: alive."""
  if not held or held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
    return False
  if held["pid"] == os.getpid():
    return False  # this process's own claim
  try:
    os.kill(held["pid"], 0)
  except ProcessLookupError:
    return True
  except OSError:  # PermissionError: it exists, another user's
    return False
  return False


def _claim_record(owner: str, now: float) -> dict:
  return {"owner": owner, "host": socket.gethostname(), "pid": os.getpid(), "heartbeat": now}


def release(run_dir: str, owner: str) -> None:
  """Removes `owner`'s claim of the run (another owner's, after a takeover, is left alone), and stale leftovers."""
  path = epath.Path(run_dir) / CLAIM_FILE
  held = _read(path)
  if held is not None and held.get("owner") == owner:
    try:
      path.unlink()
    except OSError:
      pass
  if _remote(run_dir):
    return  # a stale claim there was deleted, not set aside
  for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
    if name.startswith(CLAIM_FILE + ".stale-"):
      try:
        os.remove(os.path.join(run_dir, name))
      except OSError:
        pass


class Heartbeat:
  """Rewrites `owner`'s claim of a run every `every_s` seconds while the run trains (a context manager; a daemon
  thread, so a killed process simply stops beating and its claim goes stale)."""

  def __init__(self, run_dir: str, owner: str, every_s: float):
    self._path = os.path.join(run_dir, CLAIM_FILE)
    self._owner, self._every = owner, every_s
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._beat, daemon=True)

  def _beat(self) -> None:
    while not self._stop.wait(self._every):
      held = _read(self._path)
      if held is None or held.get("owner") != self._owner:
        return  # taken over (this process was presumed dead): stop claiming
      text = json.dumps(_claim_record(self._owner, time.time()))
      if _remote(self._path):
        epath.Path(self._path).write_text(text)  # an object is replaced whole (there is no rename)
        continue
      tmp = f"{self._path}.{uuid.uuid4().hex[:8]}.tmp"
      with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
      os.replace(tmp, self._path)

  def __enter__(self) -> "Heartbeat":
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    self._thread.join()
