"""train.programs: a second run of the same program in one process traces and compiles nothing and gives the same
metrics and state bit for bit; a run whose program differs (a loss coefficient, the optimizer's horizon) builds its
own."""

import contextlib

import jax
import numpy as np
import pytest

from tests import tiny
from train import loop, programs
from train.metrics import read_metrics

STEPS = ("train_step", "eval_step")
# The jax.monitoring events jax records a trace and a compile under (jax._src.dispatch names them).
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def traced():
  """The names of the functions jax traces (jaxpr) and compiles (backend) inside the block: {event: [fun_name]}."""
  seen = {TRACE_EVENT: [], COMPILE_EVENT: []}

  def listener(event, duration, **kwargs):
    if event in seen:
      seen[event].append(kwargs.get("fun_name", ""))

  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    yield seen
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def config(**overrides):
  """tiny.run_config at one layer a stack, 4 steps logged each, one eval at the end; `overrides` on top."""
  keys = {
      "model.num_encoder_layers": 1,
      "model.num_decoder_layers": 1,
      "model.d_model": 32,
      "model.d_ff": 64,
      "model.dropout_rate": 0.1,
      "train.num_steps": 4,
      "train.log_every": 1,
      "train.eval_every": 4,
      "train.checkpoint_every": 1000,
      "train.num_decode_examples": 0,
      "data.batch_size": 8,
      "data.eval_batch_size": 8,
      "data.embedded.num_train": 64,
      "data.embedded.num_eval": 8,
      "data.max_eval_loss_examples": 8,
  }
  return tiny.run_config(**{**keys, **overrides})


def run(workdir, cfg):
  with traced() as seen:
    state = loop.train_and_evaluate(loop.setup(cfg, str(workdir)))
  names = {e: [n for n in fns if n in STEPS] for e, fns in seen.items()}
  return state, read_metrics(str(workdir), split="train"), read_metrics(str(workdir), split="eval"), names


@pytest.mark.slow  # end to end: trains
def test_same_program_twice_in_one_process_builds_nothing_and_gives_the_same_bits(tmp_path):
  programs._BUILT.clear()  # a fresh process's cache
  first, train_1, eval_1, built_1 = run(tmp_path / "a", config())
  # The probe sees both steps traced and compiled in the first run (compiled: or read from a persistent cache).
  assert sorted(built_1[TRACE_EVENT]) == sorted(STEPS), built_1
  again, train_2, eval_2, built_2 = run(tmp_path / "b", config())
  assert built_2 == {TRACE_EVENT: [], COMPILE_EVENT: []}, built_2
  assert [r["loss"] for r in train_2] == [r["loss"] for r in train_1] and len(train_1) == 4
  assert [r["loss"] for r in eval_2] == [r["loss"] for r in eval_1] and len(eval_1) == 1
  leaves = lambda s: jax.tree.leaves((s.params, s.opt_state, s.variables, s.step))
  for a, b in zip(leaves(first), leaves(again), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow  # end to end: trains
def test_a_different_program_is_built_again(tmp_path):
  programs._BUILT.clear()
  run(tmp_path / "a", config())
  # z-loss changes the train step only; the eval step (model, mask rate) is the same program.
  _, _, _, z_loss = run(tmp_path / "b", config(**{"train.z_loss": 1e-4}))
  assert z_loss[TRACE_EVENT] == ["train_step"], z_loss
  # Another horizon is another optimizer (its schedule) and so another train step.
  _, _, _, longer = run(tmp_path / "c", config(**{"train.num_steps": 5, "train.eval_every": 5}))
  assert longer[TRACE_EVENT] == ["train_step"], longer


def test_the_cache_keeps_the_last_keys():
  programs._BUILT.clear()
  built = [programs.built_once(("k", i), object) for i in range(programs.MAX_PROGRAMS + 1)]
  assert programs.built_once(("k", programs.MAX_PROGRAMS), object) is built[-1]  # kept: the same object
  assert programs.built_once(("k", 0), object) is not built[0]  # the oldest key was dropped: built anew
  assert len(programs._BUILT) == programs.MAX_PROGRAMS
