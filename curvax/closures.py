"""A loss written as a closure is compiled once per what it computes, not once per closure object.

Contract: `as_pytree_fn(fn)` returns a callable registered as a JAX pytree, so the jitted programs that take a loss
or a matvec as an argument (`curvax.hessian`'s linearization, `curvax.batch_sharpness`, `curvax.as_operator`) are
keyed on its structure:
  * a registered pytree callable (`jax.tree_util.Partial`, a curvax operator, a `LossFn` of the project) is itself;
  * a Python function (`def` or `lambda`, e.g. one a helper makes afresh on every call) or a `functools.partial` of
    one becomes a `ClosureFn`: its code object, globals and defaults are the key, and every value it captures is
    taken apart as a pytree. Arrays (jax or numpy) become leaves, traced like arguments: they are neither embedded in
    the program nor referenced by the compilation cache. Nested functions are taken apart the same way. Any other
    value must be hashable and keys the program by (type, value): numbers, strings, Flax modules, GraphDefs,
    functions of a library (these by identity; as with `jax.jit`'s static arguments, mutating such an object between
    calls is not seen). A container of such values (a list, a dict) is keyed by its contents and passed on as
    itself, so a side effect on it while the loss is traced reaches the caller's object; a container holding arrays
    is rebuilt around the traced leaves, as `jax.jit` rebuilds its arguments.
  * anything else, and a function capturing an unhashable non-array value (e.g. a mutable dataclass, whose contents
    could change unseen), itself, or having attributes, is wrapped in a `jax.tree_util.Partial`: keyed on the
    object's identity and kept alive by the compilation cache, as before.
Rebuilding runs the same code on the same values, so calling a `ClosureFn` computes what calling `fn` computes. Only
jax and numpy.
"""

import functools
import types
from typing import Any, Callable

import jax
import numpy as np

_ARRAY = "array"  # the key of a captured array: its value is a leaf
_EMPTY = "empty cell"  # a closure cell not yet assigned (a function defined before a variable it reads)
_MAX_DEPTH = 32


class _NotKeyable(Exception):
  """Raised while taking a function apart: it captures something that cannot key a program soundly."""


class _Globals:
  """A function's globals dict as a key: hashed and compared by identity (the module's namespace)."""

  def __init__(self, namespace):
    self.namespace = namespace

  def __hash__(self):
    return id(self.namespace)

  def __eq__(self, other):
    return isinstance(other, _Globals) and other.namespace is self.namespace


class _Same:
  """A captured value with no arrays or functions in it, keyed by its contents (`key`) but passed on as the very
  object, so that side effects on it (a list a loss appends to while traced) reach the caller's object."""

  def __init__(self, key, obj):
    self.key, self.obj = key, obj

  def __hash__(self):
    return hash(self.key)

  def __eq__(self, other):
    return isinstance(other, _Same) and type(other.obj) is type(self.obj) and other.key == self.key


def _is_array(x) -> bool:
  return isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer))


def _is_data(x) -> bool:
  """True for a leaf that is neither an array nor a function to take apart: it keys the program by value."""
  return not (_is_array(x) or isinstance(x, (types.FunctionType, functools.partial)))


def _encode(x, leaves: list, stack: tuple):
  """The hashable key of a value, appending its arrays to `leaves` (pytree leaf order)."""
  parts, treedef = jax.tree_util.tree_flatten(x)
  if jax.tree_util.treedef_is_leaf(treedef) and parts:
    return _encode_leaf(parts[0], leaves, stack)
  try:
    hash(treedef)
  except TypeError:
    raise _NotKeyable(f"a pytree node with unhashable static data ({treedef})") from None
  if all(_is_data(p) for p in parts):  # a container of plain values: keyed by them, passed on as itself
    return ("same", _Same((treedef, tuple(_encode_leaf(p, [], stack) for p in parts)), x))
  return ("tree", treedef, tuple(_encode_leaf(p, leaves, stack) for p in parts))


def _encode_leaf(x, leaves: list, stack: tuple):
  if _is_array(x):
    leaves.append(x)
    return _ARRAY
  if isinstance(x, types.FunctionType):
    return _encode_function(x, leaves, stack)
  if isinstance(x, functools.partial):
    if len(stack) > _MAX_DEPTH:
      raise _NotKeyable("nested too deep")
    inner = stack + (id(x),)
    return (
        "partial",
        _encode_leaf(x.func, leaves, inner),
        _encode(x.args, leaves, inner),
        _encode(x.keywords, leaves, inner),
    )
  try:
    hash(x)
  except TypeError:
    raise _NotKeyable(f"an unhashable {type(x).__name__}") from None
  return ("value", type(x), x)


def _encode_function(fn, leaves: list, stack: tuple):
  if id(fn) in stack or len(stack) > _MAX_DEPTH:
    raise _NotKeyable("a function that captures itself")
  if set(vars(fn)) - {"__wrapped__"}:
    raise _NotKeyable("a function with attributes")  # its code may read them; a rebuilt copy would not have them
  inner = stack + (id(fn),)
  cells = []
  for cell in fn.__closure__ or ():
    try:
      contents = cell.cell_contents
    except ValueError:
      cells.append(_EMPTY)
      continue
    cells.append(_encode(contents, leaves, inner))
  return (
      "function",
      fn.__code__,
      _Globals(fn.__globals__),
      fn.__name__,
      fn.__qualname__,
      _encode(fn.__defaults__, leaves, inner),
      _encode(fn.__kwdefaults__, leaves, inner),
      tuple(cells),
  )


def _decode(key, leaves):
  """The value `key` describes, taking its arrays from the iterator `leaves` (the inverse of `_encode`)."""
  kind = key[0] if isinstance(key, tuple) else key
  if key == _ARRAY:
    return next(leaves)
  if kind == "value":
    return key[2]
  if kind == "same":
    return key[1].obj
  if kind == "tree":
    return jax.tree_util.tree_unflatten(key[1], [_decode(k, leaves) for k in key[2]])
  if kind == "partial":
    func, args, keywords = (_decode(k, leaves) for k in key[1:])
    return functools.partial(func, *args, **keywords)
  _, code, namespace, name, qualname, defaults, kwdefaults, cells = key
  defaults, kwdefaults = _decode(defaults, leaves), _decode(kwdefaults, leaves)
  closure = tuple(types.CellType() if c == _EMPTY else types.CellType(_decode(c, leaves)) for c in cells)
  fn = types.FunctionType(code, namespace.namespace, name, defaults, closure or None)
  fn.__kwdefaults__, fn.__qualname__ = kwdefaults, qualname
  return fn


@jax.tree_util.register_pytree_node_class
class ClosureFn:
  """A Python function as data: the static key (code, globals, defaults, captured non-array values) and the captured
  arrays as leaves; calling it rebuilds the function around the (possibly traced) leaves."""

  def __init__(self, key, leaves):
    self.key, self.leaves = key, tuple(leaves)
    self._fn = None

  @classmethod
  def of(cls, fn: Callable) -> "ClosureFn":
    leaves = []
    key = _encode_leaf(fn, leaves, ())
    return cls(key, leaves)

  def __call__(self, *args, **kwargs):
    if self._fn is None:
      self._fn = _decode(self.key, iter(self.leaves))
    return self._fn(*args, **kwargs)

  def tree_flatten(self):
    return self.leaves, self.key

  @classmethod
  def tree_unflatten(cls, key, leaves):
    return cls(key, leaves)


def is_pytree_callable(fn) -> bool:
  """True for callables that are registered pytrees (e.g. `jax.tree_util.Partial`, `LinearOperator`s)."""
  return not jax.tree_util.treedef_is_leaf(jax.tree.structure(fn)) or isinstance(fn, jax.tree_util.Partial)


def as_pytree_fn(fn: Callable) -> Any:
  """`fn` as a jit argument keyed on what it computes (module docstring): itself if it is a registered pytree, a
  `ClosureFn` for a Python function or `functools.partial`, else a `jax.tree_util.Partial` holding it."""
  if is_pytree_callable(fn):
    return fn
  if isinstance(fn, (types.FunctionType, functools.partial)):
    try:
      return ClosureFn.of(fn)
    except _NotKeyable:
      pass
  return jax.tree_util.Partial(fn)
