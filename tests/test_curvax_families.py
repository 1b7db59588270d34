"""docs/curvax.md's "Other model families": each example (Flax NNX through `nnx.split`, Flax Linen with BatchNorm's
`batch_stats`, Equinox through `eqx.partition`) runs as written, its certified extreme eigenvalues contain those of
the dense Hessian in float64, and its refusal prints the message its last comment quotes. Then every bad input the
section lists fails with one line before the loss is traced or run (a sentinel loss counts both)."""

import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import curvax

REPO = pathlib.Path(__file__).resolve().parents[1]
# The import line that tells each example apart, the package it needs and the label its first line prints.
FAMILIES = {
    "nnx": ("from flax import nnx", "flax", "NNX"),
    "linen": ("import flax.linen as nn", "flax", "Linen"),
    "equinox": ("import equinox as eqx", "equinox", "Equinox"),
}


def family_blocks() -> dict:
  """The python blocks of the "Other model families" section, by family."""
  text = (REPO / "docs" / "curvax.md").read_text()
  section = text.split("\n## Other model families\n", 1)[1].split("\n## ", 1)[0]
  blocks = re.findall(r"```python\n(.*?)```", section, re.S)
  found = {name: [b for b in blocks if family[0] in b.splitlines()] for name, family in FAMILIES.items()}
  assert len(blocks) == len(FAMILIES) and all(len(v) == 1 for v in found.values()), found.keys()
  return {name: v[0] for name, v in found.items()}


def _run(name, capsys) -> tuple:
  """Exec the family's example in a fresh namespace (default float32); its namespace and the lines it printed."""
  pytest.importorskip(FAMILIES[name][1], reason=f"{FAMILIES[name][1]} is not installed (requirements.txt pins it)")
  namespace = {"__name__": f"curvax_docs_{name}"}
  code = family_blocks()[name]
  exec(compile(code, f"docs/curvax.md ({name} example)", "exec"), namespace)  # pylint: disable=exec-used
  return namespace, code, capsys.readouterr().out.splitlines()


def _to_float64(tree):
  return jax.tree.map(lambda a: jnp.asarray(a, jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


def _dense_eigenvalues(ns) -> np.ndarray:
  """Eigenvalues of the dense Hessian of the example's loss at its parameters, everything cast to float64."""
  with jax.enable_x64(True):
    flat, unravel = ravel_pytree(_to_float64(ns["params"]))
    batch = _to_float64(ns["batch"])
    dense = jax.hessian(lambda f: ns["loss_fn"](unravel(f), batch))(flat)
    assert dense.dtype == jnp.float64 and dense.shape == (ns["H"].size,) * 2
    dense = np.asarray(dense)
  return np.linalg.eigvalsh((dense + dense.T) / 2)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_example_is_certified_against_the_dense_float64_hessian(name, capsys):
  ns, code, printed = _run(name, capsys)
  assert ns["H"].dtype == jnp.float32  # the example as a user runs it; only the reference is float64
  eigs = _dense_eigenvalues(ns)
  scale = np.abs(eigs).max()
  top, bottom = ns["top"], ns["bottom"]
  for i, truth in enumerate((eigs[-1], eigs[-2])):
    value, bound = float(top.values[i]), float(top.bounds[i])
    assert abs(value - truth) <= bound, (name, i, value, bound, truth)
    assert bound < 1e-3 * scale, (name, i, bound, scale)  # a certificate that says something
  value, bound = float(bottom.values[0]), float(bottom.bounds[0])
  assert abs(value - eigs[0]) <= bound < 1e-3 * scale, (name, value, bound, eigs[0])
  assert eigs[0] < 0 < eigs[-1]  # an indefinite Hessian: both ends matter
  # The refusal: one line, beginning as the example's last comment quotes it.
  quoted = re.search(r"print\(e\)  # (.*), \.\.\.$", code.rstrip(), re.M).group(1)
  refused = [l for l in printed if l.startswith(quoted)]
  assert len(refused) == 1 and printed[-1] == refused[0], printed
  assert printed[0].startswith(f"{FAMILIES[name][2]} λ_max = ")


def test_the_nnx_refusal_names_every_non_float_leaf_and_the_way_out(capsys):
  msg = _run("nnx", capsys)[2][-1]
  assert "'drop/rngs/count/value' (uint32[])" in msg and "'drop/rngs/key/value' (key<" in msg
  assert "kernel" not in msg and "nnx.split(model, nnx.Param, ...)" in msg


def test_the_linen_refusal_names_the_running_averages_and_the_way_out(capsys):
  ns, _, printed = _run("linen", capsys)
  msg = printed[-1]
  for leaf in ("mean", "var"):
    assert f"'batch_stats/BatchNorm_0/{leaf}' (float32[16])" in msg
  assert "params/" not in msg and "variables['params']" in msg and "use_running_average=True" in msg
  # NNX's BatchStat (a BatchNorm's whole State: floats, so only the running-statistics check can catch it).
  nnx = pytest.importorskip("flax.nnx")
  state = nnx.state(nnx.BatchNorm(3, rngs=nnx.Rngs(0)))
  with pytest.raises(ValueError, match="running statistics") as info:
    curvax.hessian(ns["loss_fn"], state, ns["batch"])
  assert "'mean/value' (float32[3]), 'var/value' (float32[3])" in str(info.value) and "scale" not in str(info.value)


def test_the_equinox_refusal_names_the_functions(capsys):
  msg = _run("equinox", capsys)[2][-1]
  assert "'activation' (PjitFunction), 'final_activation' (function)" in msg
  assert "eqx.partition(model, eqx.is_inexact_array)" in msg


class Sentinel:
  """A loss that counts how often it is traced (Python calls) and run (a debug callback in the compiled program)."""

  def __init__(self, loss_fn):
    self.loss_fn, self.traced, self.runs = loss_fn, 0, []

  def __call__(self, params, batch):
    self.traced += 1
    out = self.loss_fn(params, batch)
    jax.debug.callback(lambda: self.runs.append(1))
    return out

  def ran(self) -> int:
    jax.effects_barrier()
    return len(self.runs)


def _one_line(fn, *args, **kwargs) -> str:
  with pytest.raises(ValueError) as info:
    fn(*args, **kwargs)
  assert "\n" not in str(info.value), str(info.value)
  return str(info.value)


def test_every_bad_input_fails_before_the_loss_is_traced_or_run(capsys):
  ns = _run("nnx", capsys)[0]
  params, (x, y), key = ns["params"], ns["batch"], jax.random.key(0)
  n = ns["H"].size
  cases = {  # the bad input: (the call, what its message must hold)
      "non-float leaves": (lambda f: curvax.hessian(f, ns["nnx"].state(ns["model"]), (x, y)), ["'drop/rngs/count/"]),
      "leading dimensions": (lambda f: curvax.hessian(f, params, (x, y[:32])), ["'0' has 64, '1' has 32", "axis 0"]),
      "num_steps > n": (
          lambda f: curvax.top_eigenvalues(
              curvax.hessian(f, params, (x, y), linearize=False), 1, num_steps=n + 1, key=key
          ),
          [f"num_steps={n + 1} exceeds the dimension n={n}", f"1 ≤ num_steps ≤ {n}"],
      ),
      "k > num_steps": (
          lambda f: curvax.bottom_eigenvalues(
              curvax.hessian(f, params, (x, y), linearize=False), 4, num_steps=3, key=key
          ),
          ["k=4 exceeds num_steps=3", "1 ≤ k ≤ 3"],
      ),
      "no leaves": (lambda f: curvax.hessian(f, {"w": None}, (x, y)), ["params has no array leaves", "None"]),
  }
  for name, (call, expected) in cases.items():
    sentinel = Sentinel(ns["loss_fn"])
    msg = _one_line(call, sentinel)
    assert all(e in msg for e in expected), (name, msg)
    assert (sentinel.traced, sentinel.ran()) == (0, 0), name
  # A loss of per-example losses is traced once (how else to see its shape) and never run.
  per_example = Sentinel(lambda p, b: ns["loss_fn"](p, b) * jnp.ones(b[1].shape))
  msg = _one_line(curvax.hessian, per_example, params, (x, y))
  assert "must return a real floating scalar, got float32[64]" in msg and "jnp.mean" in msg
  assert (per_example.traced, per_example.ran()) == (1, 0)
  # The sentinel sees a run: the same lazy operator with valid arguments runs the loss.
  sentinel = Sentinel(ns["loss_fn"])
  curvax.top_eigenvalues(curvax.hessian(sentinel, params, (x, y), linearize=False), 1, num_steps=2, key=key)
  assert sentinel.traced >= 1 and sentinel.ran() >= 1


def test_a_none_leaf_is_an_empty_subtree_not_a_parameter(capsys):
  """A layer whose bias is None (held constant by the loss) has the Hessian of the other leaves: the full Hessian's
  block without that bias, equal to the one of the dict without the key."""
  ns = _run("linen", capsys)[0]
  params, bias = ns["params"], ns["params"]["Dense_1"]["bias"]
  loss = lambda p, b: ns["loss_fn"]({**p, "Dense_1": {"kernel": p["Dense_1"]["kernel"], "bias": bias}}, b)
  with_none = {**params, "Dense_1": {"kernel": params["Dense_1"]["kernel"], "bias": None}}
  without = {**params, "Dense_1": {"kernel": params["Dense_1"]["kernel"]}}
  dense_none = curvax.dense_matrix(curvax.hessian(loss, with_none, ns["batch"]))
  np.testing.assert_array_equal(dense_none, curvax.dense_matrix(curvax.hessian(loss, without, ns["batch"])))
  idx = np.sort(curvax.block_indices(ns["H"], lambda path: path != "Dense_1/bias"))
  assert idx.size == ns["H"].size - bias.size
  np.testing.assert_allclose(dense_none, curvax.dense_matrix(ns["H"])[np.ix_(idx, idx)], rtol=1e-5, atol=1e-6)
