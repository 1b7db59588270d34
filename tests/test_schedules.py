"""train/schedules.py: every learning-rate schedule against hand-computed docs/science.md §8 values and closed forms
(linear warmup, rsqrt/Noam with and without d_model, warmup-rsqrt, warmup-cosine, warmup-linear-decay), zero warmup's
first step finite and positive for every registered schedule, and the registry's getter."""

import math

import numpy as np
import pytest

from tests.test_optim import _cfg, _lrs
from train import optim_config, schedules

# ------------------------------------------------------------------------------- schedules
# count = updates already applied; formulas use t = count + 1.


def test_constant():
  np.testing.assert_allclose(
      _lrs(_cfg(schedule="constant", learning_rate=0.3), [0, 7, 10**6]), [0.3, 0.3, 0.3], rtol=1e-7
  )


def test_linear_warmup_hand_values():
  # η=2, T_w=4: η·min(1, t/4) at t = 1, 2, 4, 5, 100.
  got = _lrs(_cfg(schedule="linear_warmup", learning_rate=2.0, warmup_steps=4), [0, 1, 3, 4, 99])
  np.testing.assert_allclose(got, [0.5, 1.0, 2.0, 2.0, 2.0], rtol=1e-6)


def test_rsqrt_noam_with_d_model():
  # Vaswani et al. 2017: η_0=1, d=512, T_w=4000. At t = T_w both branches agree:
  # 512^-0.5 · 4000^-0.5 = 6.987712e-4 (the paper's peak lr).
  cfg = _cfg(schedule="rsqrt", learning_rate=1.0, warmup_steps=4000, rsqrt_d_model=512)
  got = _lrs(cfg, [0, 999, 3999, 15999])
  want = [
      512**-0.5 * 1 * 4000**-1.5,  # t=1, warmup branch
      512**-0.5 * 1000 * 4000**-1.5,  # t=1000
      512**-0.5 * 4000**-0.5,  # t=T_w, peak
      512**-0.5 * 16000**-0.5,  # t=16000, decay branch: half the peak at 4·T_w
  ]
  np.testing.assert_allclose(got, want, rtol=1e-5)
  np.testing.assert_allclose(got[2], 6.987712e-4, rtol=1e-6)
  np.testing.assert_allclose(got[3] / got[2], 0.5, rtol=1e-5)


def test_rsqrt_without_d_model_peaks_at_learning_rate():
  # η_0·min(√(T_w/t), t/T_w) with η_0=0.01, T_w=100.
  cfg = _cfg(schedule="rsqrt", learning_rate=0.01, warmup_steps=100, rsqrt_d_model=None)
  got = _lrs(cfg, [0, 49, 99, 399])
  np.testing.assert_allclose(got, [1e-4, 5e-3, 1e-2, 5e-3], rtol=1e-5)


def test_rsqrt_zero_warmup_is_pure_inverse_sqrt():
  cfg = _cfg(schedule="rsqrt", learning_rate=1.0, warmup_steps=0, rsqrt_d_model=0)
  np.testing.assert_allclose(_lrs(cfg, [0, 3, 99]), [1.0, 0.5, 0.1], rtol=1e-6)
  cfg.rsqrt_d_model = 4
  np.testing.assert_allclose(_lrs(cfg, [0, 3, 99]), [0.5, 0.25, 0.05], rtol=1e-6)


def test_warmup_rsqrt_equals_its_closed_form():
  """η·min(t/T_w, √(T_w/t)) (Vaswani et al. 2017, Eq. 3, normalised to peak η; Xiong et al. 2020 §3.2) with T_d = T_w:
  hand values at η = 5e-4, T_w = 4000 (t = 1, 2000, 4000, 16000: η/4000, η/2, η, η/2), the formula on a grid of
  steps, and the `rsqrt` schedule without d_model, which is the same rule."""
  cfg = _cfg(schedule="warmup_rsqrt", learning_rate=5e-4, warmup_steps=4000, decay_start=0)
  np.testing.assert_allclose(_lrs(cfg, [0, 1999, 3999, 15999]), [5e-4 / 4000, 2.5e-4, 5e-4, 2.5e-4], rtol=1e-5)
  counts = [0, 1, 10, 500, 3998, 3999, 4000, 4001, 9000, 99_999]
  t = np.asarray(counts, np.float64) + 1.0
  closed = 5e-4 * np.minimum(t / 4000, np.sqrt(4000 / t))
  np.testing.assert_allclose(_lrs(cfg, counts), closed, rtol=1e-5)
  np.testing.assert_allclose(
      _lrs(_cfg(schedule="rsqrt", learning_rate=5e-4, warmup_steps=4000), counts), closed, rtol=1e-5
  )
  cfg.decay_start = 4000  # T_d = T_w spelled out: the same schedule
  np.testing.assert_allclose(_lrs(cfg, counts), closed, rtol=1e-5)


def test_warmup_rsqrt_without_warmup_decays_like_its_warmup_twin():
  """T_w = 0, T_d = 4000: η until step T_d, then η·√(T_d/t), equal to the T_w = T_d = 4000 schedule from T_d on; and
  T_w = T_d = 0 is η/√t (as `rsqrt` with T_w = 0)."""
  no_warmup = _cfg(schedule="warmup_rsqrt", learning_rate=1.0, warmup_steps=0, decay_start=4000)
  twin = _cfg(schedule="warmup_rsqrt", learning_rate=1.0, warmup_steps=4000, decay_start=4000)
  np.testing.assert_allclose(_lrs(no_warmup, [0, 1, 2000, 3999]), [1.0] * 4, rtol=1e-7)
  later = [3999, 4000, 8999, 15999, 99_999]
  np.testing.assert_allclose(_lrs(no_warmup, later), _lrs(twin, later), rtol=1e-6)
  np.testing.assert_allclose(_lrs(no_warmup, [15999]), [0.5], rtol=1e-5)  # √(4000/16000)
  pure = _cfg(schedule="warmup_rsqrt", learning_rate=1.0, warmup_steps=0, decay_start=0)
  np.testing.assert_allclose(_lrs(pure, [0, 3, 99]), [1.0, 0.5, 0.1], rtol=1e-6)
  with pytest.raises(ValueError, match=r"config.optim.decay_start=100 is invalid.*>= optim.warmup_steps=4000"):
    optim_config.validate_optim_config(_cfg(schedule="warmup_rsqrt", warmup_steps=4000, decay_start=100))
  with pytest.raises(ValueError, match=r"config.optim.decay_start=-1 is invalid"):
    optim_config.validate_optim_config(_cfg(decay_start=-1))


def test_warmup_cosine_hand_values():
  # η=1, T_w=2, horizon 10, end 0.1: t=1 → 0.5, t=2 → 1, t=6 (half-way through the 8 decay
  # steps) → 0.1 + 0.9·0.5·(1+cos(π/2)) = 0.55, t=10 → 0.1, afterwards 0.1.
  cfg = _cfg(schedule="warmup_cosine", learning_rate=1.0, warmup_steps=2, min_lr_ratio=0.1)
  got = _lrs(cfg, [0, 1, 3, 5, 9, 50], total_steps=10)
  want = [0.5, 1.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 2 / 8)), 0.55, 0.1, 0.1]
  np.testing.assert_allclose(got, want, rtol=1e-6)


def test_warmup_linear_decay_hand_values():
  cfg = _cfg(schedule="warmup_linear_decay", learning_rate=1.0, warmup_steps=2, min_lr_ratio=0.1, decay_steps=10)
  got = _lrs(cfg, [0, 1, 5, 9, 50])
  np.testing.assert_allclose(got, [0.5, 1.0, 0.55, 0.1, 0.1], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(schedules.SCHEDULES))
def test_zero_warmup_first_step_is_finite_and_positive(name):
  cfg = _cfg(schedule=name, learning_rate=0.5, warmup_steps=0, decay_steps=20)
  got = np.array(_lrs(cfg, [0, 1, 10, 19, 100]))
  assert np.all(np.isfinite(got)) and np.all(got >= 0.0)
  assert got[0] > 0.0
  if name in ("constant", "linear_warmup"):  # no warmup: the peak from the first update on
    np.testing.assert_allclose(got[:4], [0.5] * 4, rtol=1e-7)
  elif name != "rsqrt":  # decaying schedules start just below the peak and never rise
    assert 0.45 < got[0] <= 0.5 and np.all(np.diff(got) <= 1e-7)


def test_zero_warmup_decay_values():
  # No warmup, horizon 4: t=1..4 linearly from η to 0 over 4 steps → 0.75, 0.5, 0.25, 0.
  cfg = _cfg(schedule="warmup_linear_decay", learning_rate=1.0, warmup_steps=0, decay_steps=4)
  np.testing.assert_allclose(_lrs(cfg, [0, 1, 2, 3]), [0.75, 0.5, 0.25, 0.0], atol=1e-7)
  cfg.schedule = "warmup_cosine"
  np.testing.assert_allclose(_lrs(cfg, [0, 1, 3]), [0.5 * (1 + math.cos(math.pi / 4)), 0.5, 0.0], atol=1e-7)


def test_schedule_registry_and_getter():
  for name in schedules.SCHEDULES:
    assert schedules.get_schedule(name) is schedules.SCHEDULES[name]
  with pytest.raises(ValueError, match=r"config.optim.schedule='noam' is invalid; valid: .*rsqrt"):
    schedules.get_schedule("noam")
