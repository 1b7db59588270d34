"""init.procedures: Admin's profiling pass against an independent recomputation of the branch variances
(numpy, float64, from a separate ω = 1 forward pass), its conventions, and errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import init
from init import procedures
from models import ModelConfig, get_model, param_roles
from models.config import ARCHS

SIZES = dict(
    vocab_size=300,
    scale_embeddings=False,
    d_model=32,
    num_heads=2,
    d_ff=64,
    max_len=64,
    num_encoder_layers=2,
    num_decoder_layers=2,
    residual="admin",
    norm_position="post",
)


def admin_model(arch):
  return get_model(ModelConfig(arch=arch, tie_embeddings=arch == "encoder", **SIZES))


def make_batch(seed=0, pad=True):
  rng = np.random.default_rng(seed)
  inputs = rng.integers(1, 300, (3, 10)).astype(np.int32)
  targets = rng.integers(1, 300, (3, 9)).astype(np.int32)
  if pad:
    inputs[0, -4:] = 0
    targets[2, -3:] = 0
  return {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}


def forward_batch(arch, batch):
  """What the model reads from a training batch: an encoder trains on the text in `targets` (init/params.py)."""
  return {"inputs": batch["targets"]} if arch == "encoder" else batch


def omegas(model, params):
  """{(stack, layer, sublayer): ω vector} via param_roles."""
  out = {}
  for leaf, r in zip(jax.tree.leaves(params), jax.tree.leaves(param_roles(model, params))):
    if r.role == "residual_scale":
      out[(r.stack, r.layer, r.sublayer)] = np.asarray(leaf, np.float64)
  return out


@functools.lru_cache(maxsize=None)
def forward_recording(model):
  """The model's jitted forward pass with `intermediates` recorded (one compile per model in this file)."""
  return jax.jit(lambda v, b: model.apply(v, b, mutable=["intermediates"]))


def reference_variances(model, params, batch):
  """Per stack: [Var x_0, Var F_1, Var F_2, ...] in execution order, numpy float64, from a pass with ω = 1."""
  ones = jax.tree.map(
      lambda p, r: jnp.ones_like(p) if r.role == "residual_scale" else p, params, param_roles(model, params)
  )
  _, state = forward_recording(model)({"params": ones}, batch)
  inter = state["intermediates"]
  out = {}
  for stack in model.config.stacks:
    valid = np.asarray(batch["inputs" if stack == "encoder" else "targets"]) > 0

    def var(x):
      return float(np.var(np.asarray(x, np.float64)[valid]))  # all features at valid positions

    seq = [((None, None), var(inter[stack]["stream_0"][0]))]
    for layer in range(model.config.num_layers(stack)):
      for sub in ("self_attn", "cross_attn", "mlp"):
        name = f"{sub}_branch"
        if name in inter[stack][f"layer_{layer}"]:
          seq.append(((layer, sub), var(inter[stack][f"layer_{layer}"][name][0])))
    out[stack] = seq
  return out


@pytest.mark.parametrize("arch", ARCHS)
def test_admin_omega_squared_is_sum_of_earlier_branch_variances(arch):
  """Liu et al. 2020, Eq. 6 with Transformer-Clinic's start: ω_1 = 1, ω_i² = Var x_0 + Σ_{1≤j<i} Var F_j."""
  model = admin_model(arch)
  batch = make_batch()
  params = init.init_params({"scheme": "admin"}, model, jax.random.key(0), batch)["params"]
  got = omegas(model, params)
  ref = reference_variances(model, params, forward_batch(arch, batch))
  n_checked = 0
  for stack, seq in ref.items():
    running = seq[0][1]
    for i, ((layer, sub), var_f) in enumerate(seq[1:]):
      omega = got[(stack, layer, sub)]
      assert omega.shape == (32,) and np.all(omega == omega[0])
      expected = 1.0 if i == 0 else running
      assert omega[0] ** 2 == pytest.approx(expected, rel=1e-4), (stack, layer, sub)
      running += var_f
      n_checked += 1
  assert n_checked == len(got) == {"encoder": 4, "decoder": 4, "encoder_decoder": 4 + 6}[arch]
  # The profiled values are not trivially 1: later ω grow with the accumulated branch variance.
  assert max(v[0] for v in got.values()) > 1.2


@pytest.mark.parametrize("arch", ["encoder", "decoder"])
def test_admin_matches_transformer_clinic_recursion(arch):
  """Clinic's sequential rule ratio ← √(Var[ω_i·x_{i−1}] + Var F_i) (ω_1 = 1), run on the profiled model's own
  forward pass, agrees with the one-pass closed form to 2%: every post-LN x_{i−1} (i ≥ 2) has unit variance at
  init. (Not for an encoder-decoder's decoder: its cross-attention reads the encoder output, which the
  encoder's ω change; see init/procedures.py.)"""
  model = admin_model(arch)
  batch = make_batch()
  params = init.init_params({"scheme": "admin"}, model, jax.random.key(3), batch)["params"]
  got = omegas(model, params)
  batch = forward_batch(arch, batch)
  _, state = forward_recording(model)({"params": params}, batch)
  for stack in model.config.stacks:
    rec = state["intermediates"][stack]
    valid = np.asarray(batch["inputs" if stack == "encoder" else "targets"]) > 0
    ratio_sq = 1.0
    for layer in range(model.config.num_layers(stack)):
      for sub in ("self_attn", "cross_attn", "mlp"):
        if f"{sub}_branch" not in rec[f"layer_{layer}"]:
          continue
        omega = got[(stack, layer, sub)][0]
        assert omega**2 == pytest.approx(ratio_sq, rel=2e-2), (stack, layer, sub)
        x_in = np.asarray(rec[f"layer_{layer}"][f"{sub}_residual_in"][0], np.float64)[valid]
        f = np.asarray(rec[f"layer_{layer}"][f"{sub}_branch"][0], np.float64)[valid]
        ratio_sq = np.var(omega * x_in) + np.var(f)


def test_admin_ignores_padding_and_incoming_omega():
  """Padding positions do not enter the variances; ω is reset to 1 before profiling."""
  model = admin_model("encoder_decoder")
  batch = make_batch()
  variables = init.init_params({"scheme": "admin"}, model, jax.random.key(0), batch)
  # Extra padding columns filled by the model's computation at padded positions: same ω.
  padded = {k: jnp.pad(v, ((0, 0), (0, 4))) for k, v in batch.items()}
  reprofiled = procedures.admin_profile(variables, model, padded)  # incoming ω are the profiled ones, not 1
  for k, v in omegas(model, variables["params"]).items():
    np.testing.assert_allclose(omegas(model, reprofiled["params"])[k], v, rtol=1e-5)


def test_admin_profile_rejects_non_admin_model():
  model = get_model(ModelConfig(arch="decoder", **{**SIZES, "residual": "plain"}))
  variables = init.init_params({"scheme": "xavier"}, model, jax.random.key(0))
  with pytest.raises(ValueError, match=r"model.residual='admin'.*got 'plain'"):
    procedures.admin_profile(variables, model, make_batch())


def test_procedure_registry():
  assert procedures.get_procedure("admin_profile") is procedures.admin_profile
  assert {s.procedure for s in init.SCHEMES.values()} - {None} <= set(procedures.PROCEDURES)
  with pytest.raises(ValueError, match=r"unknown init procedure 'nope'; valid: \['admin_profile'\]"):
    procedures.get_procedure("nope")
