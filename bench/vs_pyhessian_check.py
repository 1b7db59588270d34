"""bench/vs_pyhessian.py's check that its PyTorch port is the JAX model: in float64 for identity, in float32 against it.

Both sides evaluate the loss, its gradient and one Hessian-vector product (v: a standard normal draw per leaf, key 7,
drawn in float32 so every dtype probes one direction) on the same parameters and batch, in float64
(`jax.enable_x64`, the model's `dtype`/`param_dtype` float64; the port in torch.float64) and in float32.

  * Identity, float64: the sides agree to `TOL64` (relative). Two float64 evaluations of one function differ by
    rounding, κ·u₆₄ with unit roundoff u₆₄ = 1.1e-16, and the float32 runs bound this problem's κ by 2e5 (their
    errors against float64 are ≤ 1e-2 = κ·u₃₂, u₃₂ = 6e-8), so 1e-9 is 50× over κ·u₆₄; a port difference of
    consequence (LayerNorm's ε, a mask, a scale, a head order) moves the result by more, and shows here where
    float32 rounding would hide it.
  * Float32, what the bench times: each side's float32 result against the float64 reference (the JAX model's) is
    within `TOL32`. That error is float32 rounding amplified by the problem: with Post-LN and √d-scaled tied
    embeddings the first layer's attention logits are in the thousands and nearly one-hot, and where a row is a near
    tie its float32 rounding moves the gradient and the HVP. The same float32 sums taken in another order move the
    port's error by an order of magnitude; `TOL32` is twice the largest such error measured at the bench's sizes
    (reports/BENCH_PYHESSIAN.md), and the difference between the two sides' float32 results is reported, not
    checked: it measures their rounding, not the port.

`check_port(preset, path)` runs both stages and stops the bench (SystemExit) naming the failing quantity and the
leaf that disagrees most; `verdict` is the decision alone.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pyhessian_problem as problem  # noqa: E402

TOL64 = 1e-9
TOL32 = 1e-2  # twice the largest float32 error of equivalent summation orders (module docstring)
QUANTITIES = ("loss", "gradient", "hvp")
# A leaf whose reference is below √ε₆₄ of the whole is zero up to rounding (a key bias's gradient and HVP are exactly
# zero: softmax is invariant to a shift of all of a query's logits); its relative error would measure only rounding.
_ZERO = float(np.sqrt(np.finfo(np.float64).eps))


def _probe(shapes):
  """The HVP's direction: per leaf a standard normal draw with key 7, float32 (the same in every dtype)."""
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415

  return [np.asarray(jax.random.normal(jax.random.key(7), s, jnp.float32)) for s in shapes]


def evaluate_jax(preset, path, dtype):
  """{"loss": float, "gradient": [leaf], "hvp": [leaf]} of the JAX model in `dtype` ("float32" or "float64"),
  leaves as float64 NumPy arrays in `jax.tree.leaves` order."""
  import jax  # noqa: PLC0415
  import jax.numpy as jnp  # noqa: PLC0415
  from flax import traverse_util  # noqa: PLC0415

  import curvax  # noqa: PLC0415
  from models import get_model  # noqa: PLC0415
  from train.loss import make_loss_fn  # noqa: PLC0415

  flat, inputs, targets = problem.read_problem(path)
  with jax.enable_x64(dtype == "float64"):
    loss_fn = make_loss_fn(get_model(problem.model_config(preset, dtype)))
    params = traverse_util.unflatten_dict({tuple(k.split("/")): jnp.asarray(v, dtype) for k, v in flat.items()})
    batch = {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}
    leaves, tree = jax.tree.flatten(params)
    v = jax.tree.unflatten(tree, [jnp.asarray(x, dtype) for x in _probe([x.shape for x in leaves])])
    loss, grad = jax.jit(jax.value_and_grad(loss_fn))(params, batch)  # one compile, not one per op
    hvp = curvax.hessian(loss_fn, params, batch)(v)
    as64 = lambda t: [np.asarray(x, np.float64) for x in jax.tree.leaves(t)]
    return {"loss": float(loss), "gradient": as64(grad), "hvp": as64(hvp)}


def evaluate_torch(preset, path, dtype):
  """`evaluate_jax`'s dict for the PyTorch port in `dtype`: PyHessian's product, the double backward."""
  import torch  # noqa: PLC0415
  import torch_transformer  # noqa: PLC0415

  flat, inputs, targets = problem.read_problem(path)
  model, data = problem.torch_side(preset, flat, inputs, targets, getattr(torch, dtype))
  size = problem.sizes(preset)
  plist = [model.p(n) for n in torch_transformer.flat_names(size["num_encoder_layers"], size["num_decoder_layers"])]
  loss = torch_transformer.token_cross_entropy(model(data), data[1])
  grads = torch.autograd.grad(loss, plist, create_graph=True)
  v = [torch.from_numpy(np.array(x)).to(getattr(torch, dtype)) for x in _probe([tuple(p.shape) for p in plist])]
  hvp = torch.autograd.grad(grads, plist, grad_outputs=v)
  as64 = lambda xs: [x.detach().to(torch.float64).numpy() for x in xs]
  return {"loss": float(loss.item()), "gradient": as64(grads), "hvp": as64(hvp)}


def errors(result, reference, names):
  """Relative errors of `result` against `reference` (the `evaluate_*` dicts): "loss", "gradient", "hvp" over all
  leaves, and per vector "<q>_leaf": (leaf name, its relative error), the leaf that disagrees most among those whose
  reference is not zero up to rounding (`_ZERO`; those count in the whole vector's error)."""
  out = {"loss": abs(result["loss"] - reference["loss"]) / max(abs(reference["loss"]), 1e-300)}
  for q in QUANTITIES[1:]:
    a, b = result[q], reference[q]
    whole = float(np.sqrt(sum(np.sum(x * x) for x in b)))
    out[q] = float(np.sqrt(sum(np.sum((x - y) ** 2) for x, y in zip(a, b)))) / max(whole, 1e-300)
    per_leaf = [
        float(np.linalg.norm(x - y) / np.linalg.norm(y)) if np.linalg.norm(y) > _ZERO * whole else -1.0
        for x, y in zip(a, b)
    ]
    worst = int(np.argmax(per_leaf))
    out[f"{q}_leaf"] = (names[worst], per_leaf[worst])
  return out


def verdict(report, tol64=TOL64, tol32=TOL32):
  """The failures (strings; none: the port passes) of `check_port`'s report: a quantity whose float64 sides differ by
  more than `tol64`, or whose float32 result on either side is farther than `tol32` from the float64 reference."""
  failures = []
  for stage, tol in (("float64", tol64), ("jax_float32", tol32), ("torch_float32", tol32)):
    for q in QUANTITIES:
      err = report[stage][q]
      if not err <= tol:
        leaf = (
            f" (worst leaf {report[stage][q + '_leaf'][0]}: {report[stage][q + '_leaf'][1]:.1e})" if q != "loss" else ""
        )
        failures.append(f"{stage} {q}: relative error {err:.2e} > {tol:g}{leaf}")
  return failures


def check_port(preset, path, tol64=TOL64, tol32=TOL32):
  """Both stages (module docstring) at bench size `preset` on the problem at `path`; the report, else SystemExit.

  Report: "float64" torch vs JAX in float64; "jax_float32" and "torch_float32" each side's float32 against the
  float64 JAX reference; "torch_vs_jax_float32" the sides' float32 difference (reported only); "loss" the float64
  loss."""
  import torch_transformer  # noqa: PLC0415

  size = problem.sizes(preset)
  names = torch_transformer.flat_names(size["num_encoder_layers"], size["num_decoder_layers"])
  ref, torch64 = evaluate_jax(preset, path, "float64"), evaluate_torch(preset, path, "float64")
  jax32, torch32 = evaluate_jax(preset, path, "float32"), evaluate_torch(preset, path, "float32")
  report = {
      "float64": errors(torch64, ref, names),
      "jax_float32": errors(jax32, ref, names),
      "torch_float32": errors(torch32, ref, names),
      "torch_vs_jax_float32": errors(torch32, jax32, names),
      "loss": ref["loss"],
  }
  failures = verdict(report, tol64, tol32)
  if failures:
    raise SystemExit(f"{preset}: the torch port differs from the JAX model: " + "; ".join(failures))
  return report


def summary(report):
  """One line per stage: the three relative errors and the worst leaf of the HVP."""
  lines = []
  for stage in ("float64", "jax_float32", "torch_float32", "torch_vs_jax_float32"):
    r = report[stage]
    lines.append(
        f"  {stage}: loss {r['loss']:.1e}, gradient {r['gradient']:.1e} (worst leaf {r['gradient_leaf'][0]} "
        f"{r['gradient_leaf'][1]:.1e}), hvp {r['hvp']:.1e} (worst leaf {r['hvp_leaf'][0]} {r['hvp_leaf'][1]:.1e})"
    )
  return "\n".join(lines)
