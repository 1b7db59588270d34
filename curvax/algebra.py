"""Operators compose: `A @ v`, `A + B`, `A - B`, `c * A`, `A / c`, `A + lam * identity_like(A)`,
`diagonal_preconditioned(A, d)` (D A D), and convert to a `scipy.sparse.linalg.LinearOperator` (`to_scipy`).

Contract: a sum of scaled operators is a `LinearCombination`, itself a `LinearOperator` and a pytree: its terms and
its coefficients ([T] array) are leaves, so `A + lam * I` for another `lam`, or for another checkpoint's A of the
same structure, runs the same compiled programs. `diagonal_preconditioned(A, d)` is v ↦ D A D v with D = diag(d),
the symmetric form P^{-1/2} A P^{-1/2} of P⁻¹A for a diagonal preconditioner P = D⁻² (its eigenvalues are P⁻¹A's):
A and the [n] vector d are leaves. Its product is Σ_t c_t A_t v on the same pytree (the terms must act
on the same structure, shapes and dtypes); sums of symmetric operators stay symmetric, which every curvax routine
assumes. `identity_like(A)` is the identity on A's inputs (no leaves). `A @ v` takes a pytree shaped like A's input,
a flat [n] vector, or an [n, k] matrix of columns. `to_scipy(A)` imports scipy only when called (curvax itself
imports only jax and numpy) and runs each product through one compiled program on the flat vector. Only jax and
numpy.
"""

import functools
import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curvax.operators import ALGEBRA, FlatSpec, LinearOperator


def _coefficient(c, dtype):
  """A scalar coefficient in the operator's dtype: a host number stays a numpy scalar (no device op, no compile)."""
  if isinstance(c, numbers.Number) and not isinstance(c, bool):
    return np.asarray(c, dtype)[()]
  c = jnp.asarray(c)
  if c.shape != ():
    raise TypeError(f"an operator can be scaled by a scalar only, got an array of shape {c.shape}")
  return c.astype(dtype)


def _terms(op) -> tuple:
  """(operators, coefficients as scalars) of `op` seen as a linear combination."""
  if isinstance(op, LinearCombination):
    return op.terms, list(op.coeffs)
  return (op,), [np.asarray(1, op.dtype)[()]]


def _combination(terms, coeffs, spec) -> "LinearCombination":
  """The coefficients as one [T] array: numpy when all are host scalars, else a jax array (traced ones)."""
  if all(isinstance(c, (np.ndarray, np.generic)) for c in coeffs):
    return LinearCombination(terms, np.asarray(coeffs, spec.dtype), spec)
  return LinearCombination(terms, jnp.stack([jnp.asarray(c, spec.dtype) for c in coeffs]), spec)


@jax.tree_util.register_pytree_node_class
class LinearCombination(LinearOperator):
  """v ↦ Σ_t c_t A_t v over operators on the same pytree structure (terms and coefficients are leaves)."""

  def __init__(self, terms, coeffs, spec):
    self.terms, self.coeffs, self.spec = tuple(terms), coeffs, spec

  @property
  def cacheable(self):
    return all(t.cacheable for t in self.terms)

  def apply(self, v):
    out = None
    for t, term in enumerate(self.terms):
      part = jax.tree.map(lambda x, t=t: self.coeffs[t].astype(x.dtype) * x, term.apply(v))
      out = part if out is None else jax.tree.map(jnp.add, out, part)
    return out

  def flat_matvec(self, x):
    return sum(
        self.coeffs[t].astype(x.dtype) * term.flat_operator().flat_matvec(x) for t, term in enumerate(self.terms)
    )

  def nonfinite_inputs(self) -> str:
    return "; ".join(s for s in (t.nonfinite_inputs() for t in self.terms) if s)

  def checked_inputs(self) -> dict:
    return {f"term {t} {k}": v for t, term in enumerate(self.terms) for k, v in term.checked_inputs().items()}

  def tree_flatten(self):
    return (self.terms, self.coeffs), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], children[1], aux[0])


@jax.tree_util.register_pytree_node_class
class IdentityOperator(LinearOperator):
  """v ↦ v on pytrees shaped like `spec` (use `identity_like`)."""

  def __init__(self, spec: FlatSpec):
    self.spec = spec

  def apply(self, v):
    return v

  def flat_matvec(self, x):
    return x

  def tree_flatten(self):
    return (), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(aux[0])


def identity_like(op: LinearOperator) -> IdentityOperator:
  """The identity on `op`'s inputs: `op + lam * curvax.identity_like(op)` is A + λI (a damped curvature)."""
  if not isinstance(op, LinearOperator):
    raise ValueError(f"identity_like needs a curvax operator, got {type(op).__name__}")
  return IdentityOperator(op.spec)


@jax.tree_util.register_pytree_node_class
class PreconditionedOperator(LinearOperator):
  """v ↦ D A D v with D = diag(`scale`) (use `diagonal_preconditioned`); `inner` (A) and `scale` [n] are leaves."""

  def __init__(self, inner: LinearOperator, scale: jax.Array, spec: FlatSpec):
    self.inner, self.scale, self.spec = inner, scale, spec

  def flat_matvec(self, x):
    dtype = self.inner.spec.dtype
    d = self.scale.astype(dtype)
    return (d * self.inner.flat_matvec(d * x.astype(dtype))).astype(self.spec.dtype)

  def flat_operator(self):
    inner = self.inner.flat_operator()
    return PreconditionedOperator(inner, self.scale, inner.spec)

  def tree_flatten(self):
    return (self.inner, self.scale), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], children[1], aux[0])


def diagonal_preconditioned(op: LinearOperator, scale: Any) -> PreconditionedOperator:
  """D A D with D = diag(`scale`), a flat [n] vector in `jax.flatten_util.ravel_pytree` order (`ravel_leaves`):
  symmetric and similar to P⁻¹A for P = D⁻², so `top_eigenvalues` of it gives λ_max(P⁻¹A) (the preconditioned
  sharpness of Adam, P = diag(√v̂ + ε); Cohen et al. 2022). Acts on `op`'s pytrees; checked on the host (no compile)."""
  if not isinstance(op, LinearOperator):
    raise ValueError(f"diagonal_preconditioned needs a curvax operator, got {type(op).__name__}")
  if tuple(np.shape(scale)) != (op.size,):
    raise ValueError(f"scale must be a flat [{op.size}] vector (the operator's size), got shape {np.shape(scale)}")
  return PreconditionedOperator(op, scale, op.spec)


def add(a: LinearOperator, b: Any, sign: float = 1.0):
  """a + sign·b for two operators on the same structure; NotImplemented for anything else."""
  if not isinstance(b, LinearOperator):
    return NotImplemented
  if (a.spec.treedef, a.spec.shapes, a.spec.dtypes) != (b.spec.treedef, b.spec.shapes, b.spec.dtypes):
    raise ValueError(
        f"operators act on different inputs (shapes {a.spec.shapes} vs {b.spec.shapes}, dtypes {a.spec.dtypes} vs "
        f"{b.spec.dtypes}): only operators on the same pytree structure, shapes and dtypes can be added"
    )
  (ta, ca), (tb, cb) = _terms(a), _terms(b)
  return _combination(ta + tb, ca + [np.asarray(sign, a.dtype)[()] * c for c in cb], a.spec)


def scale(a: LinearOperator, c: Any):
  """c·a for a scalar c; NotImplemented for an operator (a product of operators is not symmetric in general)."""
  if isinstance(c, LinearOperator):
    return NotImplemented
  c = _coefficient(c, a.dtype)
  terms, coeffs = _terms(a)
  return _combination(terms, [c * x for x in coeffs], a.spec)


@jax.jit
def _flat_product(op, x):
  return op.flat_matvec(x.astype(op.dtype))


@jax.jit
def _flat_columns(op, x_nxk):
  return jax.vmap(op.flat_matvec, in_axes=1, out_axes=1)(x_nxk.astype(op.dtype))


def matmul(op: LinearOperator, v: Any):
  """`op @ v`: a pytree shaped like op's input gives `op(v)`; a flat [n] vector A v; an [n, k] matrix A V."""
  spec = op.spec
  if jax.tree.structure(v) == spec.treedef and tuple(np.shape(x) for x in jax.tree.leaves(v)) == spec.shapes:
    return op(v)
  shape = np.shape(v) if isinstance(v, (jax.Array, np.ndarray)) else None
  if shape is not None and len(shape) in (1, 2) and shape[0] == spec.size:
    flat = op.flat_operator()
    program = _flat_product if len(shape) == 1 else _flat_columns
    if flat.cacheable:
      return program(flat, v)
    return program.__wrapped__(flat, jnp.asarray(v))  # a static callable: not cached (`curvax.operators`)
  raise ValueError(
      f"op @ v needs a pytree shaped like the operator's input (shapes {spec.shapes}), a flat [{spec.size}] vector "
      f"or an [{spec.size}, k] matrix; got {type(v).__name__} of shape {shape}"
  )


def to_scipy(op: LinearOperator):
  """`op` as a `scipy.sparse.linalg.LinearOperator` of shape (n, n) on flat vectors (`jax.flatten_util.ravel_pytree`
  order), for scipy's solvers (`eigsh`, `cg`, `minres`); symmetric, so `rmatvec` is `matvec`. scipy is imported here
  only, so curvax itself needs only jax and numpy."""
  try:
    from scipy.sparse import linalg as sparse_linalg  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("curvax.to_scipy needs scipy (pip install scipy); curvax itself does not") from e
  if not isinstance(op, LinearOperator):
    raise ValueError(f"to_scipy needs a curvax operator, got {type(op).__name__}")
  n, dtype = op.size, np.dtype(op.dtype)
  product = functools.partial(matmul, op)

  def matvec(x):
    return np.asarray(product(np.asarray(x, dtype).reshape(n)), dtype)

  def matmat(x):
    return np.asarray(product(np.asarray(x, dtype).reshape(n, -1)), dtype)

  return sparse_linalg.LinearOperator((n, n), matvec=matvec, rmatvec=matvec, matmat=matmat, rmatmat=matmat, dtype=dtype)


ALGEBRA.update(matmul=matmul, add=add, scale=scale)  # the operators' `@`, `+`, `-` and `*`
