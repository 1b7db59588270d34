"""Curvature on a mesh: the HVP over a batch sharded across devices and the Lanczos basis sharded along n give the
1-device results (top eigenvalue and trace of the `tiny` model: 1e-5 relative in float32 through the library calls,
1e-10 in float64 through `run_analysis(mesh=...)`, main.py's path), the basis really is split (each device holds
(m+1)·n/D entries) and the memory guard counts per device.

Four CPU devices need `--xla_force_host_platform_device_count` before JAX starts, so the computation runs in a
subprocess (bounded in time) that prints its numbers as JSON; the assertions are here.
"""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import init, models
import curvax
from analysis.hessian import hvp_fn
from train.loss import make_loss_fn

assert jax.device_count() == 4, jax.devices()
mesh = Mesh(np.array(jax.devices()), ("data",))
rng = np.random.default_rng(0)
batch = {"inputs": rng.integers(3, 64, (8, 6)).astype(np.int32), "targets": rng.integers(3, 64, (8, 5)).astype(np.int32)}
batch["targets"][1, -2:] = 0
out = {}
for name in ("float32",):  # float64: run_analysis below
  mc = models.ModelConfig.from_config(
      {"preset": "tiny", "dtype": name, "param_dtype": name, "scale_embeddings": False}, vocab_size=64
  )
  model = models.get_model(mc)
  params = init.init_params({"scheme": "xavier"}, model, jax.random.key(0), batch)["params"]
  loss_fn = make_loss_fn(model)
  one = jax.devices()[0]
  local = lambda tree: jax.device_put(tree, one)
  op1 = hvp_fn(loss_fn, local(params), local(jax.tree.map(jnp.asarray, batch)))
  sharded_batch = jax.device_put(batch, NamedSharding(mesh, P("data")))
  replicated = jax.device_put(params, NamedSharding(mesh, P()))
  op4 = hvp_fn(loss_fn, replicated, sharded_batch)
  vec = NamedSharding(mesh, P("data"))
  key = jax.random.key(1)
  top1 = curvax.top_eigenvalues(op1, 2, num_steps=20, key=key)
  top4 = curvax.top_eigenvalues(op4, 2, num_steps=20, key=key, basis_sharding=vec, return_basis=True)
  tr1 = curvax.trace(op1, num_probes=8, key=key, method="hutchinson")
  tr4 = curvax.trace(op4, num_probes=8, key=key, method="hutchinson")
  basis = top4.lanczos.basis
  shard_shapes = sorted({tuple(s.data.shape) for s in basis.addressable_shards})
  out[name] = dict(
      top1=np.asarray(top1.values).tolist(), top4=np.asarray(top4.values).tolist(),
      trace1=float(tr1.estimate), trace4=float(tr4.estimate),
      n=int(sum(x.size for x in jax.tree.leaves(params))), basis_shape=list(basis.shape),
      shard_shapes=[list(s) for s in shard_shapes],
  )
n = out["float32"]["n"]
need = (30 + 1) * (-(-n // 4)) * 4
guard = {}
for limit in (need, need - 1):
  try:
    curvax.check_basis_memory(30, n, jnp.float32, limit, basis_sharding=NamedSharding(mesh, P("data")))
    guard[str(limit)] = "ok"
  except ValueError as e:
    guard[str(limit)] = str(e)
out["guard"] = guard

# run_analysis on the mesh (main.py's path) against run_analysis on one device: float64 ('auto' on CPU).
import tempfile
from analysis.run import run_analysis
from configs import default

acfg = default.get_config().analysis
acfg.update(
    dict(batch_size=8, lanczos_steps=12, top_k=2, bottom_k=0, spectrum=False, blocks=False, grad_norms=False,
         signal=False, trace_probes=6, trace_method="hutchinson")
)
mc = models.ModelConfig.from_config({"preset": "tiny", "scale_embeddings": False}, vocab_size=64)
model = models.get_model(mc)
variables = init.init_params({"scheme": "xavier"}, model, jax.random.key(0), batch)
runs = {}
for name, mesh_ in (("one", None), ("mesh", mesh)):
  with tempfile.TemporaryDirectory() as d:
    r = run_analysis(acfg, model=model, variables=variables, batches=[batch], out_dir=d, label="x", mesh=mesh_,
                     print_fn=lambda *_: None)
    meta = json.load(open(d + "/x/metadata.json"))
  runs[name] = dict(top=np.asarray(r["eigenvalues"]["top"]["values"]).tolist(),
                    trace=float(r["trace"]["estimate"]), dtype=meta["dtype"], sharding=meta.get("sharding", ""))
out["run_analysis"] = runs
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def sharded():
  env = {
      **os.environ,
      "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4",  # + the suite's
      "JAX_PLATFORMS": "cpu",
      "PYTHONPATH": REPO,
  }
  proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stderr[-4000:]
  return json.loads(lines[0][len("RESULT ") :])


@pytest.mark.slow
def test_sharded_batch_and_basis_give_the_one_device_top_eigenvalues_and_trace_float32(sharded):
  dtype, rtol = "float32", 1e-5
  r = sharded[dtype]
  for a, b in zip(r["top1"], r["top4"]):
    assert abs(a - b) <= rtol * abs(a), (dtype, r["top1"], r["top4"])
  assert abs(r["trace1"] - r["trace4"]) <= rtol * abs(r["trace1"]), (dtype, r["trace1"], r["trace4"])
  assert r["top1"][0] > r["top1"][1] > 0  # a real spectrum, not two zeros that agree trivially


@pytest.mark.slow
def test_the_basis_is_split_along_n_over_the_devices(sharded):
  r = sharded["float32"]
  rows, n = r["basis_shape"]
  assert (rows, n) == (21, r["n"])
  # Every device holds all rows and a quarter of the columns (uneven n is padded by XLA: ⌈n/4⌉).
  assert r["shard_shapes"] == [[21, -(-n // 4)]], r["shard_shapes"]


@pytest.mark.slow
def test_run_analysis_on_the_mesh_matches_one_device(sharded):
  one, mesh = sharded["run_analysis"]["one"], sharded["run_analysis"]["mesh"]
  assert one["dtype"] == mesh["dtype"] == "float64"  # analysis.dtype='auto' on CPU
  assert "4 devices" in mesh["sharding"] and "batch rows split" in mesh["sharding"] and not one["sharding"]
  for a, b in zip(one["top"], mesh["top"]):
    assert abs(a - b) <= 1e-10 * abs(a), (one["top"], mesh["top"])
  assert one["top"][0] > one["top"][1] > 0
  assert abs(one["trace"] - mesh["trace"]) <= 1e-10 * abs(one["trace"])


def test_analysis_dtype_auto_is_float32_on_tpu_only(monkeypatch):
  import jax

  from analysis.config import resolved_dtype

  assert resolved_dtype("auto") == "float64"  # this CPU
  monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
  assert (resolved_dtype("auto"), resolved_dtype("float64"), resolved_dtype("float32")) == (
      "float32",
      "float64",
      "float32",
  )


@pytest.mark.slow
def test_the_memory_guard_counts_per_device(sharded):
  n = sharded["float32"]["n"]
  need = 31 * (-(-n // 4)) * 4
  assert sharded["guard"][str(need)] == "ok"
  message = sharded["guard"][str(need - 1)]
  assert f"{need} bytes" in message and "per device (basis sharded over 4 devices" in message
