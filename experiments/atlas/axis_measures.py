"""The axis parts' measures and verdicts: pure functions of hand-checkable numbers, fixed before any run of these parts.

Fits. A power law y ∝ x^a is fitted by least squares of ln y on ln x (`loglog_slope`) over the points with x > 0 and
y > 0 finite (means over seeds); a verdict needs at least `MIN_POINTS` = 3 distinct x (two points always lie on a
power law), else it is inconclusive. A λ_max whose Lanczos residual bound exceeds `BOUND_TOL` = 10% of it (an
unconverged Ritz value) makes the verdict that reads it inconclusive.

width (λ_max at init against d_model per parameterization; Pre-LN, heads fixed, d_ff = 4d):
  W1 'mup_flat': under µP, λ_max(H) at init is flat in width: max/min over the widths ≤ `FLAT_RATIO` = 2 (Noci et al.
     2024, "Super consistency of neural network landscapes and learning rate transfer", arXiv:2402.17457: under µP
     the sharpness is largely independent of width, under NTK it is not; the atlas tests the step-0 point of that
     claim). SP and NTK: the fitted exponents of λ_max(H) and λ_max(P⁻¹H) against d, reported, no prediction.
     (µP's zero readout and W_q leave every weight below the readout without a gradient at step 0, so Adam's step-1
     preconditioner |g| + ε is ε there: µP's λ_max(P⁻¹H) is reported, not read.)
depth (at init against N layers per stack, N+N encoder-decoder, at the atlas's cpu width), Xiong et al. 2020,
  Theorem 1: the gradient of the last layer's FFN output weight W^{2,L} is O(d·√(ln d)) for Post-LN, independent of
  L, and O(d·√(ln d / L)) for Pre-LN, ∝ L^{-1/2}:
  D1 'grad': the fitted exponent of ‖∂ℓ/∂W^{2,L}‖_F (the decoder's last layer's mlp_out kernel; the encoder's is
     reported beside it) against N is `GRAD_SLOPES` (Post-LN + Xavier 0, Pre-LN −0.5) within ±`GRAD_TOL` = 0.25;
  D2 'lambda': the fitted exponent of λ_max(H) against N is `LAMBDA_SLOPES` (0, −1: the Gauss–Newton block of
     W^{2,L} is JᵀH_ℓJ, quadratic in its Jacobian, so its scale is the square of the gradient's) within
     ±`LAMBDA_TOL` = 0.5. DeepNorm, T-Fixup and Admin: exponents reported, no prediction.
transfer (final validation loss after a short run against the peak lr η, per parameterization × width):
  * the optimal lr of a width is the argmin over the η grid of the final validation loss, a diverged run's loss ∞
    (a crashed or missing run: no result; a width needs every η of the grid); ties go to the smaller η. An optimum
    at the grid's edge is censored: the true optimum may lie beyond it.
  * the shift from the smallest to the largest width in grid steps (index difference on the sorted grid; + =
    larger lr for the larger width) is an interval: exact between interior optima, open towards a censored side.
  T1 'mup_transfer': under µP the optimal lr moves by at most `MAX_SHIFT` = 1 grid step (a factor √10 at cpu) from
     the smallest to the largest width (Yang et al. 2022, "Tensor Programs V", Fig. 1: SP's optimum shifts with
     width, µP's does not): reproduced if every shift the interval allows is ≤ 1 step, not reproduced if every one is > 1, else
     inconclusive. SP's and NTK's shifts are reported.
trace (η(t)·λ_max(t) through warmup, `train.curvature_every`; descriptive, no prediction):
  * per run, the largest η(t)·λ_max(H)(t)/2 over the records with t ≤ T_w, or t ≤ `EARLY_STEPS` = 20 for a run
    without warmup (plain gradient descent's edge of stability ηλ = 2, Cohen et al. 2021, §2), and the largest
    η(t)·λ_max(P⁻¹H)(t)/((2 + 2β₁)/(1 − β₁)) (Adam's, 38 at β₁ = 0.9, Cohen et al. 2022; analysis/stability.py),
    where the records hold it; > 1 means past the threshold. Whether the run diverged is its sweep outcome.
Every verdict is the claims' (experiments/claims/study.py): 'reproduced', 'not reproduced' or 'inconclusive'.
"""

import math
from typing import Optional, Sequence

import numpy as np

from experiments import study

MIN_POINTS = 3  # distinct x a fitted exponent or a flatness ratio needs for a verdict
BOUND_TOL = 0.1  # a Lanczos residual bound above this fraction of λ_max: not converged
FLAT_RATIO = 2.0  # W1: max/min of µP's λ_max over the widths
GRAD_SLOPES = {"Post-LN + Xavier": 0.0, "Pre-LN": -0.5}  # D1: Xiong et al. 2020, Theorem 1
GRAD_TOL = 0.25
LAMBDA_SLOPES = {"Post-LN + Xavier": 0.0, "Pre-LN": -1.0}  # D2: the square of D1's
LAMBDA_TOL = 0.5
MAX_SHIFT = 1  # T1: grid steps
EARLY_STEPS = 20  # trace: the window of a run without warmup
PREDICTIONS = {
    "mup_flat": f"µP's λ_max(H) at init: max/min over widths ≤ {FLAT_RATIO:g}",
    "grad": f"exponent of ‖∂ℓ/∂W^(2,L)‖ vs N: Post-LN 0, Pre-LN −0.5, within ±{GRAD_TOL:g}",
    "lambda": f"exponent of λ_max(H) vs N: Post-LN 0, Pre-LN −1, within ±{LAMBDA_TOL:g}",
    "mup_transfer": f"µP's optimal lr moves by ≤ {MAX_SHIFT} grid step from the smallest to the largest width",
}


def _finite(x) -> bool:
  return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def verdict(ok: Optional[bool]) -> str:
  return study.INCONCLUSIVE if ok is None else study.REPRODUCED if ok else study.NOT_REPRODUCED


def _positive(xs: Sequence, ys: Sequence) -> tuple[list[float], list[float]]:
  pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if _finite(x) and _finite(y) and x > 0 and y > 0]
  return [p[0] for p in pairs], [p[1] for p in pairs]


def loglog_slope(xs: Sequence, ys: Sequence) -> Optional[float]:
  """The least-squares exponent a of y ∝ x^a over the points with x, y > 0 finite (None: fewer than 2 distinct x)."""
  x, y = _positive(xs, ys)
  if len(set(x)) < 2:
    return None
  return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def n_points(xs: Sequence, ys: Sequence) -> int:
  """The distinct x of the points a fit uses."""
  return len(set(_positive(xs, ys)[0]))


def converged(values: Sequence, bounds: Sequence) -> bool:
  """Whether every λ_max has a residual bound within BOUND_TOL of it (a missing bound: not converged)."""
  return all(_finite(v) and _finite(b) and abs(b) <= BOUND_TOL * abs(v) for v, b in zip(values, bounds))


def flatness(values: Sequence) -> Optional[float]:
  """max/min of positive finite values (None if fewer than 2 or one is ≤ 0 or not finite)."""
  if len(values) < 2 or not all(_finite(v) and v > 0 for v in values):
    return None
  return float(max(values) / min(values))


def decide_flat(values: Sequence, bounds: Sequence) -> str:
  """W1 on µP's λ_max per width (module docstring)."""
  ratio = flatness(values)
  if ratio is None or len(values) < MIN_POINTS or not converged(values, bounds):
    return study.INCONCLUSIVE
  return verdict(ratio <= FLAT_RATIO)


def decide_slope(
    xs: Sequence, ys: Sequence, expected: Optional[float], tol: float, bounds: Optional[Sequence] = None
) -> str:
  """Whether the fitted exponent is `expected` ± `tol` (inconclusive: no prediction, too few points, unconverged)."""
  slope = loglog_slope(xs, ys)
  if expected is None or slope is None or n_points(xs, ys) < MIN_POINTS:
    return study.INCONCLUSIVE
  if bounds is not None and not converged(ys, bounds):
    return study.INCONCLUSIVE
  return verdict(abs(slope - expected) <= tol)


def optimal_lr(loss_by_lr: dict[float, Optional[float]]) -> Optional[tuple[int, str]]:
  """(index of the optimal lr on the sorted grid, censoring '' | 'above' | 'below') of one width (module docstring).

  Args:
    loss_by_lr: every lr of the grid -> final validation loss (math.inf: diverged; None: crashed or missing).

  Returns:
    None if some lr has no result or every run diverged.
  """
  lrs = sorted(loss_by_lr)
  losses = [loss_by_lr[lr] for lr in lrs]
  if not lrs or any(v is None for v in losses) or not any(math.isfinite(v) for v in losses):
    return None
  best = min(range(len(lrs)), key=lambda i: (losses[i], i))  # ties: the smaller lr
  censored = "above" if best == len(lrs) - 1 and len(lrs) > 1 else "below" if best == 0 and len(lrs) > 1 else ""
  return best, censored


def lr_shift(small: Optional[tuple[int, str]], large: Optional[tuple[int, str]]) -> Optional[tuple[float, float]]:
  """The interval [lo, hi] of grid steps the optimum can move from the smallest width's to the largest's (module
  docstring); ±inf towards a censored side. None if either has no optimum."""
  if small is None or large is None:
    return None
  (i, ci), (j, cj) = small, large
  # the true index of a censored optimum is ≥ it ('above') or ≤ it ('below')
  i_lo, i_hi = (i, math.inf) if ci == "above" else (-math.inf, i) if ci == "below" else (i, i)
  j_lo, j_hi = (j, math.inf) if cj == "above" else (-math.inf, j) if cj == "below" else (j, j)
  return float(j_lo - i_hi), float(j_hi - i_lo)


def decide_transfer(shift: Optional[tuple[float, float]]) -> str:
  """T1: reproduced if every |shift| the interval allows is ≤ MAX_SHIFT, not reproduced if every one is above it."""
  if shift is None:
    return study.INCONCLUSIVE
  lo, hi = shift
  if -MAX_SHIFT <= lo and hi <= MAX_SHIFT:
    return study.REPRODUCED
  if lo > MAX_SHIFT or hi < -MAX_SHIFT:
    return study.NOT_REPRODUCED
  return study.INCONCLUSIVE


def max_ratio(steps: Sequence[int], values: Sequence, threshold: float, window: int) -> Optional[float]:
  """max over the records with step ≤ window of value/threshold (None if none is finite)."""
  v = [x / threshold for s, x in zip(steps, values) if s <= window and _finite(x)]
  return max(v) if v else None


def adam_threshold(beta1: float) -> float:
  """(2 + 2β₁)/(1 − β₁): Adam's preconditioned edge of stability (Cohen et al. 2022; analysis/stability.py)."""
  return (2 + 2 * beta1) / (1 - beta1)


def trace_window(warmup: int) -> int:
  """The steps the trace's maxima look at: the warmup, or EARLY_STEPS without one."""
  return warmup if warmup > 0 else EARLY_STEPS
