"""Start-up of a multi-process run: `jax.distributed.initialize` from `config.distributed`, before any device access.

Contract:
  * `validate(cfg)` checks the `config.distributed` subtree (keys `DISTRIBUTED_KEYS`, declared with a comment each in
    configs/default.py) and raises ValueError in the config boundary's format (`configs.schema.invalid` /
    `contradiction`): `config.distributed.<key>=<value> is invalid; valid: ...`.
  * `plan(cfg)` decides, touching no device: None for a process that runs alone, else the keyword arguments of
    `jax.distributed.initialize` (keys left at "detect" are None, and JAX fills them from the environment).
  * `initialize(cfg)` validates, plans and calls `jax.distributed.initialize` at most once; True when the process is
    part of a distributed run. It must run before anything touches a device (`jax.devices()`, an array, a jit):
    after that JAX refuses to start the distributed runtime.

`distributed.enabled` (a string, so the command line sets it as written):
  'auto'   initialize when `coordinator_address`, `num_processes` or `process_id` is set, when the standard
           `JAX_COORDINATOR_ADDRESS` variable is, or when JAX's own cluster detection (the one
           `jax.distributed.initialize()` without arguments uses: Cloud TPU VM pod slices on GCE or GKE, SLURM,
           Open MPI, Kubernetes) finds an environment of more than one process. A single process with none of these
           needs nothing and gets nothing (a one-task SLURM job, a single-host TPU VM included);
  'true'   always initialize; what is not set is detected, and an error names the keys if nothing can be;
  'false'  never: this process runs alone whatever the environment says.
JAX also reads `JAX_LOCAL_DEVICE_IDS` (the devices a process drives) and `JAX_COORDINATOR_PORT`; CPU collectives
across processes use gloo (JAX's default, `jax_cpu_collectives_implementation`).
"""

import dataclasses
import os
from typing import Any, Optional

import jax
from absl import logging

from configs.schema import Section, as_section, contradiction, invalid

ENABLED = ("auto", "true", "false")
COORDINATOR_ENV = "JAX_COORDINATOR_ADDRESS"
# The value of each key that means "detect it" (JAX is given None).
DETECT = {"coordinator_address": "", "num_processes": 0, "process_id": -1}


def _int(cfg, key: str, minimum: int, meaning: str) -> None:
  value = cfg[key]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise invalid(f"distributed.{key}", value, f"an integer >= {minimum} ({meaning})")


@dataclasses.dataclass(frozen=True)
class DistributedConfig(Section):
  """The `config.distributed` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "distributed"
  enabled: str
  coordinator_address: str
  num_processes: int
  process_id: int
  initialization_timeout: int

  def __post_init__(self):
    _check_values(self)


DISTRIBUTED_KEYS = tuple(f.name for f in dataclasses.fields(DistributedConfig))


def validate(cfg: Any) -> DistributedConfig:
  """The typed `config.distributed` (a `DistributedConfig`, its ConfigDict or a mapping); raises ValueError naming
  `distributed.<key>`, the bad value and the valid choices."""
  if cfg is None:
    raise invalid("distributed", None, "a config subtree (start from configs/default.py)", "missing")
  return as_section(DistributedConfig, cfg)  # a typed section (main.py's, resolved) as it is


def _check_values(cfg: DistributedConfig) -> None:
  enabled = cfg.enabled
  if enabled not in ENABLED:
    raise invalid("distributed.enabled", cfg.enabled, list(ENABLED))
  address = cfg.coordinator_address
  host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
  if not isinstance(address, str) or (address and not (host and port.isdigit() and 0 < int(port) < 65536)):
    raise invalid("distributed.coordinator_address", address, "'' (detect) or 'host:port' with a port in [1, 65535]")
  _int(cfg, "num_processes", 0, "0: detect")
  _int(cfg, "process_id", -1, "-1: detect")
  _int(cfg, "initialization_timeout", 1, "seconds")
  if cfg.num_processes and cfg.process_id >= cfg.num_processes:
    raise contradiction(
        "distributed.process_id",
        cfg.process_id,
        "distributed.num_processes",
        cfg.num_processes,
        "process ids are 0, 1, ..., num_processes - 1",
    )
  if enabled == "false":
    for key, value, alone in (
        ("coordinator_address", address, ""),
        ("num_processes", cfg.num_processes, 1),
        ("process_id", cfg.process_id, 0),
    ):
      if value not in (alone, DETECT[key]):
        raise contradiction(
            "distributed.enabled", cfg.enabled, f"distributed.{key}", value, "'false' runs one process alone"
        )


def detected_cluster() -> Optional[type]:
  """The cluster environment `jax.distributed.initialize()` without arguments would read, or None.

  JAX has no public API for this question, and asking `jax.distributed.initialize()` itself would start the runtime
  (or fail) instead of answering. This repeats the selection of the pinned jax's (requirements.txt)
  `jax._src.clusters.ClusterEnv.auto_detect_unset_distributed_params`: the first registered environment that is not
  opt-in only (mpi4py is) and reports itself present. It is the project's only use of JAX's private API. Nothing
  here touches a device: `import jax` has already found out whether this is a Cloud TPU VM, and only there does the
  GCE check ask the metadata server.
  """
  from jax._src import clusters  # private: see the docstring

  envs = getattr(clusters.ClusterEnv, "_cluster_types", None)
  if envs is None:  # fail loudly rather than run N independent single-process jobs on a pod
    raise RuntimeError(
        "this JAX has no jax._src.clusters.ClusterEnv._cluster_types to detect a cluster with; set "
        "config.distributed.enabled to 'true' (JAX detects) or 'false' (one process)"
    )
  return next((env for env in envs if not env.opt_in_only_method and env.is_env_present()), None)


def plan(cfg: Any) -> Optional[dict]:
  """None if this process runs alone, else the keyword arguments for `jax.distributed.initialize` (see the module
  docstring); touches no device. Raises ValueError when a distributed run is asked for but cannot be set up."""
  enabled = cfg.enabled
  if enabled == "false":
    return None
  kwargs = {key: (None if cfg[key] == DETECT[key] else cfg[key]) for key in DETECT}
  kwargs["initialization_timeout"] = cfg.initialization_timeout
  explicit = [key for key in DETECT if kwargs[key] is not None]
  env_address = os.environ.get(COORDINATOR_ENV)
  cluster = None if len(explicit) == len(DETECT) else detected_cluster()
  if enabled == "auto" and not explicit and not env_address:
    if cluster is None or cluster.get_process_count() <= 1:
      return None
  if cluster is None:
    # Nothing to detect the unset keys from: name the first one missing.
    for key, present in (
        ("coordinator_address", kwargs["coordinator_address"] or env_address),
        ("num_processes", kwargs["num_processes"]),
        ("process_id", kwargs["process_id"] is not None),
    ):
      if not present:
        raise invalid(
            f"distributed.{key}",
            cfg[key],
            {"coordinator_address": "'host:port' of process 0", "num_processes": "an integer >= 1"}.get(
                key, "an integer in [0, num_processes)"
            ),
            f"distributed.enabled={cfg.enabled!r} starts a run of several processes"
            f"{f' ({COORDINATOR_ENV} is set)' if env_address else ''} and no cluster environment (Cloud TPU, SLURM,"
            " Open MPI, Kubernetes) was detected to take it from",
        )
  logging.info(
      "Starting jax.distributed (%s): %s",
      f"detected {cluster.__name__}" if cluster else "from the config",
      {k: v for k, v in kwargs.items() if v is not None},
  )
  return kwargs


def initialize(cfg: Any) -> bool:
  """Validates `cfg` (`config.distributed`) and starts `jax.distributed` if `plan` says so.

  Returns:
    True if this process is part of a distributed run (started now or before), False if it runs alone.
  """
  cfg = validate(cfg)
  if jax.distributed.is_initialized():
    logging.info("jax.distributed was already initialized; config.distributed is not used")
    return True
  kwargs = plan(cfg)
  if kwargs is None:
    return False
  jax.distributed.initialize(**kwargs)
  return True
