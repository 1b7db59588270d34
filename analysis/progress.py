"""Progress lines of the long-running analysis programs (Lanczos, SLQ), printed from inside a jitted program.

Contract: `progress_printer(label, print_fn)` returns a host function `callback(step, num_steps)` for the `callback=`
argument of `curvax.lanczos`, `curvax.top_eigenvalues` / `bottom_eigenvalues` and `curvax.spectral_density`; the
program calls it through `jax.debug.callback` with the callback as a runtime operand (`curvax`), so printing
changes no compiled program. `progress_callback` is the same printer where a host callback is safe (a run of one
process) and None otherwise. No project imports: only jax.
"""

import time
from typing import Callable

import jax


def progress_printer(label: str = "lanczos", print_fn: Callable[[str], None] = print):
  """Return a `callback(step, num_steps)` for `lanczos(..., callback=...)` printing progress and ETA.

  The clock starts at the first report, so the ETA excludes compile time.
  """
  state = {}

  def callback(step, num_steps):
    now = time.perf_counter()
    t0, s0 = state.setdefault("start", (now, step))
    rate = (now - t0) / max(step - s0, 1)
    print_fn(f"{label}: step {step}/{num_steps}, {now - t0:.1f} s elapsed, ETA {rate * (num_steps - step):.1f} s")

  return callback


def progress_callback(label: str, print_fn: Callable[[str], None]):
  """Lanczos progress lines (a `jax.debug.callback` inside the program) in a single-process run; none across several
  processes, where a host callback in a program spanning processes runs on one host only and the run hangs (seen
  with 2 processes × 2 CPU devices, FSDP over 4, on the jax of requirements.txt)."""
  return progress_printer(label, print_fn) if jax.process_count() == 1 else None
