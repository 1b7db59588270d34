"""Per-tensor initializers with explicit fans, in a registry behind `get_initializer(name, **hparams)`.

Contract: every initializer returned has the signature

  init(key, shape, dtype=jnp.float32, *, fan_in: int, fan_out: int) -> jax.Array

Fans are passed explicitly because Flax's DenseGeneral kernels for multi-head attention fold several axes
into one fan: q/k/v kernels are [d_model, heads, head_dim] (fan_in = d_model, fan_out = heads·head_dim) and
the output kernel is [heads, head_dim, d_model] (fan_in = heads·head_dim). JAX's default
`in_axis=-2, out_axis=-1` would count such a kernel wrongly; `fans(shape, in_axes, out_axes)` computes the
right pair from axis tuples. The input axes must lead (Flax's `kernel = in_shape + out_shape` layout):
`shape` must split as prod(shape[:k]) = fan_in, prod(shape[k:]) = fan_out for some k, checked before any
sampling. Each initializer samples the [fan_in, fan_out] matricization and reshapes it back, which only
matters for `orthogonal` (iid samplers are layout-free). Vectors (biases, norm gains) use fan_in = 1.

Each initializer's docstring states its REALIZED std (what `jnp.std` of a large sample gives), and
`realized_std(name, fan_in=..., fan_out=..., **hparams)` returns it, so scheme tests can check a built
model against its declared scheme. Sampling is delegated to `jax.nn.initializers`.

The two truncated normals differ on purpose (docs/science.md §1): `truncated_normal(std)` realizes `std` (as
JAX's variance_scaling does), `truncated_normal_tf(std)` realizes 0.8796·std (TF/BERT and
`jax.nn.initializers.truncated_normal` semantics: `std` is the std before truncation); `truncated_normal_3sigma(std)`
cuts at ±3·std instead (PyTorch's `trunc_normal_` as OLMo calls it) and realizes 0.98658·std.
"""

import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from init.math import he_std, lecun_std, truncated_normal_std_factor, xavier_std

Initializer = Callable[..., jax.Array]


def fans(shape: Sequence[int], in_axes: Sequence[int], out_axes: Sequence[int]) -> tuple[int, int]:
  """Fan-in and fan-out of a kernel whose input/output features span several axes.

  Args:
    shape: the kernel's shape.
    in_axes: axes contracted with the input (negative indices allowed); may be empty (fan 1).
    out_axes: axes that index the output; `in_axes` and `out_axes` must partition all axes.

  Returns:
    (fan_in, fan_out): products of the sizes along `in_axes` and `out_axes`.
  """
  shape = tuple(operator.index(s) for s in shape)
  ndim = len(shape)

  def normalize(name, axes):
    out = []
    for a in axes:
      a = operator.index(a)
      if not -ndim <= a < ndim:
        raise ValueError(f"{name} has axis {a} out of range for shape {shape}")
      out.append(a % ndim)
    if len(set(out)) != len(out):
      raise ValueError(f"{name}={tuple(axes)} repeats an axis")
    return out

  ins, outs = normalize("in_axes", in_axes), normalize("out_axes", out_axes)
  if set(ins) & set(outs):
    shared = sorted(set(ins) & set(outs))
    raise ValueError(f"in_axes={tuple(in_axes)} and out_axes={tuple(out_axes)} share axes {shared}")
  missing = sorted(set(range(ndim)) - set(ins) - set(outs))
  if missing:
    raise ValueError(f"axes {missing} of shape {shape} are in neither in_axes nor out_axes")
  return math.prod(shape[a] for a in ins), math.prod(shape[a] for a in outs)


def _check_shape_and_fans(shape, fan_in, fan_out) -> tuple[int, ...]:
  for name, fan in (("fan_in", fan_in), ("fan_out", fan_out)):
    if isinstance(fan, bool) or not isinstance(fan, numbers.Integral) or fan < 1:
      raise ValueError(f"{name} must be an integer >= 1, got {fan!r}")
  shape = tuple(operator.index(s) for s in shape)
  if not any(math.prod(shape[:k]) == fan_in and math.prod(shape[k:]) == fan_out for k in range(len(shape) + 1)):
    raise ValueError(
        f"shape {shape} does not split into leading input axes of size fan_in={fan_in} and trailing "
        f"output axes of size fan_out={fan_out}; compute fans with fans(shape, in_axes, out_axes) and "
        "put input axes first"
    )
  return shape


def _on_matrix(sample: Callable[[jax.Array, tuple[int, int], Any], jax.Array]) -> Initializer:
  """Wraps a [fan_in, fan_out] sampler into the module's initializer signature."""

  def init(key, shape, dtype=jnp.float32, *, fan_in: int, fan_out: int) -> jax.Array:
    shape = _check_shape_and_fans(shape, fan_in, fan_out)
    return sample(key, (int(fan_in), int(fan_out)), dtype).reshape(shape)

  return init


def _check_hparam(init_name: str, hp: str, value, *, positive: bool) -> float:
  ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
  if not ok or (positive and value <= 0):
    need = "a finite number > 0" if positive else "a finite number"
    raise ValueError(f"initializer {init_name!r}: {hp} must be {need}, got {value!r}")
  return float(value)


# --- makers: hyper-parameters -> initializer. Docstrings state the realized std. ---


def zeros() -> Initializer:
  """All zeros (Fixup's last branch layers, ZerO, biases). Realized std 0."""
  return _on_matrix(jax.nn.initializers.zeros)


def ones() -> Initializer:
  """All ones (norm gains). Realized std 0."""
  return _on_matrix(jax.nn.initializers.ones)


def constant(value: float) -> Initializer:
  """Every entry equals `value`. Realized std 0."""
  value = _check_hparam("constant", "value", value, positive=False)
  return _on_matrix(jax.nn.initializers.constant(value))


def normal(std: float) -> Initializer:
  """N(0, std²). Realized std = std."""
  std = _check_hparam("normal", "std", std, positive=True)
  return _on_matrix(jax.nn.initializers.normal(stddev=std))


def uniform(bound: float) -> Initializer:
  """U(−bound, bound). Realized std = bound/√3 (docs/science.md §1)."""
  bound = _check_hparam("uniform", "bound", bound, positive=True)
  # jax's uniform is U[0, scale); shift to be centred.
  base = jax.nn.initializers.uniform(scale=2.0 * bound)
  return _on_matrix(lambda key, shape, dtype: base(key, shape, dtype) - jnp.asarray(bound, dtype))


def truncated_normal(std: float) -> Initializer:
  """Truncated normal CORRECTED to realize std = `std` (like JAX's variance_scaling).

  Samples N(0, s²) with s = std/0.87962566 and resamples outside ±2s (docs/science.md §1), so entries lie
  within ±2.2737·std. Realized std = std.
  """
  std = _check_hparam("truncated_normal", "std", std, positive=True)
  return _on_matrix(jax.nn.initializers.truncated_normal(stddev=std / truncated_normal_std_factor()))


def truncated_normal_tf(std: float) -> Initializer:
  """Truncated normal with TF/BERT raw semantics (and `jax.nn.initializers.truncated_normal`'s).

  Samples N(0, std²) and resamples outside ±2·std, so `std` is the std BEFORE truncation: realized std
  = 0.87962566·std (BERT's initializer_range 0.02 realizes 0.017593; Devlin et al. 2019).
  """
  std = _check_hparam("truncated_normal_tf", "std", std, positive=True)
  return _on_matrix(jax.nn.initializers.truncated_normal(stddev=std))


def truncated_normal_3sigma(std: float) -> Initializer:
  """Truncated normal with PyTorch's `trunc_normal_(std=σ, a=−3σ, b=3σ)` semantics (OLMo's inits: Groeneveld et al.
  2024, OLMo Team 2025): N(0, std²) resampled outside ±3·std, `std` the std BEFORE truncation: realized std
  = 0.98658·std (`init.math.truncated_normal_std_factor(-3, 3)`)."""
  std = _check_hparam("truncated_normal_3sigma", "std", std, positive=True)
  return _on_matrix(jax.nn.initializers.truncated_normal(stddev=std, lower=-3.0, upper=3.0))


def _variance_scaling(scale: float, mode: str, distribution: str) -> Initializer:
  # On the [fan_in, fan_out] matrix JAX's default in_axis=-2, out_axis=-1 are exactly our fans.
  return _on_matrix(jax.nn.initializers.variance_scaling(scale, mode, distribution))


def xavier_uniform(gain: float = 1.0) -> Initializer:
  """U(−a, a), a = gain·√(6/(fan_in + fan_out)) (Glorot & Bengio 2010, Eq. 16).

  Realized std = gain·√(2/(fan_in + fan_out)).
  """
  gain = _check_hparam("xavier_uniform", "gain", gain, positive=True)
  return _variance_scaling(gain**2, "fan_avg", "uniform")


def xavier_normal(gain: float = 1.0) -> Initializer:
  """N(0, s²), s = gain·√(2/(fan_in + fan_out)), untruncated as in PyTorch's xavier_normal_
  (Glorot & Bengio 2010, Eq. 12 variance). Realized std = s."""
  gain = _check_hparam("xavier_normal", "gain", gain, positive=True)
  return _variance_scaling(gain**2, "fan_avg", "normal")


def lecun_uniform() -> Initializer:
  """U(−a, a), a = √(3/fan_in) (LeCun et al. 1998). Realized std = 1/√fan_in."""
  return _variance_scaling(1.0, "fan_in", "uniform")


def lecun_normal() -> Initializer:
  """N(0, 1/fan_in), untruncated (LeCun et al. 1998). Realized std = 1/√fan_in."""
  return _variance_scaling(1.0, "fan_in", "normal")


def he_uniform() -> Initializer:
  """U(−a, a), a = √(6/fan_in) (He et al. 2015, Eq. 10 variance). Realized std = √(2/fan_in)."""
  return _variance_scaling(2.0, "fan_in", "uniform")


def he_normal() -> Initializer:
  """N(0, 2/fan_in), untruncated as in PyTorch's kaiming_normal_ (He et al. 2015, Eq. 10).
  Realized std = √(2/fan_in)."""
  return _variance_scaling(2.0, "fan_in", "normal")


def orthogonal(gain: float = 1.0) -> Initializer:
  """Scaled random orthogonal matrix on the [fan_in, fan_out] matricization (Saxe et al. 2014).

  If fan_in >= fan_out the columns are orthonormal (WᵀW = gain²·I), else the rows (WWᵀ = gain²·I).
  ‖W‖_F² = gain²·min(fan_in, fan_out), so the realized (root-mean-square) std = gain/√max(fan_in, fan_out).
  """
  gain = _check_hparam("orthogonal", "gain", gain, positive=True)
  base = jax.nn.initializers.orthogonal(scale=gain, column_axis=-1)

  def sample(key, shape, dtype):
    # LAPACK's QR has no bfloat16/float16 kernels: factorize in float32, then cast.
    dtype = jnp.dtype(dtype)
    compute = dtype if dtype in (jnp.float32, jnp.float64) else jnp.float32
    return base(key, shape, compute).astype(dtype)

  return _on_matrix(sample)


# --- registry ---


class _Entry(NamedTuple):
  make: Callable[..., Initializer]
  std: Callable[..., float]  # (fan_in, fan_out, **hparams) -> realized std
  required: tuple[str, ...] = ()
  defaults: dict[str, float] = {}


_SQRT3 = math.sqrt(3.0)

INITIALIZERS: dict[str, _Entry] = {
    "zeros": _Entry(zeros, lambda fi, fo: 0.0),
    "ones": _Entry(ones, lambda fi, fo: 0.0),
    "constant": _Entry(constant, lambda fi, fo, value: 0.0, required=("value",)),
    "normal": _Entry(normal, lambda fi, fo, std: std, required=("std",)),
    "uniform": _Entry(uniform, lambda fi, fo, bound: bound / _SQRT3, required=("bound",)),
    "truncated_normal": _Entry(truncated_normal, lambda fi, fo, std: std, required=("std",)),
    "truncated_normal_tf": _Entry(
        truncated_normal_tf, lambda fi, fo, std: std * truncated_normal_std_factor(), required=("std",)
    ),
    "truncated_normal_3sigma": _Entry(
        truncated_normal_3sigma, lambda fi, fo, std: std * truncated_normal_std_factor(-3.0, 3.0), required=("std",)
    ),
    "xavier_uniform": _Entry(xavier_uniform, lambda fi, fo, gain: xavier_std(fi, fo, gain), defaults={"gain": 1.0}),
    "xavier_normal": _Entry(xavier_normal, lambda fi, fo, gain: xavier_std(fi, fo, gain), defaults={"gain": 1.0}),
    "lecun_uniform": _Entry(lecun_uniform, lambda fi, fo: lecun_std(fi)),
    "lecun_normal": _Entry(lecun_normal, lambda fi, fo: lecun_std(fi)),
    "he_uniform": _Entry(he_uniform, lambda fi, fo: he_std(fi)),
    "he_normal": _Entry(he_normal, lambda fi, fo: he_std(fi)),
    "orthogonal": _Entry(orthogonal, lambda fi, fo, gain: gain / math.sqrt(max(fi, fo)), defaults={"gain": 1.0}),
}


def _resolve(name: str, hparams: dict[str, Any]) -> tuple[_Entry, dict[str, Any]]:
  """Looks `name` up and completes/validates its hyper-parameter names (values are checked by the maker)."""
  if name not in INITIALIZERS:
    raise ValueError(f"unknown initializer {name!r}; valid: {sorted(INITIALIZERS)}")
  entry = INITIALIZERS[name]
  valid = set(entry.required) | set(entry.defaults)
  unknown = sorted(set(hparams) - valid)
  if unknown:
    raise ValueError(f"initializer {name!r} got unknown hyper-parameter(s) {unknown}; valid: {sorted(valid) or 'none'}")
  missing = [hp for hp in entry.required if hp not in hparams]
  if missing:
    raise ValueError(f"initializer {name!r} is missing required hyper-parameter(s) {missing}")
  return entry, {**entry.defaults, **hparams}


def get_initializer(name: str, **hparams) -> Initializer:
  """Builds the registered initializer `name` with its hyper-parameters.

  Args:
    name: a key of INITIALIZERS.
    **hparams: that initializer's hyper-parameters, e.g. std=0.02 for "normal", gain=β for "xavier_normal".

  Returns:
    init(key, shape, dtype=jnp.float32, *, fan_in, fan_out) -> jax.Array.

  Raises:
    ValueError: unknown name (lists valid names), unknown or missing hyper-parameters (names them),
      or an invalid hyper-parameter value.
  """
  entry, full = _resolve(name, hparams)
  return entry.make(**full)


def realized_std(name: str, *, fan_in: int, fan_out: int, **hparams) -> float:
  """The std that `get_initializer(name, **hparams)` realizes on a kernel with these fans.

  Args:
    name: a key of INITIALIZERS.
    fan_in: the kernel's fan-in (>= 1).
    fan_out: the kernel's fan-out (>= 1).
    **hparams: as for `get_initializer`.

  Returns:
    The documented realized std (0 for the constant initializers; root-mean-square for `orthogonal`).
  """
  entry, full = _resolve(name, hparams)
  entry.make(**full)  # validates the hyper-parameter values with the same messages as get_initializer
  for fan_name, fan in (("fan_in", fan_in), ("fan_out", fan_out)):
    if isinstance(fan, bool) or not isinstance(fan, numbers.Integral) or fan < 1:
      raise ValueError(f"{fan_name} must be an integer >= 1, got {fan!r}")
  return float(entry.std(int(fan_in), int(fan_out), **full))
