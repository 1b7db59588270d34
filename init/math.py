"""Closed forms and constants behind the project's initializers (docs/science.md §1, §2, §6, §7).

Contract: every function defined here is a pure Python/SciPy computation returning Python floats (or a dict
of them); nothing samples. Each one cites the paper (and equation) it implements,
and tests/test_init_math.py checks it against the paper's printed constants or an independent computation.

Two quantities are re-exported from the model layer, because the model needs them to build itself and
init/ sits above models/:
  * `activation_second_moment(f)` = models.activations.second_moment: E[f(z)^2], z ~ N(0, 1).
  * `deepnorm_constants(arch, N, M)` = models.residual.deepnorm_constants: DeepNet's (alpha, beta).

Own numerical code, and why: `selu_constants` solves the SELU fixed-point equations with
`scipy.integrate.quad` on each half-line rather than Gauss-Hermite, because SELU has a kink at 0 that
makes Gauss-Hermite converge only algebraically; the test cross-checks it against the paper's closed form
for alpha and its printed constants.
"""

import math

import scipy.integrate
import scipy.optimize
import scipy.stats

from models.activations import second_moment as activation_second_moment
from models.residual import deepnorm_constants

__all__ = [
    "activation_second_moment",
    "deepnorm_constants",
    "dsinit_bound",
    "fixup_scale",
    "he_std",
    "lecun_std",
    "selu_constants",
    "tfixup_scales",
    "truncated_normal_std_factor",
    "xavier_std",
]


def _check_positive_int(name: str, value) -> None:
  # bool is an int subclass; True as a layer count is a bug, not a 1.
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_positive_float(name: str, value) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def truncated_normal_std_factor(lower: float = -2.0, upper: float = 2.0) -> float:
  """Std of N(0, 1) truncated to [lower, upper] (docs/science.md §1).

  Standard truncated-normal moments (e.g. Johnson, Kotz & Balakrishnan 1994, "Continuous Univariate
  Distributions" Vol. 1, Ch. 13), with a = lower, b = upper, Z = Φ(b) − Φ(a):
    Var = 1 + (a·φ(a) − b·φ(b))/Z − ((φ(a) − φ(b))/Z)².
  For [−2, 2] this is √(1 − 4φ(2)/(2Φ(2) − 1)) = 0.87962566, the factor by which TensorFlow/BERT's
  `truncated_normal(stddev=σ)` (resample outside ±2σ) undershoots σ: BERT's 0.02 gives 0.017593
  (Devlin et al. 2019, `initializer_range`).

  Args:
    lower: lower truncation point in units of the untruncated std.
    upper: upper truncation point; must exceed `lower`.

  Returns:
    The std of the truncated distribution, in units of the untruncated std.
  """
  for name, value in (("lower", lower), ("upper", upper)):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
      raise ValueError(f"{name} must be a number, got {value!r}")
  if not lower < upper:
    raise ValueError(f"need lower < upper, got lower={lower!r}, upper={upper!r}")
  norm = scipy.stats.norm
  z = norm.cdf(upper) - norm.cdf(lower)
  # x·φ(x) -> 0 at ±inf, but inf·0 is nan in floating point.
  a_pdf_a = 0.0 if math.isinf(lower) else lower * norm.pdf(lower)
  b_pdf_b = 0.0 if math.isinf(upper) else upper * norm.pdf(upper)
  mean = (norm.pdf(lower) - norm.pdf(upper)) / z
  var = 1.0 + (a_pdf_a - b_pdf_b) / z - mean**2
  return float(math.sqrt(var))


def selu_constants() -> tuple[float, float]:
  """SELU's (λ, α) solved from its defining fixed point (Klambauer et al. 2017, "Self-Normalizing
  Neural Networks", §3 "Constructing Self-Normalizing Neural Networks", fixed point μ = 0, ν = 1).

  s(x) = λ·x for x > 0, λ·α·(eˣ − 1) otherwise; (λ, α) solve E[s(z)] = 0 and E[s(z)²] = 1 for
  z ~ N(0, 1). The expectations are computed with adaptive quadrature on each half-line (the kink at 0
  defeats Gauss-Hermite) and the 2×2 system is solved with `scipy.optimize.root`. The paper prints
  λ01 = 1.0507009873554805, α01 = 1.6732632423543772 (docs/science.md §2).

  Returns:
    (lambda, alpha) as Python floats.
  """
  pdf = scipy.stats.norm.pdf
  quad_opts = {"epsabs": 1e-14, "epsrel": 1e-13, "limit": 200}

  def expect(g, lo, hi):
    return scipy.integrate.quad(lambda z: g(z) * pdf(z), lo, hi, **quad_opts)[0]

  # The moments are linear/quadratic in (λ, λα); precompute the half-line integrals once.
  pos_1 = expect(lambda z: z, 0.0, math.inf)
  pos_2 = expect(lambda z: z * z, 0.0, math.inf)
  neg_1 = expect(lambda z: math.expm1(z), -math.inf, 0.0)
  neg_2 = expect(lambda z: math.expm1(z) ** 2, -math.inf, 0.0)

  def residual(params):
    lam, alpha = params
    mean = lam * (pos_1 + alpha * neg_1)
    second = lam**2 * (pos_2 + alpha**2 * neg_2)
    return [mean, second - 1.0]

  sol = scipy.optimize.root(residual, x0=[1.0, 1.0], method="hybr", tol=1e-15)
  if not sol.success:
    raise RuntimeError(f"SELU fixed-point solve failed: {sol.message}")
  lam, alpha = sol.x
  return float(lam), float(alpha)


def tfixup_scales(num_encoder_layers: int, num_decoder_layers: int) -> dict[str, float]:
  """T-Fixup's depth scales (Huang et al. 2020, "Improving Transformer Optimization Through Better
  Initialization", §3 "T-Fixup" initialization steps; docs/science.md §7).

  Applied on top of Xavier: in the encoder, attention value/output and both MLP matrices are scaled by
  0.67·N^{-1/4}; in the decoder, attention value/output (self and cross), both MLP matrices and the
  input embeddings by (9M)^{-1/4}. N=M=6 gives 0.4281 and 0.3689.

  Args:
    num_encoder_layers: N >= 1.
    num_decoder_layers: M >= 1.

  Returns:
    {"encoder": 0.67·N^{-1/4}, "decoder": (9M)^{-1/4}}.
  """
  _check_positive_int("num_encoder_layers", num_encoder_layers)
  _check_positive_int("num_decoder_layers", num_decoder_layers)
  return {
      "encoder": 0.67 * num_encoder_layers**-0.25,
      "decoder": (9.0 * num_decoder_layers) ** -0.25,
  }


def xavier_std(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
  """Glorot & Bengio 2010, Eq. 12 (averaged fans): std = gain·√(2/(fan_in + fan_out)).

  For d×d matrices this equals LeCun's 1/√d; BERT-base (d = 768) gives 0.0361 (docs/science.md §2).
  """
  _check_positive_int("fan_in", fan_in)
  _check_positive_int("fan_out", fan_out)
  _check_positive_float("gain", gain)
  return gain * math.sqrt(2.0 / (fan_in + fan_out))


def lecun_std(fan_in: int) -> float:
  """LeCun et al. 1998 ("Efficient BackProp", §4.6): std = 1/√fan_in keeps E[y²] = E[x²] for y = Wx."""
  _check_positive_int("fan_in", fan_in)
  return 1.0 / math.sqrt(fan_in)


def he_std(fan_in: int) -> float:
  """He et al. 2015 ("Delving Deep into Rectifiers", Eq. 10): std = √(2/fan_in), compensating ReLU's
  E[relu(z)²] = 1/2."""
  _check_positive_int("fan_in", fan_in)
  return math.sqrt(2.0 / fan_in)


def dsinit_bound(fan_in: int, fan_out: int, layer: int, alpha: float = 1.0) -> float:
  """Depth-scaled init bound (Zhang, Titov & Sennrich 2019, "Improving Deep Transformer with
  Depth-Scaled Initialization and Merged Attention", §3 "Depth-Scaled Initialization"; docs/science.md §7).

  Layer `l` (1-based) draws from U(−b, b) with b = γ·α/√l, γ = √(6/(fan_in + fan_out)) the Xavier
  uniform bound. The realized std is b/√3.

  Args:
    fan_in: input fan of the kernel, >= 1.
    fan_out: output fan of the kernel, >= 1.
    layer: 1-based layer index l >= 1.
    alpha: the paper's α in (0, 1].

  Returns:
    The uniform bound b.
  """
  _check_positive_int("fan_in", fan_in)
  _check_positive_int("fan_out", fan_out)
  _check_positive_int("layer (1-based)", layer)
  if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
    raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
  gamma = math.sqrt(6.0 / (fan_in + fan_out))
  return gamma * alpha / math.sqrt(layer)


def fixup_scale(num_layers: int, m: int) -> float:
  """Fixup's branch rescaling (Zhang, Dauphin & Ma 2019, "Fixup Initialization", §3, rule 2).

  Within each residual branch of `m` layers, the non-final layers' standard init is multiplied by
  L^{-1/(2m−2)} (L = number of residual branches); the last layer of each branch starts at 0.

  Args:
    num_layers: L >= 1, the number of residual branches.
    m: layers per branch, >= 2 (with m = 1 the exponent is undefined).

  Returns:
    L^{-1/(2m−2)}.
  """
  _check_positive_int("num_layers", num_layers)
  if isinstance(m, bool) or not isinstance(m, int) or m < 2:
    raise ValueError(f"m (layers per residual branch) must be an integer >= 2, got {m!r}")
  return float(num_layers ** (-1.0 / (2 * m - 2)))
