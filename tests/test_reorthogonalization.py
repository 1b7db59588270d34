"""Tests for curvax/reorthogonalization.py: the registry and getter, and one step of each strategy's builder on a
hand-made basis (what it does to the new vector, its β and CGS flag, and the state it carries)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from curvax.reorthogonalization import STRATEGIES, Step, get_strategy

N, M = 12, 6  # vector size, Lanczos steps


@pytest.fixture(autouse=True)
def x64():
  with jax.enable_x64(True):
    yield


def _state(i, reorth_next=False):
  """A loop state at step i whose basis holds i + 1 orthonormal rows q_0..q_i (the rest zero)."""
  q = np.linalg.qr(np.random.default_rng(0).standard_normal((N, N)))[0].T
  basis = np.zeros((M + 1, N))
  basis[: i + 1] = q[: i + 1]
  om_cur, om_prev = np.zeros(M + 1), np.zeros(M + 1)  # ω_{i,j} and ω_{i-1,j}: 1 on the diagonal, ε-level below
  om_cur[:i], om_cur[i] = 1e-16, 1.0
  om_prev[: i - 1], om_prev[i - 1] = 1e-16, 1.0
  return dict(
      i=jnp.int32(i),
      basis=jnp.asarray(basis),
      alphas=jnp.asarray(np.r_[np.arange(1.0, i + 1), np.zeros(M - i)]),
      betas=jnp.asarray(np.r_[np.full(i, 0.5), np.zeros(M - i)]),
      om_prev=jnp.asarray(om_prev),
      om_cur=jnp.asarray(om_cur),
      om_max=jnp.zeros(()),
      reorth_next=jnp.bool_(reorth_next),
  )


def _w(s):
  """A new vector with a large component along every stored row (orthogonality lost on purpose)."""
  rng = np.random.default_rng(1)
  return jnp.asarray(rng.standard_normal(N)) + 3.0 * jnp.sum(s["basis"], axis=0)


def test_registry_is_the_list_of_valid_options():
  assert tuple(STRATEGIES) == curvax.REORTHOGONALIZATIONS == ("full", "partial", "none")
  with pytest.raises(ValueError, match=r"reorthogonalize='cgs'.*\['full', 'partial', 'none'\]"):
    get_strategy("cgs")


# Every strategy with the basis stored, and "none" without it (full and partial always store it).
@pytest.mark.parametrize("name,store", [(name, True) for name in STRATEGIES] + [("none", False)])
def test_step_builders(name, store):
  i = 3
  s = _state(i)
  step = get_strategy(name)(M, N, float(np.finfo(np.float64).eps), "auto", store)
  assert isinstance(step, Step)
  w_in = _w(s)
  w, beta, reorthed, aux = step.orthogonalize(s, w_in, 0.25)
  np.testing.assert_allclose(beta, np.linalg.norm(w), rtol=1e-14)
  stored = np.asarray(s["basis"][: i + 1])
  if name == "full":  # the CGS pass: w ⟂ q_0..q_i, and w_in − w lies in their span
    assert bool(reorthed)
    assert np.max(np.abs(stored @ np.asarray(w))) < 1e-14
    np.testing.assert_allclose(w, w_in - stored.T @ (stored @ np.asarray(w_in)), atol=1e-13)
  else:  # the ω estimates start at rounding level: no pass, w untouched
    assert not bool(reorthed)
    np.testing.assert_array_equal(w, w_in)
  carried = step.carry(s, aux, jnp.bool_(False), jnp.bool_(False))
  expected_keys = {"full": set(), "partial": {"om_prev", "om_cur", "reorth_next"}}
  expected_keys["none"] = set() if store else {"om_prev", "om_cur", "om_max"}
  assert set(carried) == expected_keys[name]
  if carried:  # Simon's ω: ω_{i+1,i+1} = 1, ω_{i+1,i} = ε√n, and the current row moves to om_prev
    np.testing.assert_array_equal(carried["om_prev"], s["om_cur"])
    assert float(carried["om_cur"][i + 1]) == 1.0
    np.testing.assert_allclose(carried["om_cur"][i], np.finfo(np.float64).eps * np.sqrt(N), rtol=1e-12)
  # A step that broke down keeps the previous ω row (q_{i+1} is zero, not a new Lanczos vector).
  if carried:
    broke = step.carry(s, aux, jnp.bool_(True), jnp.bool_(False))
    np.testing.assert_array_equal(broke["om_cur"], s["om_cur"])


def test_partial_reorthogonalizes_the_step_after_a_pass():
  """Simon (1984): the step after a CGS pass gets one too (q_{i+2} inherits q_i's error), and only that one."""
  s = _state(3, reorth_next=True)
  step = get_strategy("partial")(M, N, float(np.finfo(np.float64).eps), "auto", True)
  w, _, reorthed, aux = step.orthogonalize(s, _w(s), 0.25)
  assert bool(reorthed)
  assert np.max(np.abs(np.asarray(s["basis"][:4]) @ np.asarray(w))) < 1e-14
  carried = step.carry(s, aux, jnp.bool_(False), jnp.bool_(False))
  assert not bool(carried["reorth_next"])
  # The estimates against q_0..q_{i-1} are reset to ε after the pass.
  np.testing.assert_array_equal(carried["om_cur"][:3], np.finfo(np.float64).eps)
