"""Operators are data, programs are cached: a second call of each public curvature routine with a new operator of the
same structure (another checkpoint and batch, a new `make_loss_fn`, another block of the same shape) runs no XLA
compilation, while a changed shape does. Compilations are counted with JAX's own monitoring event for backend
compiles, so any compile, eager op or program, is seen.

Also here: probes in lockstep give the nodes, weights and traces of probes one after another (float64), the memory
guard scales with the probes in lockstep, and the convergence stop of `top_eigenvalues`.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curvax
from analysis import hessian
from analysis.blocks import block_operator, block_params, model_blocks
from analysis.run import run_analysis
from configs import default
from models import get_model, param_roles
from tests import tiny
from tests.conftest import COMPILE_EVENT, count_compiles
from train.loss import make_logits_fn, make_loss_fn

VOCAB = 11


def _batch(seed, rows=2, length=5):
  rng = np.random.default_rng(seed)
  return {k: jnp.asarray(rng.integers(1, VOCAB, (rows, length)), jnp.int32) for k in ("inputs", "targets")}


@pytest.fixture(scope="module")
def model():
  return get_model(tiny.model_config(vocab_size=VOCAB, max_len=8))


@functools.partial(jax.jit, static_argnums=0)
def _init(model, key, batch):
  return model.init(key, batch)


def _state(model, seed, rows=2):
  """(variables, batch) of another 'checkpoint': a fresh init seed and a fresh batch of the same shapes."""
  batch = _batch(seed, rows)
  return _init(model, jax.random.key(seed), batch), batch


ROUTINES = {
    "lanczos": lambda op, p, key: curvax.lanczos(op, num_steps=6, v0=jax.tree.map(jnp.ones_like, p)),
    "lanczos_partial": lambda op, p, key: curvax.lanczos(
        op, num_steps=6, v0=jax.tree.map(jnp.ones_like, p), reorthogonalize="partial"
    ),
    "top_eigenvalues": lambda op, p, key: curvax.top_eigenvalues(op, 2, num_steps=6, key=key),
    "top_eigenvalues_tol": lambda op, p, key: curvax.top_eigenvalues(op, 1, num_steps=6, key=key, tol=0.01),
    "bottom_eigenvalues": lambda op, p, key: curvax.bottom_eigenvalues(op, 1, num_steps=6, key=key),
    "spectral_density": lambda op, p, key: curvax.spectral_density(
        op, num_steps=5, num_probes=3, key=key, num_bootstrap=10, grid_size=16
    ),
    "spectral_density_lockstep": lambda op, p, key: curvax.spectral_density(
        op, num_steps=5, num_probes=3, key=key, num_bootstrap=10, grid_size=16, probe_batch=3
    ),
    "hutchinson": lambda op, p, key: curvax.trace(op, num_probes=4, key=key),
    "hutch++": lambda op, p, key: curvax.trace(op, num_probes=6, key=key, method="hutch++"),
}
OPERATORS = {
    "hessian": lambda model, v, b: hessian.hvp_fn(make_loss_fn(model), v["params"], b),
    "hessian_two_batches": lambda model, v, b: hessian.hvp_fn(
        make_loss_fn(model), v["params"], [b, jax.tree.map(lambda x: x[::-1], b)]
    ),
    "hessian_jvp": lambda model, v, b: hessian.hvp_fn(make_loss_fn(model), v["params"], b, linearize=False),
    "gauss_newton": lambda model, v, b: hessian.ggn_vp_fn(make_logits_fn(model), v["params"], b),
}


# Every routine on the Hessian; every other operator on one routine (the programs are the same).
CASES = [(r, "hessian") for r in sorted(ROUTINES)] + [
    ("top_eigenvalues", o) for o in sorted(OPERATORS) if o != "hessian"
]


@pytest.mark.parametrize("routine,operator", CASES)
@pytest.mark.slow
def test_second_call_with_a_new_operator_of_the_same_structure_compiles_nothing(model, routine, operator):
  results = []
  for seed in (1, 2):  # the first call compiles; the second must not
    with count_compiles() as compiles:
      variables, batch = _state(model, seed)
      op = OPERATORS[operator](model, variables, batch)
      out = jax.block_until_ready(ROUTINES[routine](op, variables["params"], jax.random.key(seed)))
    results.append((len(compiles), out))
  assert results[0][0] > 0
  assert results[1][0] == 0, f"the second call compiled {results[1][0]} programs"
  # The cached program computes with the new operator: the results differ between checkpoints.
  leaves = [np.concatenate([np.ravel(x) for x in jax.tree.leaves(r[1])]).astype(np.float64) for r in results]
  assert not np.allclose(leaves[0], leaves[1])


@pytest.mark.slow
def test_a_changed_shape_compiles(model):
  variables, batch = _state(model, 1)
  curvax.top_eigenvalues(
      hessian.hvp_fn(make_loss_fn(model), variables["params"], batch), 1, num_steps=4, key=jax.random.key(0)
  )
  with count_compiles() as compiles:
    variables, batch = _state(model, 2, rows=3)  # a new batch size: new residual shapes
    curvax.top_eigenvalues(
        hessian.hvp_fn(make_loss_fn(model), variables["params"], batch), 1, num_steps=4, key=jax.random.key(0)
    )
  assert len(compiles) > 0


def test_blocks_of_the_same_shape_share_one_program(model):
  variables, batch = _state(model, 1)
  params = variables["params"]
  full = hessian.hvp_fn(make_loss_fn(model), params, batch)
  names = ["encoder/layer_0/attn_q", "encoder/layer_0/attn_k", "decoder/layer_0/attn_v", "decoder/layer_0/cross_attn_q"]
  counts, values = [], []
  for i, name in enumerate(names):
    with count_compiles() as compiles:
      op, example = block_operator(full, params, name, model=model)
      e = jax.block_until_ready(curvax.top_eigenvalues(op, 1, num_steps=5, key=jax.random.key(i)))
    counts.append(len(compiles))
    values.append(float(e.values[0]))
    assert list(example) == sorted(example) and all(name.split("/")[0] in p for p in example)
  assert counts[0] > 0 and counts[1:] == [0, 0, 0], counts
  assert len(set(values)) == len(values)  # four different blocks were analyzed


@pytest.mark.slow
def test_block_operator_matches_the_per_block_linearization(model):
  """The block of the full operator equals the Hessian of the loss restricted to the block (independent route)."""
  variables, batch = _state(model, 1)
  params = variables["params"]
  loss_fn = make_loss_fn(model)
  name = "decoder/layer_0/mlp_in"
  op, example = block_operator(hessian.hvp_fn(loss_fn, params, batch), params, name, model=model)
  leaves, treedef = jax.tree.flatten(params)
  paths = block_params(params, name, model=model)
  index = {p: i for i, p in enumerate(sorted(paths))}
  flat_paths = [r.path for r in jax.tree.leaves(param_roles(model, params), is_leaf=lambda r: hasattr(r, "path"))]

  def sub_loss(sub):
    return loss_fn(
        jax.tree.unflatten(treedef, [sub[p] if p in index else x for p, x in zip(flat_paths, leaves)]), batch
    )

  v = jax.tree.map(lambda x: jax.random.normal(jax.random.key(3), x.shape, x.dtype), example)
  ref = jax.jvp(jax.grad(sub_loss), (example,), (v,))[1]
  got = op(v)
  for p in example:
    np.testing.assert_allclose(got[p], ref[p], rtol=2e-4, atol=1e-6)


@pytest.mark.slow
def test_run_analysis_compiles_each_program_once_and_nothing_the_second_time(model, tmp_path):
  """Every block of the model is analyzed, but the Lanczos program compiles once per distinct leaf-size signature
  (plus the full operator's top and bottom runs); a second checkpoint compiles nothing at all."""
  cfg = default.get_config().analysis
  cfg.dtype = "float32"
  cfg.batch_size, cfg.num_batches = 4, 1
  cfg.lanczos_steps, cfg.top_k, cfg.bottom_k, cfg.num_probes, cfg.trace_probes = 3, 1, 1, 2, 4
  cfg.block_lanczos_steps = 2
  names = []

  def listener(event, duration, fun_name="", **kwargs):
    if event == COMPILE_EVENT:
      names.append(fun_name)

  counts = []
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    for seed in (1, 2):
      variables, batch = _state(model, seed, rows=4)  # a batch shape no other test uses: nothing is cached yet
      before = len(names)
      run_analysis(
          cfg,
          model=model,
          variables=variables,
          batches=[batch],
          out_dir=str(tmp_path),
          label=f"s{seed}",
          print_fn=lambda line: None,
      )
      counts.append(len(names) - before)
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  assert counts[1] == 0, counts
  params = variables["params"]
  blocks = model_blocks(model)
  signatures = {
      tuple(sorted(np.size(x) for x in jax.tree.leaves(block_params(params, name, model=model)))) for name in blocks
  }
  assert len(blocks) > 2 * len(signatures)  # the test has blocks to share
  assert names.count("jit(_extreme_program)") == 2 + len(signatures), (names, signatures)


def test_plain_callables_still_work_and_are_not_retained():
  """A plain closure is compiled per call (it is part of the program) and is released after the call."""
  import gc
  import weakref

  a = jnp.diag(jnp.arange(1.0, 11.0))

  class Matvec:

    def __call__(self, x):
      return a @ x

  mv = Matvec()
  ref = weakref.ref(mv)
  res = curvax.lanczos(curvax.as_operator(mv, jnp.ones(10)), num_steps=10, v0=jnp.ones(10))
  np.testing.assert_allclose(np.sort(res.valid_ritz()[0]), np.arange(1.0, 11.0), rtol=1e-4)
  del mv, res
  gc.collect()
  assert ref() is None


def test_callbacks_are_operands_not_program_structure():
  a = jnp.diag(jnp.arange(1.0, 21.0))
  op = jax.tree_util.Partial(_matmul, a)
  seen = {1: [], 2: []}
  for i in (1, 2):
    with count_compiles() as compiles:
      curvax.lanczos(
          curvax.as_operator(op, jnp.ones(20)),
          num_steps=8,
          v0=jnp.ones(20),
          callback=lambda s, m, i=i: seen[i].append((s, m)),
          callback_every=4,
      )
    if i == 2:
      assert len(compiles) == 0
  assert seen[1] == seen[2] == [(4, 8), (8, 8)]


def _matmul(a, x):
  return a @ x


@pytest.fixture
def x64():
  with jax.enable_x64(True):
    yield


@pytest.mark.slow
def test_lockstep_probes_give_the_same_nodes_weights_and_traces(x64):
  rng = np.random.default_rng(0)
  b = rng.standard_normal((40, 40))
  a = jnp.asarray((b + b.T) / 2)
  op = jax.tree_util.Partial(_matmul, a)
  example = jnp.zeros(40)
  key = jax.random.key(5)
  for mode in ("full", "partial"):
    seq = curvax.spectral_density(
        curvax.as_operator(op, example), num_steps=12, num_probes=5, key=key, probe_batch=1, reorthogonalize=mode
    )
    for batch in (2,):  # 5 probes in lockstep pairs: a batched map and a remainder
      lock = curvax.spectral_density(
          curvax.as_operator(op, example), num_steps=12, num_probes=5, key=key, probe_batch=batch, reorthogonalize=mode
      )
      np.testing.assert_allclose(lock.nodes, seq.nodes, rtol=1e-12, atol=1e-12)
      np.testing.assert_allclose(lock.weights, seq.weights, rtol=1e-10, atol=1e-12)
  for method, probes in (("hutchinson", 7), ("hutch++", 9)):
    seq = curvax.trace(curvax.as_operator(op, example), num_probes=probes, key=key, method=method, probe_batch=1)
    lock = curvax.trace(curvax.as_operator(op, example), num_probes=probes, key=key, method=method, probe_batch=3)
    np.testing.assert_allclose(lock.estimate, seq.estimate, rtol=1e-12)
    np.testing.assert_allclose(lock.std_error, seq.std_error, rtol=1e-10)


def test_memory_guard_counts_probes_in_lockstep():
  op = jax.tree_util.Partial(_matmul, jnp.eye(100))
  one_basis = 11 * 100 * 4  # (num_steps + 1) * n * 4 bytes
  curvax.spectral_density(
      curvax.as_operator(op, jnp.zeros(100, jnp.float32)),
      num_steps=10,
      num_probes=4,
      key=jax.random.key(0),
      probe_batch=1,
      max_basis_bytes=one_basis,
  )
  with pytest.raises(ValueError, match="4 probe\\(s\\) in lockstep"):
    curvax.spectral_density(
        curvax.as_operator(op, jnp.zeros(100, jnp.float32)),
        num_steps=10,
        num_probes=4,
        key=jax.random.key(0),
        probe_batch=4,
        max_basis_bytes=one_basis,
    )
  with pytest.raises(ValueError, match="probe_batch=5 must be an int in \\[1, num_probes=4\\]"):
    curvax.spectral_density(
        curvax.as_operator(op, jnp.zeros(100, jnp.float32)),
        num_steps=10,
        num_probes=4,
        key=jax.random.key(0),
        probe_batch=5,
    )


@pytest.mark.slow
def test_top_eigenvalues_stop_when_certified(x64):
  """With tol, Lanczos stops once the bound certifies the top eigenvalue to tol·|θ| (and not before)."""
  d = jnp.concatenate([jnp.asarray([10.0, 5.0]), jnp.linspace(0.0, 1.0, 198)])
  op = jax.tree_util.Partial(_scale, d)
  full = curvax.top_eigenvalues(curvax.as_operator(op, jnp.zeros(200)), 1, num_steps=60, key=jax.random.key(0))
  early = curvax.top_eigenvalues(
      curvax.as_operator(op, jnp.zeros(200)), 1, num_steps=60, key=jax.random.key(0), tol=1e-6
  )
  k = int(early.lanczos.num_steps_taken)
  assert bool(early.lanczos.converged) and not bool(early.lanczos.breakdown) and k < 60
  assert float(early.bounds[0]) <= 1e-6 * float(early.values[0])
  assert abs(float(early.values[0]) - 10.0) <= float(early.bounds[0]) + 1e-12
  # One step fewer is not certified: the run with num_steps = k - 1 does not meet the bound.
  short = curvax.top_eigenvalues(curvax.as_operator(op, jnp.zeros(200)), 1, num_steps=k - 1, key=jax.random.key(0))
  assert float(short.bounds[0]) > 1e-6 * float(short.values[0])
  assert not bool(full.lanczos.converged) and int(full.lanczos.num_steps_taken) == 60


def _scale(d, x):
  return d * x


def test_flat_spec_round_trip_matches_ravel_pytree():
  tree = {"b": jnp.arange(6.0).reshape(2, 3), "a": [jnp.ones(2), jnp.zeros((1, 1, 2))]}
  spec = curvax.FlatSpec.of(tree)
  flat, unravel = jax.flatten_util.ravel_pytree(tree)
  np.testing.assert_array_equal(spec.ravel(tree), flat)
  assert spec.size == flat.size and spec == curvax.FlatSpec.of(jax.tree.map(lambda x: x + 1, tree))
  back = spec.unravel(flat)
  for x, y in zip(jax.tree.leaves(back), jax.tree.leaves(unravel(flat))):
    np.testing.assert_array_equal(x, y)
  with pytest.raises(ValueError, match="example has 3 entries"):
    curvax.as_operator(curvax.HessianOperator([], jnp.ones(0), spec), jnp.zeros(3))


@pytest.mark.slow
def test_operators_are_pytrees_with_residual_leaves(model):
  variables, batch = _state(model, 1)
  op = hessian.hvp_fn(make_loss_fn(model), variables["params"], batch)
  leaves, treedef = jax.tree.flatten(op)
  assert sum(x.size for x in leaves) > curvax.FlatSpec.of(variables["params"]).size  # residuals, not only params
  rebuilt = jax.tree.unflatten(treedef, leaves)
  v = jax.tree.map(jnp.ones_like, variables["params"])
  for x, y in zip(jax.tree.leaves(op(v)), jax.tree.leaves(jax.jit(lambda o, v: o(v))(rebuilt, v))):
    np.testing.assert_allclose(x, y, rtol=1e-6)
  other = hessian.hvp_fn(make_loss_fn(dataclasses.replace(model)), _state(model, 2)[0]["params"], _batch(2))
  assert jax.tree.structure(other) == treedef
