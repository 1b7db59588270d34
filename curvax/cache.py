"""JAX's persistent compilation cache for curvax's programs.

Every curvax routine is a jitted program compiled once per operator structure in a process (`curvax.operators`);
the persistent cache keeps the compiled executables on disk, so a new process (the next seed, checkpoint or script
run) reads them back instead of compiling again. Turn it on before the first computation.
"""

import os
from typing import Optional

import jax


def default_cache_dir() -> str:
  """`$XDG_CACHE_HOME/curvax/jax` (`~/.cache/curvax/jax` when unset)."""
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "curvax", "jax")


def enable_compilation_cache(path: Optional[str] = None, *, min_compile_time_secs: float = 0.0) -> str:
  """Turn on JAX's persistent compilation cache in `path` (None: `default_cache_dir()`); returns the folder.

  Args:
    path: the cache folder (created if missing; a `gs://` URI works where JAX supports it).
    min_compile_time_secs: cache only programs that took at least this long to compile (JAX's default is 1 s;
      0 also keeps the many sub-second programs of small operators).
  """
  if path is not None and not isinstance(path, (str, os.PathLike)):
    raise ValueError(f"path must be None or a folder, got {type(path).__name__}")
  if not (isinstance(min_compile_time_secs, (int, float)) and min_compile_time_secs >= 0):
    raise ValueError(f"min_compile_time_secs={min_compile_time_secs!r} must be a number ≥ 0")
  folder = os.fspath(path) if path is not None else default_cache_dir()
  if "://" not in folder:
    os.makedirs(folder, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", folder)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
  return folder
