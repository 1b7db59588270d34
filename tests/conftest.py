"""Test-wide setup. Tests run on the CPU; XLA's backend optimizations are turned down because the suite compiles
many tiny programs whose run time is negligible next to their compile time (benchmarks do not use this)."""

import os
import pathlib
import shutil

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The project's shared, read-only data folder (next to the repository); tests read it and never write into it.
SHARED_MULTI30K = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture
def multi30k_copy(tmp_path):
  """A writable copy of the shared Multi30k folder under tmp_path, so that nothing a test does (a SentencePiece model
  cached next to the data) lands in the shared folder; skips where the shared copy is absent."""
  if not (SHARED_MULTI30K / "train.de.gz").exists():
    pytest.skip(f"Multi30k not found at {SHARED_MULTI30K} (the project's shared data folder)")
  copy = tmp_path / "multi30k_copy"
  shutil.copytree(SHARED_MULTI30K, copy)
  os.chmod(copy, 0o755)  # copytree keeps the shared folder's r-x modes
  for path in copy.iterdir():
    os.chmod(path, 0o644)
  return copy
