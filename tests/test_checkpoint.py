"""Checkpointer: bitwise round trip of a realistic train state, retention, save rule, resume,
partial checkpoints, templates of ShapeDtypeStructs."""

import os

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from train.checkpoint import Checkpointer


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: dict
  opt_state: optax.OptState
  extra: dict  # non-param model variables (e.g. Admin's ω)
  key: jax.Array  # typed key
  raw_key: jax.Array  # legacy uint32 key


def _state(seed=0, steps=2):
  k = jax.random.key(seed)
  params = {
      "dense": {"kernel": jax.random.normal(k, (4, 3)), "bias": jnp.arange(3.0)},
      "norm": {"scale": jnp.ones(3, jnp.bfloat16)},
  }
  tx = optax.adam(1e-2)
  opt_state = tx.init(params)
  for _ in range(steps):  # non-trivial mu, nu and count
    grads = jax.tree.map(lambda p: jnp.sin(p.astype(jnp.float32)).astype(p.dtype), params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
  return TrainState(
      step=jnp.asarray(steps, jnp.int32),
      params=params,
      opt_state=opt_state,
      extra={"omega": jnp.full((2,), 1.5)},
      key=jax.random.fold_in(k, 7),
      raw_key=jax.random.PRNGKey(seed + 1),
  )


def _zeros_like(state):
  # A template with the right structure/dtypes but different values, so a round trip that
  # silently returned the template would fail.
  def zero(x):
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      return jax.random.key(123)
    return jnp.zeros_like(x)

  return jax.tree.map(zero, state)


def _assert_bitwise_equal(a, b):
  la, ta = jax.tree.flatten(a)
  lb, tb = jax.tree.flatten(b)
  assert ta == tb
  for x, y in zip(la, lb):
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      assert jnp.issubdtype(y.dtype, jax.dtypes.prng_key)
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    assert x.dtype == y.dtype and x.shape == y.shape
    np.testing.assert_array_equal(
        np.atleast_1d(np.asarray(x)).view(np.uint8), np.atleast_1d(np.asarray(y)).view(np.uint8)
    )


def test_round_trip_bitwise(tmp_path):
  state = _state()
  data_state = {"next_index": 17, "epoch": 1, "shard": [0, 2]}
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    assert ckpt.restore(_zeros_like(state)) is None  # empty directory: nothing to resume
    assert ckpt.save(2, state, data_state=data_state)
    restored, restored_data = ckpt.restore(_zeros_like(state))
  assert isinstance(restored, TrainState)
  _assert_bitwise_equal(restored, state)
  assert restored_data == data_state
  # The restored typed key draws the same numbers as the original.
  np.testing.assert_array_equal(jax.random.uniform(restored.key, (3,)), jax.random.uniform(state.key, (3,)))


def test_restore_onto_shape_dtype_structs_with_sharding(tmp_path):
  state = _state()
  sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), state)
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    ckpt.save(2, state)  # no data_state
    restored, data_state = ckpt.restore(template)
  assert data_state is None
  _assert_bitwise_equal(restored, state)
  assert all(leaf.sharding == sharding for leaf in jax.tree.leaves(restored))


def test_restore_casts_to_template_dtype(tmp_path):
  params = {"w": jnp.array([1.0, 2.5, -3.0], jnp.float32)}
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    ckpt.save(1, params)
    restored, _ = ckpt.restore({"w": jax.ShapeDtypeStruct((3,), jnp.bfloat16)})
  assert restored["w"].dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(restored["w"], np.float32), [1.0, 2.5, -3.0])


def test_keep_last_k_and_save_every_with_forced_final_save(tmp_path):
  state = {"x": jnp.zeros(2)}
  with Checkpointer(str(tmp_path), max_to_keep=2, save_every=3) as ckpt:
    written = [s for s in range(1, 11) if ckpt.save(s, {"x": jnp.full(2, float(s))})]
    assert written == [3, 6, 9]  # multiples of save_every only (orbax alone would add step 1)
    assert ckpt.save(10, state, force=True)  # end of training
    assert not ckpt.save(10, state, force=True)  # already on disk: skipped, not an error
    assert ckpt.all_steps() == [9, 10]  # max_to_keep=2
    restored, _ = ckpt.restore({"x": jnp.ones(2)}, step=9)
    np.testing.assert_array_equal(restored["x"], [9.0, 9.0])
    with pytest.raises(ValueError, match=r"step=3 has no checkpoint.*\[9, 10\]"):
      ckpt.restore({"x": jnp.ones(2)}, step=3)


def test_reopen_resumes_latest_and_ignores_partial_checkpoint(tmp_path):
  state = _state()
  with Checkpointer(str(tmp_path), save_every=5) as ckpt:
    ckpt.save(5, state, data_state={"next_index": 5})
    ckpt.save(10, state.replace(step=jnp.asarray(10, jnp.int32)), data_state={"next_index": 10})
  # A crash during the save of step 15 leaves orbax's temporary directory behind.
  partial = tmp_path / "15.orbax-checkpoint-tmp-1700000000000000"
  partial.mkdir()
  (partial / "garbage").write_bytes(b"\x00" * 10)
  with Checkpointer(str(tmp_path), save_every=5) as ckpt:  # the rerun
    assert ckpt.latest_step() == 10
    assert ckpt.all_steps() == [5, 10]
    restored, data_state = ckpt.restore(_zeros_like(state))
  assert int(restored.step) == 10 and data_state == {"next_index": 10}
  assert not partial.exists()  # cleaned up on open


def test_asynchronous_save_then_wait(tmp_path):
  state = _state()
  with Checkpointer(str(tmp_path), save_every=1, asynchronous=True) as ckpt:
    assert ckpt.save(1, state, data_state={"i": 1})
    ckpt.wait()
    assert ckpt.latest_step() == 1
    assert os.path.isdir(tmp_path / "1")
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    restored, data_state = ckpt.restore(_zeros_like(state))
  _assert_bitwise_equal(restored, state)
  assert data_state == {"i": 1}


def test_bad_arguments_fail_before_writing(tmp_path):
  with pytest.raises(ValueError, match=r"save_every=0"):
    Checkpointer(str(tmp_path), save_every=0)
  with pytest.raises(ValueError, match=r"max_to_keep=0"):
    Checkpointer(str(tmp_path), max_to_keep=0)
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    with pytest.raises(ValueError, match=r"data_state of type bytes"):
      ckpt.save(1, {"x": jnp.ones(1)}, data_state=b"grain-state")
    with pytest.raises(ValueError, match=r"not JSON-able"):
      ckpt.save(1, {"x": jnp.ones(1)}, data_state={"rng": np.random.default_rng(0)})
    assert ckpt.all_steps() == []
