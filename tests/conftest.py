"""Test-wide setup. Tests run on the CPU; XLA's backend optimizations are turned down because the suite compiles
many tiny programs whose run time is negligible next to their compile time (benchmarks do not use this)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
