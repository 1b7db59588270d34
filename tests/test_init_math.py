"""init.math against papers' printed constants and independent computations (SciPy, closed forms)."""

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from init import math as im

# --- docs/science.md §1: truncated normal ---


def test_truncated_normal_factor_matches_jax_constant_and_scipy():
  # JAX hard-codes this factor in variance_scaling (jax/_src/nn/initializers.py).
  assert im.truncated_normal_std_factor() == pytest.approx(0.87962566103423978, abs=1e-12)
  assert im.truncated_normal_std_factor() == pytest.approx(scipy.stats.truncnorm(-2.0, 2.0).std(), abs=1e-12)
  # Variance factor 1 − 4φ(2)/(2Φ(2) − 1) (docs/science.md §1).
  assert im.truncated_normal_std_factor() ** 2 == pytest.approx(0.7737413, abs=1e-7)


def test_truncated_normal_factor_bert():
  # BERT's initializer_range = 0.02 realizes 0.017593; to realize σ pass 1.1368472·σ.
  assert round(0.02 * im.truncated_normal_std_factor(), 6) == 0.017593
  assert 1.0 / im.truncated_normal_std_factor() == pytest.approx(1.1368472, abs=1e-7)


@pytest.mark.parametrize("lower,upper", [(-1.0, 3.0), (-0.5, 0.5), (0.0, math.inf), (-math.inf, math.inf)])
def test_truncated_normal_factor_general_bounds(lower, upper):
  assert im.truncated_normal_std_factor(lower, upper) == pytest.approx(
      scipy.stats.truncnorm(lower, upper).std(), rel=1e-10
  )


def test_truncated_normal_factor_half_normal_closed_form():
  assert im.truncated_normal_std_factor(0.0, math.inf) == pytest.approx(math.sqrt(1 - 2 / math.pi), rel=1e-12)


@pytest.mark.parametrize("lower,upper", [(2.0, 2.0), (1.0, -1.0), (math.nan, 1.0)])
def test_truncated_normal_factor_rejects_bad_bounds(lower, upper):
  with pytest.raises(ValueError, match="lower|upper"):
    im.truncated_normal_std_factor(lower, upper)


# --- docs/science.md §2: SELU, activation second moments ---


def test_selu_constants_match_paper():
  lam, alpha = im.selu_constants()
  # Klambauer et al. 2017, λ01 and α01.
  assert lam == pytest.approx(1.0507009873554805, abs=1e-7)
  assert alpha == pytest.approx(1.6732632423543772, abs=1e-7)


def test_selu_alpha_matches_closed_form():
  # Klambauer et al. 2017: α01 = −√(2/π) / (erfc(1/√2)·e^{1/2} − 1), from E[s(z)] = 0 alone.
  closed = -math.sqrt(2 / math.pi) / (scipy.special.erfc(1 / math.sqrt(2)) * math.exp(0.5) - 1)
  assert im.selu_constants()[1] == pytest.approx(closed, abs=1e-10)


def test_selu_constants_solve_moment_equations_by_monte_carlo():
  lam, alpha = im.selu_constants()
  z = np.random.default_rng(0).standard_normal(2_000_000)
  s = lam * np.where(z > 0, z, alpha * np.expm1(np.minimum(z, 0)))
  assert abs(s.mean()) < 5e-3
  assert (s**2).mean() == pytest.approx(1.0, abs=5e-3)


def _quad_second_moment(f):
  pdf = scipy.stats.norm.pdf
  left = scipy.integrate.quad(lambda z: f(z) ** 2 * pdf(z), -np.inf, 0.0, epsabs=1e-13, epsrel=1e-12)[0]
  right = scipy.integrate.quad(lambda z: f(z) ** 2 * pdf(z), 0.0, np.inf, epsabs=1e-13, epsrel=1e-12)[0]
  return left + right


def _gelu(x):
  return 0.5 * x * (1.0 + scipy.special.erf(x / np.sqrt(2.0)))


def test_activation_second_moment_closed_forms():
  assert im.activation_second_moment(lambda x: x) == pytest.approx(1.0, abs=1e-12)
  # E[relu(z)²] = 1/2: the factor He et al. 2015 compensate with the 2 in 2/fan_in.
  assert im.activation_second_moment(lambda x: np.maximum(x, 0.0)) == pytest.approx(0.5, abs=1e-6)
  assert im.activation_second_moment(lambda x: x**2) == pytest.approx(3.0, abs=1e-10)  # E[z⁴]


def test_activation_second_moment_tanh_gelu_against_adaptive_quadrature():
  assert im.activation_second_moment(np.tanh) == pytest.approx(_quad_second_moment(np.tanh), abs=1e-8)
  assert im.activation_second_moment(np.tanh) == pytest.approx(0.394294, abs=1e-6)
  assert im.activation_second_moment(_gelu) == pytest.approx(_quad_second_moment(_gelu), abs=1e-7)
  # Closed form by Stein's lemma (E[z·g(z)] = E[g'(z)]) twice: E[z²Φ(z)²] = E[Φ²] + 2E[zΦφ] = 1/3 + E[φ(z)²]
  # = 1/3 + 1/(2π√3).
  assert im.activation_second_moment(_gelu) == pytest.approx(1 / 3 + 1 / (2 * math.pi * math.sqrt(3)), abs=1e-7)


def test_selu_constants_unit_second_moment_and_gauss_hermite_kink_error():
  lam, alpha = im.selu_constants()
  selu = lambda x: lam * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))
  assert _quad_second_moment(selu) == pytest.approx(1.0, abs=1e-10)
  # Gauss-Hermite (models.activations.second_moment) converges only algebraically across SELU's kink at 0
  # (the jump is in the second derivative of s²): ~2e-5 error at 200 nodes. This is why selu_constants uses
  # adaptive quadrature on half-lines. (ReLU is exact only by the symmetry of the nodes.)
  assert im.activation_second_moment(selu) == pytest.approx(1.0, abs=1e-4)


# --- docs/science.md §2: Xavier, LeCun, He ---


def test_xavier_lecun_he_std():
  assert im.xavier_std(768, 768) == pytest.approx(0.0360844, abs=1e-7)  # 1/√768, BERT-base width
  assert im.xavier_std(512, 2048) == pytest.approx(math.sqrt(2 / 2560), rel=1e-12)
  assert im.xavier_std(512, 2048, gain=0.5) == pytest.approx(0.5 * math.sqrt(2 / 2560), rel=1e-12)
  assert im.lecun_std(768) == pytest.approx(im.xavier_std(768, 768), rel=1e-12)  # equal for square
  assert im.he_std(512) == pytest.approx(0.0625, rel=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: im.xavier_std(0, 4),
        lambda: im.lecun_std(-1),
        lambda: im.he_std(2.5),
        lambda: im.xavier_std(4, 4, gain=0.0),
        lambda: im.xavier_std(True, 4),
    ],
)
def test_std_rejects_bad_input(call):
  with pytest.raises(ValueError, match="fan_in|fan_out|gain"):
    call()


# --- docs/science.md §6: DeepNorm (re-exported from models.residual) ---


@pytest.mark.parametrize("layers,alpha,beta", [(6, 1.8612, 0.3799), (18, 2.4495, 0.2887)])
def test_deepnorm_single_stack(layers, alpha, beta):
  # Wang et al. 2022, Table 1: α = (2N)^{1/4}, β = (8N)^{-1/4}, same for encoder-only and decoder-only.
  for arch, stack in (("decoder", "decoder"), ("encoder", "encoder")):
    consts = im.deepnorm_constants(arch, layers, layers)
    assert set(consts) == {stack}
    assert consts[stack][0] == pytest.approx(alpha, abs=1e-4)
    assert consts[stack][1] == pytest.approx(beta, abs=1e-4)


def test_deepnorm_encoder_decoder_follows_paper_not_torchscale():
  consts = im.deepnorm_constants("encoder_decoder", 6, 6)
  # encoder α = 0.81(N⁴M)^{1/16}, β = 0.87(N⁴M)^{-1/16}; decoder α = (3M)^{1/4}, β = (12M)^{-1/4}.
  assert consts["encoder"] == pytest.approx((1.4179, 0.4970), abs=1e-4)
  assert consts["decoder"] == pytest.approx((2.0598, 0.3433), abs=1e-4)
  # torchscale (microsoft/torchscale, architecture/encoder.py) divides the encoder's weights by
  # (N⁴M)^{1/16}/1.15, i.e. uses β = 1.15·(N⁴M)^{-1/16} where the paper has 0.87 (≈ 1/1.15).
  # We follow the paper.
  n, m = 12, 3
  consts = im.deepnorm_constants("encoder_decoder", n, m)
  assert consts["encoder"][1] / (n**4 * m) ** (-1 / 16) == pytest.approx(0.87, rel=1e-12)
  assert consts["encoder"][0] / (n**4 * m) ** (1 / 16) == pytest.approx(0.81, rel=1e-12)


# --- docs/science.md §7: depth-aware initializations ---


def test_tfixup_scales():
  scales = im.tfixup_scales(6, 6)
  assert scales["encoder"] == pytest.approx(0.4281, abs=1e-4)  # 0.67·6^{-1/4}
  assert scales["decoder"] == pytest.approx(0.3689, abs=1e-4)  # (9·6)^{-1/4}
  scales = im.tfixup_scales(16, 1)
  assert scales == pytest.approx({"encoder": 0.67 / 2, "decoder": 9**-0.25})


@pytest.mark.parametrize("n,m", [(0, 6), (6, 0), (6.0, 6)])
def test_tfixup_rejects_bad_depth(n, m):
  with pytest.raises(ValueError, match="num_encoder_layers|num_decoder_layers"):
    im.tfixup_scales(n, m)


def test_dsinit_bound():
  # γ = √(6/(768+768)) = 0.0625; layer l divides by √l, α multiplies.
  assert im.dsinit_bound(768, 768, layer=1) == pytest.approx(0.0625, rel=1e-12)
  assert im.dsinit_bound(768, 768, layer=4, alpha=0.5) == pytest.approx(0.015625, rel=1e-12)
  assert im.dsinit_bound(512, 2048, layer=9) == pytest.approx(math.sqrt(6 / 2560) / 3, rel=1e-12)
  # Layer 1 with α = 1 is exactly Xavier uniform: realized std b/√3 = xavier_std.
  assert im.dsinit_bound(512, 2048, 1) / math.sqrt(3) == pytest.approx(im.xavier_std(512, 2048), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(layer=0), "layer"),
        (dict(layer=-1), "layer"),
        (dict(layer=1, alpha=0.0), "alpha"),
        (dict(layer=1, alpha=1.5), "alpha"),
        (dict(layer=1, alpha=-0.1), "alpha"),
    ],
)
def test_dsinit_bound_rejects_bad_input(kwargs, match):
  with pytest.raises(ValueError, match=match):
    im.dsinit_bound(64, 64, **kwargs)


def test_fixup_scale():
  assert im.fixup_scale(16, 2) == pytest.approx(0.25, rel=1e-12)  # L^{-1/2}
  assert im.fixup_scale(16, 3) == pytest.approx(0.5, rel=1e-12)  # L^{-1/4}
  assert im.fixup_scale(1, 2) == 1.0
  with pytest.raises(ValueError, match="m"):
    im.fixup_scale(16, 1)
  with pytest.raises(ValueError, match="num_layers"):
    im.fixup_scale(0, 2)
