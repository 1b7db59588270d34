"""Tests for experiments/claims/identity_path.py, claim 4's verdict on synthetic numbers: every branch of the
verdict (the law, the MLP branch's σ² = 1, Pre-LN's kept path), the origin slope's Student-t interval and its
coverage, and the steps chained seed by seed. The claim end to end at tiny: tests/test_claims.py."""

import copy

import numpy as np
import pytest

from experiments import study
from experiments.claims import identity_path


def _identity_arm(factors, q_f, noise, seeds=3, first=1.0):
  """Per seed, c through sublayers whose steps multiply c by `factors` (times `first` at the first sublayer), plus
  deterministic noise of sd `noise`; q_in = 1 and q_F from `q_f` (attention, MLP alternating)."""
  rng = np.random.default_rng(0)
  c = np.empty((seeds, len(factors)))
  for s in range(seeds):
    prev = 1.0
    for k, f in enumerate(factors):
      prev = prev * f * (first if k == 0 else 1.0) + noise * rng.standard_normal()
      c[s, k] = prev
  kinds = ["self_attn", "mlp"] * (len(factors) // 2)
  return dict(
      kinds=kinds,
      c=c.mean(0).tolist(),
      c_per_seed=c.tolist(),
      q_in_per_seed=np.ones_like(c).tolist(),
      q_f_per_seed=np.broadcast_to(q_f, c.shape).tolist(),
      predicted=np.cumprod(factors).tolist(),
      seeds=list(range(seeds)),
  )


def _identity(law=1.0, sigma2_mlp=1.0, pre=1.0, noise=0.003, pre_noise=0.003, first=1.0, sublayers=8):
  """A measured dict: Post-LN steps follow c_out = law · c_in/√(1 + σ²) (σ² = 0.5 attention, `sigma2_mlp` MLP),
  Pre-LN steps c_out = pre · c_in."""
  q_f = np.asarray([0.5, sigma2_mlp] * (sublayers // 2))
  return dict(
      crashed=[],
      post=_identity_arm(law / np.sqrt(1 + q_f), q_f, noise, first=first),
      pre=_identity_arm(np.full(sublayers, pre), np.ones(sublayers), pre_noise),
      post_mlp_sigma2=sigma2_mlp,
      sublayers=sublayers,
  )


EDGE_PRE = 0.9 ** (1 / 8)  # the Pre-LN band's lower edge for 8 sublayers
EDGE_DECAY = 1.1 * 2**-0.5  # the decay band's upper edge


@pytest.mark.parametrize(
    "measured, expected, failing",
    [
        (_identity(), study.REPRODUCED, None),
        (_identity(law=0.95), study.REPRODUCED, None),  # 5% off the law, inside its 15%
        (_identity(law=1.3), study.NOT_REPRODUCED, "'post'"),
        # the law off by 15% at its edge (MLP σ² = 2·1.15² − 1, so their factor stays 2^(-1/2)): straddles
        (_identity(law=1.15, sigma2_mlp=2 * 1.15**2 - 1, noise=0.03), study.INCONCLUSIVE, "['post']"),
        (_identity(sigma2_mlp=0.5), study.NOT_REPRODUCED, "['decay']"),  # the law holds; the branch is not σ² = 1
        (_identity(sigma2_mlp=1 / EDGE_DECAY**2 - 1, noise=0.01), study.INCONCLUSIVE, "['decay']"),
        (_identity(pre=0.98), study.NOT_REPRODUCED, "['pre']"),  # 0.98^8 = 0.85: the path decays
        (_identity(pre=1.0, pre_noise=0.01), study.REPRODUCED, None),
        (_identity(pre=EDGE_PRE, pre_noise=0.01), study.INCONCLUSIVE, "pre: at least ≈ 30 seeds (now 3)"),
        (_identity(first=0.01), study.INCONCLUSIVE, "fewer than 2 steps"),  # c falls below the cut at once
        ({"crashed": ["model.norm_position=pre seed 0: RuntimeError: x"]}, study.INCONCLUSIVE, "1 run(s) crashed"),
    ],
)
def test_identity_path_verdict_branches(measured, expected, failing):
  v = identity_path.verdict(copy.deepcopy(measured))
  assert v.verdict == expected and (failing is None or failing in v.reason), v.reason


def test_identity_path_origin_slope_interval():
  """Exact on a line through 0; a Student-t interval on t_{N−1} that covers the true slope ~95% of the time."""
  assert identity_path.origin_slope_interval([0.5, 1.0, 2.0], [0.35, 0.7, 1.4]) == pytest.approx((0.7, 0.7, 0.7))
  assert identity_path.origin_slope_interval([1.0], [0.7]) is None
  rng = np.random.default_rng(1)
  x = rng.uniform(0.05, 1.0, 12)
  covered = 0
  for _ in range(1000):
    _, lo, hi = identity_path.origin_slope_interval(x, 0.7 * x + 0.03 * rng.standard_normal(12))
    covered += lo <= 0.7 <= hi
  assert 0.93 <= covered / 1000 <= 0.97, covered


def test_identity_path_steps_chain_each_seed():
  """A step's c_in is the previous sublayer's c of the same seed (1 for the first), its law c_in/√(q_in + q_F)."""
  arm = dict(
      kinds=["self_attn", "mlp"],
      c_per_seed=[[0.6, 0.4], [0.5, 0.3]],
      q_in_per_seed=[[1.0, 1.0], [2.0, 1.0]],
      q_f_per_seed=[[0.44, 1.0], [0.25, 1.0]],
  )
  s = identity_path.steps(arm)
  np.testing.assert_allclose(s["c_in"], [1.0, 0.6, 1.0, 0.5])
  np.testing.assert_allclose(s["law"], [1 / 1.2, 0.6 / 2**0.5, 1 / 1.5, 0.5 / 2**0.5])
  assert s["mlp"].tolist() == [False, True, False, True]


def test_more_seeds_project_the_origin_slopes_interval():
  """The projection of `seeds_to_decide` against the interval of the same steps repeated k times (the slope and the
  scatter held exactly): their half-widths agree to √(k(N−1)/(kN−1)); the seeds it names are the fewest whose
  projected interval clears the band's nearer edge; a slope on an edge, or one needing more than MOST_SEEDS, names
  none."""
  measured = _identity(pre=1.0, pre_noise=0.01)
  arm = measured["pre"]
  seeds = len(arm["seeds"])
  st = identity_path.steps(arm)
  x, y = st["c_in"], st["c_out"]
  n = len(x)
  iv = identity_path.origin_slope_interval(x, y)
  for k in (2, 4, 10):
    tiled = identity_path.origin_slope_interval(np.tile(x, k), np.tile(y, k))
    assert tiled[0] == pytest.approx(iv[0])
    exact = np.sqrt(k * (n - 1) / (k * n - 1))
    projected = identity_path.projected_half_width(iv, n, seeds, seeds * k)
    assert (tiled[2] - tiled[0]) == pytest.approx(projected * exact, rel=1e-9)
  edge = iv[0] - (iv[2] - iv[0]) / 2  # a band edge inside the 3-seed interval
  m = identity_path.seeds_to_decide(iv, n, seeds, (edge, 2.0))
  assert identity_path.projected_half_width(iv, n, seeds, m) < iv[0] - edge
  assert identity_path.projected_half_width(iv, n, seeds, m - 1) >= iv[0] - edge
  assert identity_path.seeds_to_decide(iv, n, seeds, (iv[0], 2.0)) is None  # on the edge
  near = iv[0] - (iv[2] - iv[0]) * 0.01  # needs ~10⁴× the steps: past MOST_SEEDS
  assert identity_path.seeds_to_decide(iv, n, seeds, (near, 2.0)) is None
