"""Linear operators as data, and the compile-once programs that take them.

Contract: a `LinearOperator` is a symmetric linear map on pytrees shaped like its `spec` (a `FlatSpec`: tree
structure, leaf shapes and dtypes), registered as a JAX pytree whose leaves are the arrays it needs (linearization
residuals, parameters, batches, weights, block offsets) and whose static part is only structure. An operator is a
callable: `op(v)` takes and returns a pytree shaped like `spec`, and `op.size` / `op.dtype` are its flat dimension and
dtype. A public routine (`curvax.lanczos`, `curvax.top_eigenvalues`, ...) is a `jax.jit` program taking the operator
as an argument, compiled once per (operator structure, shapes, dtypes, static options): another checkpoint, batch,
seed or same-shaped block reuses it instead of tracing one with the residuals embedded as constants.

Programs work on flat vectors: `op.flat_operator()` gives the pytree a program takes and `flat_matvec(x)` maps
[n] -> [n] (ravel order of `jax.tree.leaves`, the order of `jax.flatten_util.ravel_pytree`). The flat operator
of a block carries no parameter names, so blocks of the same sizes share a program.

A plain Python callable becomes an operator with `as_operator(matvec, example)` (the example gives its shapes). A
Python function or `functools.partial` is taken apart by `curvax.closures` (its code and captured non-array values
key the program, its captured arrays are leaves), so a fresh closure with the same code reuses the compiled programs.
Any other callable is static structure, compiled in a fresh `jax.jit` wrapper dropped after the call (no global cache
keeps it alive); to reuse a compilation pass a `LinearOperator` or a `jax.tree_util.Partial` of a module-level
function whose arguments are arrays.

Progress callbacks (host functions) are no structure either: a program has a fixed dispatcher and gets the callback's
registry id as a runtime operand (`register_callback`). Only whether there is one is structure: a call without one
runs a program with no host callback, which JAX's persistent compilation cache would never store.
"""

import dataclasses
import functools
import itertools
import math
import threading
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from curvax.closures import ClosureFn, as_pytree_fn, is_pytree_callable  # noqa: F401  (as_pytree_fn: clients import it here)

# `A @ v`, `A + B`, `A - B`, `c * A`: the functions of `curvax.algebra`, registered by it (it builds on this module).
ALGEBRA: dict[str, Callable] = {}


@dataclasses.dataclass(frozen=True)
class FlatSpec:
  """Static description of a pytree of arrays: structure, leaf shapes and dtypes (hashable, compared by value).

  `ravel` concatenates the leaves (in `jax.tree.leaves` order) into one vector of `dtype` (the promoted leaf dtype,
  as `jax.flatten_util.ravel_pytree`); `unravel` splits, reshapes and casts back.
  """

  treedef: Any
  shapes: tuple
  dtypes: tuple

  @classmethod
  def of(cls, tree) -> "FlatSpec":
    leaves, treedef = jax.tree.flatten(tree)
    return cls(
        treedef,
        tuple(tuple(int(d) for d in np.shape(x)) for x in leaves),
        tuple(jnp.result_type(x).name for x in leaves),
    )

  @property
  def sizes(self) -> tuple:
    return tuple(math.prod(s) for s in self.shapes)

  @property
  def size(self) -> int:
    return int(sum(self.sizes))

  @property
  def dtype(self):
    return jnp.result_type(*self.dtypes) if self.dtypes else jnp.dtype("float32")

  def ravel(self, tree) -> jax.Array:
    leaves = jax.tree.leaves(tree)
    if not leaves:
      return jnp.zeros((0,), self.dtype)
    return jnp.concatenate([jnp.ravel(x).astype(self.dtype) for x in leaves])

  def unravel(self, flat: jax.Array):
    splits = np.cumsum(self.sizes)[:-1]
    parts = jnp.split(flat, splits) if len(self.sizes) > 1 else [flat]
    leaves = [p.reshape(s).astype(d) for p, s, d in zip(parts, self.shapes, self.dtypes)]
    return jax.tree.unflatten(self.treedef, leaves)

  def zeros(self):
    return jax.tree.unflatten(self.treedef, [jnp.zeros(s, d) for s, d in zip(self.shapes, self.dtypes)])


@functools.partial(jax.jit, static_argnums=1)
def _concat_leaves(leaves, dtype):
  return jnp.concatenate([jnp.ravel(x).astype(dtype) for x in leaves])


def ravel_leaves(tree, dtype) -> jax.Array:
  """`FlatSpec.of(tree).ravel(tree)` as one compiled program keyed on the leaf shapes only (not on dict keys, so the
  blocks of equal leaf sizes share it); eager per-leaf ops cost ~80 ms on a 5.8M-parameter model's ~100 leaves."""
  leaves = jax.tree.leaves(tree)
  if len(leaves) == 1 and leaves[0].ndim == 1:
    return jnp.asarray(leaves[0], dtype)
  return _concat_leaves(tuple(leaves), jnp.dtype(dtype))


class LinearOperator:
  """Base class of operators that are data. Subclasses are registered pytrees and define `spec` and either
  `apply(v)` (pytree -> pytree) or `flat_matvec(x)` ([n] -> [n]); the other follows."""

  spec: FlatSpec
  cacheable = True  # False: the operator holds a Python callable that identifies the program (see module doc)

  def apply(self, v):
    return self.spec.unravel(self.flat_matvec(self.spec.ravel(v)))

  def flat_matvec(self, x: jax.Array) -> jax.Array:
    return self.spec.ravel(self.apply(self.spec.unravel(x))).astype(self.spec.dtype)

  def nonfinite_inputs(self) -> str:
    """What this operator knows of why its products were not finite ("" if nothing): asked only after a routine
    found a non-finite result (`curvax.finite`), so it may fetch its arrays."""
    return ""

  def checked_inputs(self) -> dict:
    """Small arrays of this operator's inputs (e.g. per-batch losses) that every routine checks are finite, fetched
    with its result (`curvax.finite`); {} if none."""
    return {}

  def flat_operator(self) -> "LinearOperator":
    """The pytree programs take (for blocks: without parameter names, so equal-sized blocks share programs)."""
    return self

  @property
  def size(self) -> int:
    return self.spec.size

  @property
  def dtype(self):
    return self.spec.dtype

  def __call__(self, v):
    """Hv on a pytree shaped like `spec`; a jitted program cached per operator structure."""
    if not self.cacheable:
      return self.apply(v)
    return _apply_program(self, v)

  # Algebra: `curvax.algebra` fills ALGEBRA when curvax is imported, so this module needs nothing above it (no import
  # circle). numpy defers to these too.
  __array_ufunc__ = None

  def __matmul__(self, v):
    return ALGEBRA["matmul"](self, v)

  def __add__(self, other):
    return ALGEBRA["add"](self, other)

  def __radd__(self, other):
    return self if isinstance(other, int) and other == 0 else NotImplemented  # sum([A, B]) starts from 0

  def __sub__(self, other):
    return ALGEBRA["add"](self, other, sign=-1.0)

  def __mul__(self, c):
    return ALGEBRA["scale"](self, c)

  __rmul__ = __mul__

  def __truediv__(self, c):
    return self * (1.0 / c)

  def __neg__(self):
    return self * -1.0


@jax.jit
def _apply_program(op, v):
  return op.apply(v)


@jax.tree_util.register_pytree_node_class
class FunctionOperator(LinearOperator):
  """A user's matvec on pytrees shaped like `spec`. A pytree callable (`jax.tree_util.Partial`, a Python function
  taken apart by `curvax.closures`) is data; any other callable is static (`cacheable` False: programs for it are
  compiled per call)."""

  def __init__(self, fn: Callable[[Any], Any], spec: FlatSpec):
    self.fn, self.spec = fn, spec

  @property
  def cacheable(self):
    return is_pytree_callable(self.fn)

  def apply(self, v):
    return self.fn(v)

  def tree_flatten(self):
    if is_pytree_callable(self.fn):
      return (self.fn,), (True, None, self.spec)
    return (), (False, self.fn, self.spec)

  @classmethod
  def tree_unflatten(cls, aux, children):
    is_tree, fn, spec = aux
    return cls(children[0] if is_tree else fn, spec)


def as_operator(matvec, example=None) -> LinearOperator:
  """`matvec` as a `LinearOperator` on pytrees shaped like `example` (returned unchanged if it already is one).

  Args:
    matvec: a `LinearOperator` (then `example` is optional and only checked for its size), a
      `jax.tree_util.Partial` (data: compiled programs are reused), or any callable pytree -> pytree.
    example: a pytree with the operator's input structure, shapes and dtype; required for a plain callable.
  """
  if isinstance(matvec, LinearOperator) and example is None:
    return matvec
  if example is None:
    raise ValueError(
        f"a plain callable ({type(matvec).__name__}) carries no shapes: pass example= (a pytree shaped like its input)"
        " or build a curvax operator (curvax.hessian, curvax.ggn, curvax.matrix_operator)"
    )
  spec = FlatSpec.of(example)
  if isinstance(matvec, LinearOperator):
    if matvec.spec.size != spec.size:
      raise ValueError(f"example has {spec.size} entries but the operator acts on vectors of {matvec.spec.size}")
    return matvec
  if not callable(matvec):
    raise ValueError(f"matvec must be a LinearOperator or a callable, got {type(matvec).__name__}")
  fn = as_pytree_fn(matvec)
  # A callable `curvax.closures` cannot take apart stays static: compiled per call, and not retained after it.
  return FunctionOperator(fn if isinstance(fn, ClosureFn) or is_pytree_callable(matvec) else matvec, spec)


@jax.tree_util.register_pytree_node_class
class MatrixOperator(LinearOperator):
  """x ↦ A x for a dense symmetric [n, n] array A (a leaf): small problems, tests and checks against `eigh`."""

  def __init__(self, a_nxn: jax.Array):
    self.a_nxn = a_nxn
    self.spec = FlatSpec(jax.tree.structure(0), ((int(np.shape(a_nxn)[0]),),), (jnp.result_type(a_nxn).name,))

  def flat_matvec(self, x):
    return self.a_nxn @ x

  def nonfinite_inputs(self) -> str:
    finite = np.isfinite(np.asarray(jax.device_get(self.a_nxn)))
    return "" if finite.all() else f"the matrix has {int((~finite).sum())} non-finite entries"

  def apply(self, v):
    return self.a_nxn @ v

  def tree_flatten(self):
    return (self.a_nxn,), ()

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0])


def matrix_operator(a_nxn) -> MatrixOperator:
  """A dense symmetric matrix as an operator on [n] vectors (checked square and floating before any compute)."""
  a_nxn = jnp.asarray(a_nxn)
  if a_nxn.ndim != 2 or a_nxn.shape[0] != a_nxn.shape[1]:
    raise ValueError(f"matrix_operator needs a square [n, n] matrix, got shape {a_nxn.shape}")
  if not jnp.issubdtype(a_nxn.dtype, jnp.floating):
    raise ValueError(f"matrix_operator needs a real floating matrix, got dtype={a_nxn.dtype}")
  return MatrixOperator(a_nxn)


@functools.lru_cache(maxsize=None)
def _jitted(impl, static_argnames):
  return jax.jit(impl, static_argnames=static_argnames)


def run_program(impl: Callable, static_argnames: tuple, op: LinearOperator, *args, **kwargs):
  """Call `impl(op.flat_operator(), *args, **kwargs)` as a jitted program.

  A cacheable operator goes through one module-wide `jax.jit(impl)` (compiled once per operator structure and
  static options); a plain-callable operator through a fresh wrapper, so that the callable is not retained.
  """
  flat = op.flat_operator()
  if flat.cacheable:
    return _jitted(impl, tuple(static_argnames))(flat, *args, **kwargs)
  # The operator is closed over, not an argument: nothing but this wrapper refers to the callable.
  fresh = jax.jit(lambda *a, **k: impl(flat, *a, **k), static_argnames=tuple(static_argnames))
  return fresh(*args, **kwargs)


# Host callbacks by id: programs call `dispatch_callback(id, *values)` through `jax.debug.callback`, so the user's
# callable never enters a program's static structure.
_CALLBACKS: dict = {}
_CALLBACK_IDS = itertools.count()
_CALLBACK_LOCK = threading.Lock()


def register_callback(fn: Optional[Callable]) -> int:
  """Register a host callable; returns its id (-1 for None). Release it with `release_callback` after the run."""
  if fn is None:
    return -1
  with _CALLBACK_LOCK:
    cid = next(_CALLBACK_IDS) % (2**31 - 1)
    _CALLBACKS[cid] = fn
  return cid


def release_callback(cid: int) -> None:
  with _CALLBACK_LOCK:
    _CALLBACKS.pop(cid, None)


def dispatch_callback(cid, *values):
  """Host side of a program's progress report: call the registered callable with Python ints."""
  fn = _CALLBACKS.get(int(cid))
  if fn is not None:
    fn(*(int(v) for v in values))


def with_callback(callback: Optional[Callable], run: Callable[[Optional[jax.Array]], Any]):
  """Run `run(callback_id)`; with a callback, wait for the result before releasing it (its reports arrive during
  the computation). Without one the id is None: the program then holds no host callback, so the persistent
  compilation cache can store it (JAX skips executables with host callbacks), and no scalar is transferred."""
  if callback is None:
    return run(None)
  cid = register_callback(callback)
  try:
    out = run(np.int32(cid))
    jax.block_until_ready(out)
    return out
  finally:
    release_callback(cid)


def report(cid, *values):
  """In a program: send `values` to the host callback registered under the traced id `cid` (no-op for -1)."""
  jax.lax.cond(cid >= 0, lambda: jax.debug.callback(dispatch_callback, cid, *values), lambda: None)
