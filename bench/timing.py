"""Timing and memory of the curvature routines on one `bench.problems.Problem`, as plain dicts: the shared core of the
per-model timing files (bench/models_timing.py) and the GPU run (bench/gpu.py).

Each routine is one program compiled once (`jax.jit(fn).lower(*args).compile()`), so its compile time, memory account
and run time come from the same executable; it runs once as a warm-up, then `repeats` times, and the median is kept.

  * `gradient`: `jax.grad(loss_fn)`, the unit of every ratio (curvlinops 3's convention: a product's time and peak
    memory against a gradient's on the same model and batch). Given the compiled gradient as `reference`, a
    routine's timed runs each follow a gradient run, and its ratio is against those (`gradient_time_s`): on a shared
    CPU the load moves between one routine and the next, not between two adjacent runs.
  * `hvp`, `ggn`, `ef`: `curvax.hessian`, `curvax.ggn` (softmax cross-entropy on the outputs) and
    `curvax.empirical_fisher` (per-example losses), each timed as two programs: `build` (the constructor under
    `jax.jit`, returning the operator: one linearization, its residuals stored) and `product` (one product on the
    built operator, what each Lanczos step pays). `time_s` is the product's; `from_scratch_ratio_to_gradient`
    = (build + product) / gradient is what a library that recomputes the linearization per product (curvlinops,
    PyHessian) pays for one product.
  * `top5`: `curvax.top_eigenvalues(op, 5, num_steps=..., tol=...)` on the Hessian: Lanczos steps (= products) taken,
    whether every value met its certified bound (bound ≤ tol·|value|, all five valid), the values and the bounds.

Peak memory: XLA's `memory_analysis()` of the compiled program, temp + argument + output − alias bytes (what the
program needs on the device while it runs, its inputs included: the product's arguments hold the operator's stored
residuals); None where the backend gives no analysis. On a GPU the device allocator's high-water mark
(`memory_stats()["peak_bytes_in_use"]`) is read too: it is process-wide and never reset, so it is the peak of all
programs run so far.
"""

import os
import platform
import statistics
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

import curvax

MEMORY_SOURCE = "XLA memory_analysis() of the compiled program: temp + argument + output - alias bytes"
OPERATORS = ("hvp", "ggn", "ef")
_COMPILE_SECONDS = []  # XLA compile durations of this process, from JAX's monitoring events
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: _COMPILE_SECONDS.append(seconds)
    if event == "/jax/core/compile/backend_compile_duration"
    else None
)


def cpu_model() -> str:
  """The CPU's model name from /proc/cpuinfo (Linux), else `platform.processor()`."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def machine() -> dict:
  """The machine a measurement ran on: CPU model and count, load average, accelerator, library versions."""
  import flax  # noqa: PLC0415
  import jaxlib  # noqa: PLC0415

  device = jax.devices()[0]
  load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
  return dict(
      cpu=cpu_model(),
      cpu_count=os.cpu_count(),
      load_average_1_5_15min=[round(x, 2) for x in load],
      backend=jax.default_backend(),
      device_kind=device.device_kind,
      device_count=jax.device_count(),
      platform=f"{platform.system()} {platform.machine()}",
      python=platform.python_version(),
      jax=jax.__version__,
      jaxlib=jaxlib.__version__,
      flax=flax.__version__,
      xla_flags=os.environ.get("XLA_FLAGS", ""),
  )


def memory(compiled) -> Optional[dict]:
  """{peak_bytes, temp_bytes, argument_bytes, output_bytes} from XLA's memory analysis, or None if there is none."""
  try:
    stats = compiled.memory_analysis()
  except (NotImplementedError, RuntimeError, AttributeError):
    stats = None
  if stats is None:
    return None
  parts = dict(
      temp_bytes=int(stats.temp_size_in_bytes),
      argument_bytes=int(stats.argument_size_in_bytes),
      output_bytes=int(stats.output_size_in_bytes),
  )
  peak = parts["temp_bytes"] + parts["argument_bytes"] + parts["output_bytes"] - int(stats.alias_size_in_bytes)
  return dict(peak_bytes=peak, **parts)


def flops(compiled) -> Optional[float]:
  """XLA's count of the program's floating-point operations (`cost_analysis()`), None where the backend has none:
  a measure of the work that the machine's load does not change."""
  try:
    cost = compiled.cost_analysis()
  except (NotImplementedError, RuntimeError, AttributeError):
    return None
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"]) if cost and "flops" in cost else None


def device_peak_bytes() -> Optional[int]:
  """The device allocator's process-wide high-water mark (GPU/TPU), None where the backend keeps none (CPU)."""
  stats = jax.devices()[0].memory_stats()
  return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None


def run_compiled(fn: Callable, args: tuple, repeats: int, reference: Optional[Callable] = None) -> tuple[Any, dict]:
  """(output, {time_s: median of `repeats` runs after a warm-up, time_min_s, compile_s, first_run_s, flops,
  peak_bytes, ...}). With `reference` (the compiled gradient, `time_gradient`'s second output) each run follows one
  of it, timed too (`gradient_time_s`, their median): the ratio then compares runs under the same load."""
  t = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  return run_program(compiled, time.perf_counter() - t, args, repeats, reference)


def run_program(compiled, compile_s: float, args: tuple, repeats: int, reference: Optional[Callable] = None):
  """`run_compiled` of an already compiled program (`compile_s`: the seconds its compilation took)."""
  mem = memory(compiled)
  t = time.perf_counter()
  out = jax.block_until_ready(compiled(*args))
  first_run_s = time.perf_counter() - t
  times, reference_times = [], []
  for _ in range(repeats):
    del out  # the previous output's buffers go before the next run allocates its own
    if reference is not None:
      t = time.perf_counter()
      jax.block_until_ready(reference())
      reference_times.append(time.perf_counter() - t)
    t = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - t)
  row = dict(
      time_s=statistics.median(times),
      time_min_s=min(times),
      repeats=repeats,
      compile_s=compile_s,
      first_run_s=first_run_s,
      flops=flops(compiled),
  )
  if reference_times:
    row["gradient_time_s"] = statistics.median(reference_times)
  row.update(mem or dict(peak_bytes=None))
  peak = device_peak_bytes()
  if peak is not None:
    row["device_peak_bytes_so_far"] = peak
  return out, row


def add_ratios(row: dict, gradient: dict) -> dict:
  """`row` with ratio_to_gradient (against its interleaved gradient runs where it has them, else the gradient's
  own median) and flops_ratio_to_gradient."""
  row["ratio_to_gradient"] = row["time_s"] / row.get("gradient_time_s", gradient["time_s"])
  if row["flops"] is not None and gradient["flops"]:
    row["flops_ratio_to_gradient"] = row["flops"] / gradient["flops"]
  return row


def random_vector(params, seed: int = 1):
  """A Gaussian pytree shaped like `params` (the vector the products are timed on)."""
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(treedef, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])


def constructor(problem, name: str) -> Callable:
  """`build(params, batch) -> operator` of routine `name` in `OPERATORS` for `problem`."""
  if name == "hvp":
    return lambda p, b: curvax.hessian(problem.loss_fn, p, b)
  if name == "ggn":
    return lambda p, b: curvax.ggn(problem.outputs_fn, p, b, output_weights=problem.output_weights)
  if name == "ef":
    return lambda p, b: curvax.empirical_fisher(problem.per_example_fn, p, b)
  raise ValueError(f"operator {name!r} is not timed here; valid: {list(OPERATORS)}")


def time_gradient(problem, repeats: int) -> tuple[dict, Callable]:
  """(the gradient's row, a zero-argument call of its compiled program: the reference the others interleave)."""
  args = (problem.params, problem.batch)
  t = time.perf_counter()
  compiled = jax.jit(jax.grad(problem.loss_fn)).lower(*args).compile()
  out, row = run_program(compiled, time.perf_counter() - t, args, repeats)
  del out
  return row, lambda: compiled(*args)


def time_operator(problem, name: str, gradient: dict, reference: Callable, repeats: int, keep: bool = False):
  """{time_s (one product), ratio_to_gradient, peak_bytes (the product's program), build: {...}, ...}, and the built
  operator if `keep` (else None, its residuals freed)."""
  op, build = run_compiled(constructor(problem, name), (problem.params, problem.batch), repeats, reference)
  v = random_vector(problem.params)
  out, row = run_compiled(lambda o, x: o(x), (op, v), repeats, reference)
  del out, v
  add_ratios(row, gradient)
  row["build"] = add_ratios(build, gradient)
  row["from_scratch_ratio_to_gradient"] = build["ratio_to_gradient"] + row["ratio_to_gradient"]
  if build["peak_bytes"] is not None and gradient["peak_bytes"] is not None:
    row["peak_ratio_to_gradient"] = max(build["peak_bytes"], row["peak_bytes"]) / gradient["peak_bytes"]
  return row, (op if keep else None)


def restart_option() -> Optional[str]:
  """The name of `curvax.top_eigenvalues`' thick-restart basis limit (`max_vectors`) where this curvax takes it
  (as its own argument or as one of Lanczos' that it forwards), else None."""
  import inspect  # noqa: PLC0415

  for fn in (curvax.top_eigenvalues, curvax.lanczos):
    if "max_vectors" in inspect.signature(fn).parameters:
      return "max_vectors"
  return None


def matvecs_of(result) -> int:
  """Products a `top_eigenvalues` result took: its own count where it keeps one (restarts), else its Lanczos steps."""
  for name in ("num_matvecs", "matvecs"):
    if hasattr(result, name):
      return int(getattr(result, name))
  return int(result.lanczos.num_steps_taken)


def time_top(op, k: int, num_steps: int, tol: float, calls: int = 2, callback=None, **lanczos_kwargs) -> dict:
  """Certified top-k of `op` by `curvax.top_eigenvalues(op, k, num_steps=, tol=)`; `calls` 2: a first call
  (compiles) and a second one, timed (`time_s`); 1: the first call alone (`time_s` then includes compilation, and
  `run_s` = time_s − XLA's compile time). `lanczos_kwargs` (max_vectors, max_basis_bytes, ...) go to curvax."""
  kwargs = dict(num_steps=num_steps, key=jax.random.key(0), tol=tol, **lanczos_kwargs)
  if callback is not None:
    kwargs["callback"] = callback
  times, compiles = [], []
  for _ in range(calls):
    before = len(_COMPILE_SECONDS)
    t = time.perf_counter()
    res = jax.block_until_ready(curvax.top_eigenvalues(op, k, **kwargs))
    times.append(time.perf_counter() - t)
    compiles.append(sum(_COMPILE_SECONDS[before:]))
  values, bounds = np.asarray(res.values, np.float64), np.asarray(res.bounds, np.float64)
  row = dict(
      k=k,
      num_steps=num_steps,
      tol=tol,
      matvecs=matvecs_of(res),
      certified=bool(np.all(np.asarray(res.valid)) and np.all(bounds <= tol * np.abs(values))),
      converged=bool(res.lanczos.converged),
      separated=bool(res.separated),
      values=values.tolist(),
      bounds=bounds.tolist(),
      time_s=times[-1],
      first_call_s=times[0],
      compile_s=compiles[0],
      run_s=times[-1] - compiles[-1],
      restart={"max_vectors": lanczos_kwargs["max_vectors"]} if "max_vectors" in lanczos_kwargs else None,
  )
  peak = device_peak_bytes()
  if peak is not None:
    row["device_peak_bytes_so_far"] = peak
  return row


def flat_size(params) -> int:
  return int(sum(np.size(x) for x in jax.tree.leaves(params)))


def basis_bytes(num_steps: int, params) -> int:
  """Bytes of the [num_steps + 1, n] Lanczos basis that full reorthogonalization stores (in the params' dtype)."""
  return (num_steps + 1) * flat_size(params) * jnp.dtype(jax.tree.leaves(params)[0].dtype).itemsize
