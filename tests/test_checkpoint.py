"""Checkpointer: bitwise round trip of a realistic train state, retention, save rule, resume,
partial checkpoints, templates of ShapeDtypeStructs; orbax's policies without deprecated options, one data state
per process, epath directories, unrestorable checkpoints, the preemption notice."""

import os
import signal
import warnings

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from etils import epath
from grain._src.core import sharding as grain_sharding
from orbax.checkpoint import checkpoint_managers

from train.checkpoint import Checkpointer, checkpoint_directory
from train.preemption import PreemptionNotice


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


# ---- orbax's current API, per-process data state, paths, unrestorable checkpoints, preemption ----


def test_no_deprecated_orbax_options_or_warnings(tmp_path, caplog):
  """Saving and restoring use orbax's policies and handler registry: no Python warning, no warning line mentioning
  a deprecation, no orbax deprecation event (jax.monitoring); the listener does catch orbax's legacy-API event."""
  events = []
  listener = lambda event, **kwargs: events.append(event)  # noqa: E731
  jax.monitoring.register_event_listener(listener)
  try:
    with warnings.catch_warnings(record=True) as caught, caplog.at_level("WARNING"):
      warnings.simplefilter("always")
      with Checkpointer(str(tmp_path / "new"), max_to_keep=2, save_every=1) as ckpt:
        ckpt.save(1, _state(), data_state={"i": 1})
        ckpt.restore(_zeros_like(_state()))
        options = ckpt._manager._options
    assert [str(w.message) for w in caught] == []
    assert not [r.getMessage() for r in caplog.records if "deprecat" in r.getMessage().lower()]
    assert not [e for e in events if "deprecation" in e], events
    assert options.max_to_keep is None and options.keep_period is None
    assert options.preservation_policy == checkpoint_managers.LatestN(2)
    assert isinstance(options.save_decision_policy, checkpoint_managers.AnySavePolicy)
    # The control: the same capture sees orbax's deprecation event for the legacy constructor.
    ocp.CheckpointManager(
        str(tmp_path / "legacy"), checkpointers=ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
    ).close()
    assert "/jax/orbax/deprecation/checkpoint_manager_legacy_init" in events
  finally:
    jax.monitoring.unregister_event_listener(listener)


def test_save_decision_includes_orbax_preemption_sync_point(tmp_path, monkeypatch):
  with Checkpointer(str(tmp_path), save_every=5) as ckpt:
    assert [s for s in range(1, 11) if ckpt.should_save(s)] == [5, 10]
    monkeypatch.setattr(ckpt._manager, "reached_preemption", lambda step: step == 7)
    assert [s for s in range(1, 11) if ckpt.should_save(s)] == [5, 7, 10]
    assert ckpt.reached_preemption(7) and not ckpt.reached_preemption(6)
    assert ckpt.save(7, {"x": jnp.ones(2)}) and ckpt.all_steps() == [7]


def test_each_process_restores_its_own_data_state(tmp_path, monkeypatch):
  """grain's handler names the file by (process index, count): each of two fake processes saves step 2 with its
  own position (process 1 into a second directory, its file then moved next to process 0's: one process cannot
  save a step twice), and each restores its own. grain's view of the process is faked rather than
  jax.process_index, which orbax would follow into barriers with a process that does not exist."""
  state = _state()
  positions = {0: {"next_index": 40, "epoch": 0}, 1: {"next_index": 41, "epoch": 2}}
  root, other = tmp_path / "ckpt", tmp_path / "process_1"
  for index, directory in ((1, other), (0, root)):
    monkeypatch.setattr(grain_sharding, "get_process_index_and_count", lambda index=index: (index, 2))
    with Checkpointer(str(directory), save_every=1) as ckpt:
      ckpt.save(2, state, data_state=positions[index])
  # Process 0 wrote its own file only (JsonSave wrote process 0's state for everybody).
  assert sorted(p.name for p in (root / "2" / "data_state").glob("process_*")) == ["process_0-of-2.json"]
  (other / "2" / "data_state" / "process_1-of-2.json").rename(root / "2" / "data_state" / "process_1-of-2.json")
  for index in (0, 1):
    monkeypatch.setattr(grain_sharding, "get_process_index_and_count", lambda index=index: (index, 2))
    with Checkpointer(str(root), save_every=1) as ckpt:
      restored, data_state = ckpt.restore(_zeros_like(state))
    assert data_state == positions[index]
    _assert_bitwise_equal(restored, state)
  monkeypatch.setattr(grain_sharding, "get_process_index_and_count", lambda: (2, 3))  # a run of another size
  with Checkpointer(str(root), save_every=1) as ckpt:
    with pytest.raises(RuntimeError, match=r"process_2-of-3\.json does not exist"):
      ckpt.restore(_zeros_like(state))


def test_checkpoint_with_a_json_data_state_from_before_still_restores(tmp_path):
  state = {"w": jnp.arange(3.0)}
  with ocp.CheckpointManager(str(tmp_path)) as manager:  # how data_state was saved before per-process files
    manager.save(4, args=ocp.args.Composite(state=ocp.args.StandardSave(state), data_state=ocp.args.JsonSave({"i": 4})))
  with Checkpointer(str(tmp_path)) as ckpt:
    restored, data_state = ckpt.restore({"w": jnp.zeros(3)})
  np.testing.assert_array_equal(restored["w"], [0.0, 1.0, 2.0])
  assert data_state == {"i": 4}


def test_directories_are_epath_local_made_absolute_uris_kept(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert checkpoint_directory("runs/a/checkpoints") == epath.Path(tmp_path / "runs" / "a" / "checkpoints")
  assert str(checkpoint_directory(epath.Path("gs://bucket/x") / "checkpoints")) == "gs://bucket/x/checkpoints"
  assert str(checkpoint_directory("gs://bucket/x")) == "gs://bucket/x"  # os.path.abspath gives <cwd>/gs:/bucket/x
  # The string orbax's manager gets for a gs:// workdir (the manager itself is not built: it would reach GCS).
  seen = []
  with monkeypatch.context() as patch:
    patch.setattr(ocp, "CheckpointManager", lambda directory, **kwargs: seen.append(directory))
    assert str(Checkpointer(epath.Path("gs://bucket/run") / "checkpoints").directory) == "gs://bucket/run/checkpoints"
  assert [str(d) for d in seen] == ["gs://bucket/run/checkpoints"]
  with Checkpointer("rel", save_every=1) as ckpt:
    assert isinstance(ckpt.directory, epath.Path) and ckpt.directory == epath.Path(tmp_path / "rel")
    assert ckpt._manager.directory == ckpt.directory
    ckpt.save(1, {"x": jnp.ones(1)})
  assert (tmp_path / "rel" / "1" / "state").is_dir()


def _truncate(path):
  """Truncates `path`, or the largest file under it (an array data file of a state item), to half its size."""
  if path.is_dir():
    path = max((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  os.truncate(path, path.stat().st_size // 2)
  return path


@pytest.mark.parametrize("item", ["state", "data_state"])
def test_unrestorable_latest_checkpoint_falls_back_and_is_moved_aside(tmp_path, caplog, item):
  """A truncated file in the latest checkpoint (array data, or this process's data state): a warning names the
  checkpoint, the previous one restores, the bad one is moved aside and its step can be saved again."""
  state = _state()
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    for s in (1, 2, 3):
      ckpt.save(s, state.replace(step=jnp.asarray(s, jnp.int32)), data_state={"next_index": s})
  damaged = _truncate(tmp_path / "3" / ("state" if item == "state" else "data_state/process_0-of-1.json"))
  with caplog.at_level("WARNING"), Checkpointer(str(tmp_path), save_every=1) as ckpt:
    restored, data_state = ckpt.restore(_zeros_like(state))
    assert int(restored.step) == 2 and data_state == {"next_index": 2}
    assert ckpt.all_steps() == [1, 2]
    assert ckpt.should_save(3) and ckpt.save(3, state, data_state={"next_index": 3})  # not skipped as existing
    assert ckpt.all_steps() == [1, 2, 3]
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert any(f"Checkpoint {tmp_path / '3'} does not restore" in w for w in warnings), warnings
  # the damaged file is named, not a binding's repr: TensorStore's innermost error, or the JSON file that fails
  named = (f"{damaged} does not parse", f'in OCDBT database at local file "{tmp_path / "3" / "state"}')
  assert any(any(n in w for n in named) and "pybind" not in w for w in warnings), (damaged, warnings)
  aside = [p.name for p in tmp_path.iterdir() if p.name.startswith("3.unrestorable-")]
  assert len(aside) == 1 and (tmp_path / aside[0] / item).is_dir()  # kept for inspection


def test_no_checkpoint_restores_error_names_directory_and_steps_and_moves_nothing(tmp_path):
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    for s in (1, 2):
      ckpt.save(s, {"w": jnp.ones(3)})
  # A template of another shape (e.g. a changed model config) restores no checkpoint: nothing may be moved aside.
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    with pytest.raises(RuntimeError, match=rf"no checkpoint in {tmp_path} restores; tried steps \[2, 1\].*step 2: "):
      ckpt.restore({"w": jnp.ones(4)})
    assert ckpt.all_steps() == [1, 2]
  assert sorted(p.name for p in tmp_path.iterdir() if p.name[0].isdigit()) == ["1", "2"]
  # An explicitly requested step is not replaced by another one.
  _truncate(tmp_path / "2" / "state")
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    with pytest.raises(Exception) as error:
      ckpt.restore({"w": jnp.ones(3)}, step=2)
    assert "no checkpoint" not in str(error.value)
    assert ckpt.all_steps() == [1, 2]


def test_preemption_notice_turns_sigterm_into_a_flag_and_restores_the_handler(tmp_path, monkeypatch):
  before = signal.getsignal(signal.SIGTERM)
  with Checkpointer(str(tmp_path)) as ckpt:
    with PreemptionNotice(ckpt) as notice:
      assert not notice.reached(1)
      os.kill(os.getpid(), signal.SIGTERM)  # the process survives: the handler only sets the flag
      assert notice.reached(2)
    assert signal.getsignal(signal.SIGTERM) is before
    # Several processes without JAX's preemption service: SIGTERM is left alone (stopping at different steps
    # would deadlock the processes in their next collective).
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with PreemptionNotice(ckpt) as notice:
      assert signal.getsignal(signal.SIGTERM) is before
    assert not notice.reached(1)


def test_unrestorable_array_data_warning_names_the_database_not_a_binding(tmp_path, caplog):
  """Truncated array data (OCDBT's data file): the warning carries TensorStore's innermost error, which names the
  array and the database folder, not the `<bound method ... TensorStore(` repr of the outer error."""
  with Checkpointer(str(tmp_path), save_every=1) as ckpt:
    for s in (1, 2):
      ckpt.save(s, {"w": jnp.arange(1000.0)})
  data = [p for p in (tmp_path / "2" / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
  assert data, sorted((tmp_path / "2").rglob("*"))
  _truncate(max(data, key=lambda p: p.stat().st_size))
  with caplog.at_level("WARNING"), Checkpointer(str(tmp_path), save_every=1) as ckpt:
    assert ckpt.restore({"w": jnp.zeros(1000)}) is not None
  warning = next(r.getMessage() for r in caplog.records if "does not restore" in r.getMessage())
  assert f'Error reading "w/0" in OCDBT database at local file "{tmp_path / "2" / "state"}' in warning, warning
  assert "bound method" not in warning and "TensorStore({" not in warning
