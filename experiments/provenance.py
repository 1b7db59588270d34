"""Where a result came from: the code's commit (and whether the tree had changes), package versions, devices, host.

Contract: `provenance(repo)` returns a JSON-able dict, and never raises: without git, or outside a repository,
`git_commit` and `git_dirty` are None and `git_error` says why; a package that is not installed has version None.
"""

import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
from typing import Any, Optional

import jax

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "grain", "numpy")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(repo: str, *args: str) -> str:
  out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30)
  if out.returncode != 0:
    raise RuntimeError(out.stderr.strip() or f"git {' '.join(args)} exited {out.returncode}")
  return out.stdout


OUTPUTS = ("reports",)  # what the studies write into the repository: results, not the code that made them


def git_state(repo: str = REPO) -> dict[str, Any]:
  """{'git_commit', 'git_dirty', 'git_dirty_paths'} of `repo` (None with 'git_error' when git or the repository is
  missing). Dirty means the code differs from the commit: changes under `OUTPUTS` (the reports a study rewrites while
  it runs, e.g. the atlas's ATLAS.md after every cell) are not counted; the changed paths are listed (at most 20)."""
  try:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    status = _git(repo, "status", "--porcelain", "--", ".", *(f":(exclude){p}" for p in OUTPUTS))
  except (OSError, RuntimeError, subprocess.SubprocessError) as e:
    return {"git_commit": None, "git_dirty": None, "git_error": f"{type(e).__name__}: {e}"}
  paths = [line[3:] for line in status.splitlines() if line.strip()]
  return {"git_commit": commit, "git_dirty": bool(paths), "git_dirty_paths": paths[:20]}


def _version(package: str) -> Optional[str]:
  try:
    return importlib.metadata.version(package)
  except importlib.metadata.PackageNotFoundError:
    return None


ISA = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "neon", "sve")


def cpu() -> dict[str, Any]:
  """The host CPU's model and the instruction-set extensions among `ISA` it has (XLA:CPU compiles for them, so two
  CPUs of one pinned JAX can differ in the last digits: a record names the one it came from), from /proc/cpuinfo
  where there is one, else `platform`."""
  model, flags = platform.processor() or platform.machine(), set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and model in ("", platform.processor(), platform.machine()):
          model = value.strip()
        elif key in ("flags", "features") and not flags:
          flags = set(value.split())
  except OSError:
    pass
  return {"model": model, "isa": [f for f in ISA if f in flags], "cores": os.cpu_count()}


_AT_START: dict[str, dict] = {}  # repo -> its git state when this process first asked


def provenance(repo: str = REPO) -> dict[str, Any]:
  """Commit, dirty flag, package versions, JAX backend and devices, host and its CPU, `XLA_FLAGS`, Python and the
  time (UTC). The git state is the one this process first read (its code does not change after import, while the
  checkout may: a long sweep's later runs still name the commit they run)."""
  devices = jax.devices()
  if repo not in _AT_START:
    _AT_START[repo] = git_state(repo)
  return {
      **_AT_START[repo],
      "packages": {p: _version(p) for p in PACKAGES},
      "backend": jax.default_backend(),
      "device_kinds": sorted({d.device_kind for d in devices}),
      "device_count": len(devices),
      "process_count": jax.process_count(),
      "hostname": socket.gethostname(),
      "cpu": cpu(),
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
      "python": platform.python_version(),
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }


def trained_at(provs: list[Optional[dict]]) -> dict[str, Any]:
  """What the runs of a record trained at, from each run's `provenance`: the distinct commits ('<sha>' or
  '<sha>+dirty') and machines ('<cpu model> [isa…] / <backend> <device kinds> / XLA_FLAGS=…'), each sorted; a run
  that kept none counts as 'unrecorded'. A claim whose runs span several machines says so in its record."""
  commits, machines = set(), set()
  for p in provs:
    if not p:
      commits.add("unrecorded")
      machines.add("unrecorded")
      continue
    c = p.get("git_commit")
    commits.add(f"{c}{'+dirty' if p.get('git_dirty') else ''}" if c else "unrecorded")
    cpu_ = p.get("cpu") or {}
    where = f"{cpu_.get('model', 'cpu unrecorded')} [{' '.join(cpu_.get('isa') or [])}]" if cpu_ else "cpu unrecorded"
    machines.add(
        f"{where} / {p.get('backend', '?')} {','.join(p.get('device_kinds') or [])}"
        + (f" / XLA_FLAGS={p['xla_flags']}" if p.get("xla_flags") else "")
    )
  return {"git_commits": sorted(commits), "machines": sorted(machines)}
