"""Curvature operators of any loss as data: the Hessian, the generalized Gauss–Newton and the empirical Fisher.

Contract: every constructor takes `(fn, params, batch)` with `params` any pytree of real floating arrays and `batch`
any pytree (a dict, a tuple `(x, y)`, an array) that `fn` reads, its array leaves holding the examples on axis 0;
`batches=[b1, b2]` (or, as before, a positional Python `list`) means their weighted average (`weights=`, normalized
to sum 1; equal by default), checked before any compute (`curvax.inputs`); nothing is read from the batch by name.
The result is a `curvax.operators.LinearOperator`: a pytree whose leaves are what its products need (linearization
residuals, weights) and whose static part is only structure, called on pytrees shaped like `params`. Every routine
that takes it (`curvax.lanczos`, `curvax.top_eigenvalues`, ...) compiles once per operator structure: another batch
or checkpoint of the same shapes compiles nothing, nor does a function passed as a `jax.tree_util.Partial`.

  * `hessian`: v ↦ Σ_b w_b H_b v, forward-over-reverse (Pearlmutter 1994, "Fast exact multiplication by the
    Hessian"): the gradient is linearized ONCE per batch with `jax.linearize(jax.grad(f), params)`, so a product
    is one tangent pass over stored residuals (about the activations of one training step per batch).
    `linearize=False` stores nothing and recomputes `jvp(grad f_b)` per product (O(one batch) memory).
  * `ggn`: G v = Σ_b w_b J_bᵀ H_out,b J_b v (Schraudolph 2002; Martens 2020, "New insights and perspectives on the
    natural gradient method", §8), J the Jacobian of the model's outputs and H_out the Hessian of the loss in the
    outputs: closed form for "softmax_cross_entropy" (per position (diag(p) − ppᵀ)·w_t/Σw, p = softmax(z)) and "mse"
    (2·w_t/(C·Σw)·I for the mean of (z − y)² over the C outputs of each position), else the linearized gradient
    of the given loss in the outputs (a JVP of its grad per product). Positive semidefinite whenever H_out is.
  * `empirical_fisher`: F v = (1/N) Σ_i ∇ℓ_i (∇ℓ_iᵀ v) for per-example losses ℓ_1..ℓ_N (Kunstner, Balles & Hennig
    2019, Eq. 3): the GGN of θ ↦ (ℓ_i)_i with H_out = I/N, one tangent pass and one transpose per product.
"""

from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from curvax.inputs import (  # noqa: F401  (as_batches, normalized_weights: clients import them here)
    NO_BATCH,
    as_batches,
    check_params,
    normalized_weights,
    scalar_loss,
)
from curvax.operators import LinearOperator, as_pytree_fn

GGN_LOSSES = ("softmax_cross_entropy", "mse")


def _check_callable(name, fn):
  if not callable(fn):
    raise ValueError(f"{name} must be a callable (params, batch) -> ..., got {type(fn).__name__}")


def _call(fn, params, batch):
  """`fn(params, batch)`: a module-level function, so `jax.eval_shape` of it reuses its trace for the same `fn`
  structure (a lambda made per call would be traced again every call)."""
  return fn(params, batch)


def _weights(batches, weights, spec):
  # Cast on the host and transfer: jnp.asarray compiles a program of its own for this (a conversion or a copy).
  return jax.device_put(np.asarray(normalized_weights(len(batches), weights), jnp.dtype(spec.dtype)))


# The loss enters as a pytree argument: the same function (and shapes) shares one compilation of the linearization,
# and the linearized map it returns has the same tree structure each time, so programs taking it are reused too.
@jax.jit
def _linearized_grad(loss_fn, params, batch):
  """(the linear map v ↦ Hv of one batch, its loss), linearized once under jit: the map is a
  `jax.tree_util.Partial` whose stored residuals are pytree leaves (an operand of later programs, not a constant);
  the loss rides along as the gradient's aux output (no extra pass), for `nonfinite_inputs`."""
  value_and_grad = jax.value_and_grad(lambda q: scalar_loss(loss_fn, q, batch))
  _, lin, loss = jax.linearize(lambda q: value_and_grad(q)[::-1], params, has_aux=True)  # (gradient, aux loss)
  return lin, loss


@jax.jit
def _linearized_softmax(model_fn, params, batch):
  """(softmax probabilities, the linear map v ↦ J v) of one batch's logits, linearized once under jit."""
  logits, jvp_lin = jax.linearize(lambda q: model_fn(q, batch), params)
  return jax.nn.softmax(logits, axis=-1), jvp_lin


@jax.jit
def _linearized_outputs(model_fn, params, batch):
  """(outputs, the linear map v ↦ J v) of one batch, linearized once under jit."""
  return jax.linearize(lambda q: model_fn(q, batch), params)


@jax.jit
def _linearized_output_grad(loss, outputs, batch):
  """The linear map u ↦ H_out u of a loss in the outputs: its gradient in the outputs, linearized once."""
  grad = jax.grad(lambda z: scalar_loss(loss, z, batch, "loss", "outputs, batch"))
  return jax.linearize(grad, outputs)[1]


def weighted_sum(items, ws, product):
  """Σ_b w_b · product(item_b) over pytrees; with one item its normalized weight is exactly 1, so the product is
  returned as is (no extra pass over n entries)."""
  items = list(items)
  if len(items) == 1:
    return product(items[0])
  out = None
  for b, item in enumerate(items):
    term = jax.tree.map(lambda x: ws[b].astype(x.dtype) * x, product(item))
    out = term if out is None else jax.tree.map(jnp.add, out, term)
  return out


@jax.tree_util.register_pytree_node_class
class HessianOperator(LinearOperator):
  """v ↦ Σ_b w_b H_b v from each batch's linearized gradient (residuals and weights are leaves)."""

  def __init__(self, lins, weights, spec, losses=None):
    self.lins, self.weights, self.spec, self.losses = tuple(lins), weights, spec, losses

  def apply(self, v):
    return weighted_sum(self.lins, self.weights, lambda lin: lin(v))

  def nonfinite_inputs(self) -> str:
    return "" if self.losses is None else describe_losses("loss_fn", self.losses)

  def checked_inputs(self) -> dict:
    return {} if self.losses is None else {"losses": self.losses}

  def tree_flatten(self):
    return (self.lins, self.weights, self.losses), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], children[1], aux[0], children[2])


def describe_losses(name: str, losses) -> str:
  """The message "loss_fn(params, batch) is nan for batch(es) [0]: ..." naming the non-finite losses, else ""."""
  values = np.asarray(jax.device_get(list(losses)), np.float64).reshape(len(losses), -1)
  bad = [i for i, v in enumerate(values) if not np.all(np.isfinite(v))]
  if not bad:
    return ""
  value = values[bad[0]]
  shown = value[0] if value.size == 1 else value.tolist()
  return f"{name}(params, batch) is {shown} for batch(es) {bad}: the loss is not finite there (a log of 0, a 0/0?)"


@jax.tree_util.register_pytree_node_class
class JvpHessianOperator(LinearOperator):
  """v ↦ Σ_b w_b d/dε ∇L_b(θ + εv): one jvp of the gradient per product, nothing stored between products."""

  def __init__(self, loss_fn, params, batches, weights, spec):
    self.loss_fn, self.params, self.batches, self.weights, self.spec = loss_fn, params, tuple(batches), weights, spec

  def apply(self, v):
    grad = jax.grad(lambda q, b: scalar_loss(self.loss_fn, q, b))  # a non-scalar loss fails at the first trace
    return weighted_sum(self.batches, self.weights, lambda b: jax.jvp(lambda q: grad(q, b), (self.params,), (v,))[1])

  def nonfinite_inputs(self) -> str:
    return describe_losses("loss_fn", [self.loss_fn(self.params, b) for b in self.batches])

  def tree_flatten(self):
    return (self.loss_fn, self.params, self.batches, self.weights), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(*children, aux[0])


def hessian(
    loss_fn: Callable[[Any, Any], jax.Array],
    params: Any,
    batch: Any = NO_BATCH,
    *,
    batches: Optional[Sequence[Any]] = None,
    weights: Optional[Sequence[float]] = None,
    linearize: bool = True,
) -> LinearOperator:
  """The Hessian of `loss_fn` at `params` as an operator v ↦ Hv (forward-over-reverse, Pearlmutter 1994).

  Args:
    loss_fn: `loss_fn(params, batch) -> scalar`.
    params: the point θ (pytree of real floating arrays).
    batch: one batch (any pytree; its array leaves hold the examples on axis 0), or a Python list of batches (as
      `batches`; a list whose elements differ in structure, like `[x, y]`, is refused: pass a tuple).
    batches: several batches, explicitly: then H = Σ_b w_b H_b, the Hessian of the weighted average of the
      per-batch losses. Give `batch` or `batches`.
    weights: per-batch weights (normalized to sum 1); None: equal weights.
    linearize: True: linearize the gradient once per batch (each product = one tangent pass over stored residuals).
      False: `jax.jvp` of the gradient per product (nothing stored).

  Returns:
    A `HessianOperator` (or `JvpHessianOperator`) on pytrees shaped like `params`.
  """
  _check_callable("loss_fn", loss_fn)
  batches = as_batches(batch, batches)
  spec = check_params(params)
  ws = _weights(batches, weights, spec)
  fn = as_pytree_fn(loss_fn)
  if linearize:
    lins, losses = zip(*[_linearized_grad(fn, params, b) for b in batches])
    return HessianOperator(lins, ws, spec, losses)
  return JvpHessianOperator(fn, params, batches, ws, spec)


def softmax_ce_output_hvp(p, w, u):
  """(diag(p) − p pᵀ) u · w per position: ∂²/∂z² of −log softmax(z)_y is diag(p) − ppᵀ for any label y."""
  hu = p * u - p * jnp.sum(p * u, axis=-1, keepdims=True)
  return hu * w[..., None]


def _scaled_output_hvp(w, u):
  """w_t · u per position (w broadcast over the trailing output axis when it has one less dimension than u)."""
  return u * (w[..., None] if w.ndim < u.ndim else w)


@jax.tree_util.register_pytree_node_class
class GaussNewtonOperator(LinearOperator):
  """v ↦ Σ_b w_b J_bᵀ H_out,b J_b v from each batch's linearized outputs: per product one tangent pass (J v), the
  output Hessian's product (a `jax.tree_util.Partial` of stored arrays, or a linearized gradient), and the
  transpose (Jᵀ u, a VJP over the same residuals)."""

  def __init__(self, lins, out_hvps, weights, spec):
    self.lins, self.out_hvps, self.weights, self.spec = tuple(lins), tuple(out_hvps), weights, spec

  def apply(self, v):
    primals = jax.tree.unflatten(
        self.spec.treedef, [jax.ShapeDtypeStruct(s, d) for s, d in zip(self.spec.shapes, self.spec.dtypes)]
    )

    def one(b):
      hu = self.out_hvps[b](self.lins[b](v))
      return jax.linear_transpose(self.lins[b], primals)(hu)[0]

    return weighted_sum(range(len(self.lins)), self.weights, one)

  def nonfinite_inputs(self) -> str:
    bad = [
        b
        for b, h in enumerate(self.out_hvps)
        if not all(np.isfinite(jax.device_get(x)).all() for x in jax.tree.leaves(h))
    ]
    if not bad:
      return ""
    return f"the model's outputs (or the output Hessian built from them) are not finite for batch(es) {bad}"

  def tree_flatten(self):
    return (self.lins, self.out_hvps, self.weights), (self.spec,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(*children, aux[0])


def position_weights(shape_without_classes, dtype, output_weights, batch):
  """w_t / Σ_t w_t over the output positions (all 1 without `output_weights`); zero if every weight is 0."""
  if output_weights is None:
    w = jnp.ones(shape_without_classes, dtype)
  else:
    w = jnp.asarray(output_weights(batch))
    if w.shape != tuple(shape_without_classes):
      raise ValueError(
          f"output_weights(batch) has shape {w.shape}; it must give one weight per output position, "
          f"shape {tuple(shape_without_classes)} (the outputs' shape without the class axis)"
      )
    w = w.astype(dtype)
  total = jnp.sum(w)
  return w / jnp.where(total > 0, total, 1).astype(dtype)


def ggn(
    model_fn: Callable[[Any, Any], Any],
    params: Any,
    batch: Any = NO_BATCH,
    *,
    batches: Optional[Sequence[Any]] = None,
    loss: Union[str, Callable[[Any, Any], jax.Array]] = "softmax_cross_entropy",
    weights: Optional[Sequence[float]] = None,
    output_weights: Optional[Callable[[Any], jax.Array]] = None,
) -> LinearOperator:
  """Generalized Gauss–Newton products G v = Jᵀ H_out J v (Schraudolph 2002; Martens 2020, §8).

  The outputs are linearized once per batch (`jax.linearize`); a product is J v (the tangent pass), H_out u, and
  Jᵀ (`jax.linear_transpose` of the same linear map): no forward pass per product, no dense Jacobian.

  Args:
    model_fn: `model_fn(params, batch) -> outputs`; for a named loss an array [..., C] (logits or predictions,
      C outputs per position), for a callable loss any pytree it reads.
    params: the point θ.
    batch, batches: one batch, or several (weighted average), as in `hessian`.
    loss: "softmax_cross_entropy" (the mean over positions of −log softmax(z)_y; H_out = diag(p) − ppᵀ per
      position, independent of the labels), "mse" (the mean over all entries of (z − y)²; H_out = 2I/(C·N)), or a
      callable `loss(outputs, batch) -> scalar`, whose Hessian in the outputs is then linearized once per batch
      (the GGN is PSD only where that Hessian is).
    weights: per-batch weights (normalized to sum 1); None: equal.
    output_weights: for a named loss, `output_weights(batch) -> [...]` weights of the positions (e.g. a padding
      mask `batch["targets"] > 0`): the loss is then Σ_t w_t ℓ_t / Σ_t w_t. Not allowed with a callable loss
      (weight the positions inside it).

  Returns:
    A `GaussNewtonOperator` on pytrees shaped like `params`.
  """
  _check_callable("model_fn", model_fn)
  if isinstance(loss, str):
    if loss not in GGN_LOSSES:
      raise ValueError(f"loss={loss!r} is not a named loss; valid: {list(GGN_LOSSES)} or a callable (outputs, batch)")
  elif not callable(loss):
    raise ValueError(
        f"loss must be one of {list(GGN_LOSSES)} or a callable (outputs, batch), got {type(loss).__name__}"
    )
  elif output_weights is not None:
    raise ValueError("output_weights applies to the named losses only; weight the positions inside the callable loss")
  if output_weights is not None and not callable(output_weights):
    raise ValueError(f"output_weights must be None or a callable batch -> weights, got {type(output_weights).__name__}")
  batches = as_batches(batch, batches)
  spec = check_params(params)
  ws = _weights(batches, weights, spec)
  fn = as_pytree_fn(model_fn)
  lins, out_hvps = [], []
  for b in batches:
    if isinstance(loss, str):
      shape = jax.eval_shape(_call, fn, params, b)
      if not isinstance(shape, jax.ShapeDtypeStruct) or len(shape.shape) < 1:
        raise ValueError(f"loss={loss!r} needs model_fn to return one array [..., C], got {shape}")
    if loss == "softmax_cross_entropy":
      p, lin = _linearized_softmax(fn, params, b)
      w = position_weights(p.shape[:-1], p.dtype, output_weights, b)
      out_hvps.append(jax.tree_util.Partial(softmax_ce_output_hvp, p, w))
    elif loss == "mse":
      outputs, lin = _linearized_outputs(fn, params, b)
      w = position_weights(outputs.shape[:-1], outputs.dtype, output_weights, b)
      out_hvps.append(jax.tree_util.Partial(_scaled_output_hvp, w * (2.0 / outputs.shape[-1])))
    else:
      outputs, lin = _linearized_outputs(fn, params, b)
      out_hvps.append(_linearized_output_grad(as_pytree_fn(loss), outputs, b))
    lins.append(lin)
  return GaussNewtonOperator(lins, out_hvps, ws, spec)


def empirical_fisher(
    per_example_loss_fn: Callable[[Any, Any], jax.Array],
    params: Any,
    batch: Any = NO_BATCH,
    *,
    batches: Optional[Sequence[Any]] = None,
    weights: Optional[Sequence[float]] = None,
) -> LinearOperator:
  """The empirical Fisher F v = (1/N) Σ_i ∇ℓ_i (∇ℓ_iᵀ v) (Kunstner, Balles & Hennig 2019, Eq. 3).

  Computed as the Gauss–Newton of θ ↦ (ℓ_1, ..., ℓ_N) with H_out = I/N: the per-example losses are linearized once
  (no [N, n] matrix of per-example gradients is stored); a product is one tangent pass and its transpose.

  Args:
    per_example_loss_fn: `per_example_loss_fn(params, batch) -> [N]` losses, one per example.
    params: the point θ.
    batch, batches: one batch, or several (weighted average), as in `hessian`.
    weights: per-batch weights (normalized to sum 1); None: equal.

  Returns:
    A `GaussNewtonOperator` on pytrees shaped like `params` (PSD, rank ≤ N per batch).
  """
  _check_callable("per_example_loss_fn", per_example_loss_fn)
  batches = as_batches(batch, batches)
  spec = check_params(params)
  ws = _weights(batches, weights, spec)
  fn = as_pytree_fn(per_example_loss_fn)
  lins, out_hvps = [], []
  for b in batches:
    shape = jax.eval_shape(_call, fn, params, b)
    if not isinstance(shape, jax.ShapeDtypeStruct) or len(shape.shape) != 1 or shape.shape[0] < 1:
      raise ValueError(f"per_example_loss_fn must return a [N] vector of per-example losses, got {shape}")
    losses, lin = _linearized_outputs(fn, params, b)
    lins.append(lin)
    out_hvps.append(
        jax.tree_util.Partial(_scaled_output_hvp, jnp.full(losses.shape, 1.0 / losses.shape[0], losses.dtype))
    )
  return GaussNewtonOperator(lins, out_hvps, ws, spec)


def dense_hessian(loss_fn: Callable[[Any, Any], jax.Array], params: Any, batch: Any) -> jax.Array:
  """The full [n, n] Hessian in `ravel_pytree(params)` order (`jax.hessian`); for tiny models and tests only."""
  flat, unravel = ravel_pytree(params)
  return jax.jit(jax.hessian(lambda x: loss_fn(unravel(x), batch)))(flat)


def dense_matrix(op: LinearOperator) -> jax.Array:
  """The [n, n] matrix of an operator, one product per column (tiny operators and tests only)."""
  return jax.vmap(op.flat_operator().flat_matvec)(jnp.eye(op.size, dtype=op.dtype)).T
