"""init.schemes + init.init_params: every scheme × architecture realizes its paper's per-role stds (written out
here independently of init/), determinism per key, the residual scalars and embedding norm every scheme starts from,
and `init.scheme='auto'`. The helpers (`make_model`, `make_batch`, `SIZES`, `TRUNC`) are shared with
tests/test_scheme_factors.py (depth factors, hyper-parameters) and tests/test_init_inputs.py (errors, batches)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import init
import models
from init import schemes
from models import ModelConfig, get_model, param_roles
from models.config import ARCHS

TRUNC = 0.87962566  # std of N(0, 1) truncated to ±2 (docs/science.md §1)
KERNELS = ("attn_q", "attn_k", "attn_v", "attn_out", "attn_gate", "mlp_in", "mlp_gate", "mlp_out")
# Model knobs each scheme needs (or is meant for); everything else is SIZES.
SCHEME_MODEL = {
    "xavier": {},
    "bert": {},
    "gpt2": {"norm_position": "pre"},
    "dsinit": {},
    "fixup": {},
    "t5": {"attention_logit_scale": "none", "use_bias": False, "norm_type": "rmsnorm", "norm_position": "pre"},
    "tfixup": {"norm_type": "none", "norm_position": "none"},
    "deepnet": {"residual": "deepnorm"},
    "admin": {"residual": "admin"},
    "rezero": {"residual": "rezero", "norm_type": "none", "norm_position": "none"},
    "ntk": {"parameterization": "ntk", "norm_position": "pre"},
    "mup": {"parameterization": "mup", "attention_logit_scale": "dk", "norm_position": "pre"},
    "megatron": {"norm_position": "pre"},
    "mitchell": {"norm_position": "pre"},
    "olmo2": {"norm_position": "reordered", "norm_type": "rmsnorm", "use_bias": False},
    "small_init": {"norm_position": "pre"},
}
# √(1 − 6φ(3)/(2Φ(3) − 1)): std of N(0, 1) cut at ±3, PyTorch's trunc_normal_(a=−3σ, b=3σ) in OLMo's inits.
TRUNC3 = math.sqrt(1 - 6 * math.exp(-4.5) / math.sqrt(2 * math.pi) / math.erf(3 / math.sqrt(2)))
# Schemes whose depth factors assume two matrices per branch: they refuse a gate (init/schemes.py docstring).
REFUSE_GATES = ("deepnet", "fixup", "tfixup")
# H·d_k = 64 != d = 128, so a swapped fan shows in every fan-dependent rule.
SIZES = dict(
    vocab_size=512,
    scale_embeddings=False,
    d_model=128,
    num_heads=4,
    head_dim=16,
    d_ff=256,
    max_len=128,
    position="learned",
    num_encoder_layers=2,
    num_decoder_layers=2,
)


def test_every_scheme_has_a_model_config():
  assert set(SCHEME_MODEL) == set(schemes.SCHEMES)


def make_model(scheme, arch, **kw):
  cfg = {**SIZES, "arch": arch, "tie_embeddings": arch == "encoder", **SCHEME_MODEL[scheme], **kw}
  return get_model(ModelConfig(**cfg))


def make_batch(arch, vocab=512, seed=0):
  rng = np.random.default_rng(seed)
  inputs = rng.integers(1, vocab, (4, 16)).astype(np.int32)
  targets = rng.integers(1, vocab, (4, 12)).astype(np.int32)
  inputs[0, -5:] = 0
  targets[1, -3:] = 0
  return {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)}


_CACHE = {}


def built(scheme, arch):
  """(model, variables) for init_params with key 0, shared by the tests of one (scheme, arch)."""
  if (scheme, arch) not in _CACHE:
    model = make_model(scheme, arch)
    variables = init.init_params({"scheme": scheme}, model, jax.random.key(0), make_batch(arch))
    _CACHE[(scheme, arch)] = (model, variables)
  return _CACHE[(scheme, arch)]


def residual_layers(mc, stack):
  return mc.num_layers(stack) * (3 if stack == "decoder" and mc.arch == "encoder_decoder" else 2)


def deepnet_beta(mc, stack):
  n, m = mc.num_encoder_layers, mc.num_decoder_layers
  if mc.arch == "encoder":
    return (8 * n) ** -0.25
  if mc.arch == "decoder":
    return (8 * m) ** -0.25
  return 0.87 * (n**4 * m) ** (-1 / 16) if stack == "encoder" else (12 * m) ** -0.25


def paper_std(scheme, r, mc):
  """The papers' per-role std (module docstring of init/schemes.py), or ("const", value) for constants."""
  if r.role == "norm_scale":
    return ("const", 1.0)
  if r.role in ("norm_bias", "bias"):
    return ("const", 0.0)
  if r.role == "residual_scale":
    return ("const", {"rezero": 0.0, "admin": 1.0}[mc.residual])
  d, dk, h, f = mc.d_model, mc.qkv_head_dim, mc.num_heads, mc.d_ff
  xav = math.sqrt(2.0 / (r.fan_in + r.fan_out))
  emb = r.role in ("embedding", "position")
  readout = r.role == "head" and r.sublayer == "head"
  base = d**-0.5 if emb else xav  # xavier's table
  if scheme in ("xavier", "admin", "rezero"):
    return base
  if scheme == "bert":
    return 0.02 * TRUNC
  if scheme == "t5":
    return {
        "attn_q": (d * dk) ** -0.5,
        "attn_k": d**-0.5,
        "attn_v": d**-0.5,
        "attn_out": (h * dk) ** -0.5,
        "mlp_in": d**-0.5,
        "mlp_out": f**-0.5,
        "head": d**-0.5,
        "attn_gate": d**-0.5,
        "mlp_gate": d**-0.5,
    }.get(r.role, 1.0)
  if scheme in ("gpt2", "megatron"):  # Megatron-LM: σ/√(2L) = GPT-2's 1/√R where R = 2L
    return 0.02 / math.sqrt(residual_layers(mc, r.stack)) if r.role in ("attn_out", "mlp_out") else 0.02
  if scheme == "tfixup":
    n = mc.num_encoder_layers if mc.arch != "decoder" else mc.num_decoder_layers
    m = mc.num_decoder_layers if mc.arch != "encoder" else mc.num_encoder_layers
    factor = {"encoder": 0.67 * n**-0.25, "decoder": (9 * m) ** -0.25}
    if r.role == "embedding":
      return d**-0.5 * (9 * m) ** -0.25
    return xav * factor[r.stack] if r.role in ("attn_v", "attn_out", "mlp_in", "mlp_out") else base
  if scheme == "dsinit":
    return xav / math.sqrt(r.layer + 1) if r.role in KERNELS else base
  if scheme == "deepnet":
    return xav * deepnet_beta(mc, r.stack) if r.role in ("attn_v", "attn_out", "mlp_in", "mlp_out") else base
  if scheme == "fixup":
    if r.role in ("attn_out", "mlp_out") or readout:
      return ("const", 0.0)
    return xav / math.sqrt(residual_layers(mc, r.stack)) if r.role in ("attn_v", "mlp_in") else base
  if scheme == "ntk":
    return 1.0
  if scheme == "mup":
    if emb:
      return 1.0
    if readout or r.role == "attn_q":  # default config: zero readout and zero query (TP5 App. D.2)
      return ("const", 0.0)
    return r.fan_in**-0.5
  if scheme == "mitchell":  # Groeneveld et al. 2024 (OLMo): 1/√d; residual outputs ÷ √(2(l+1)), fan d (attn) / d_ff
    if r.role == "attn_out":
      return TRUNC3 / math.sqrt(2 * d * (r.layer + 1))
    if r.role == "mlp_out":
      return TRUNC3 / math.sqrt(2 * f * (r.layer + 1))
    return TRUNC3 / math.sqrt(d)
  if scheme == "olmo2":
    return 0.02 * TRUNC3
  if scheme == "small_init":
    return math.sqrt(2 / (5 * d))
  raise AssertionError(scheme)


def pooled_groups(params, roles, scheme, mc):
  """{(role, stack, sublayer, target): [arrays]} pooling layers of a stack whose target is the same."""
  groups = {}
  for leaf, r in zip(jax.tree.leaves(params), jax.tree.leaves(roles)):
    target = paper_std(scheme, r, mc)
    groups.setdefault((r.role, r.stack, r.sublayer, target), []).append(np.asarray(leaf, np.float64).ravel())
  return {k: np.concatenate(v) for k, v in groups.items()}


def in_fast_tier(scheme, arch):
  """One arch per scheme, in turn (every scheme and every arch among them); the slow tier runs every pair."""
  return ARCHS.index(arch) == sorted(schemes.SCHEMES).index(scheme) % len(ARCHS)


def test_the_fast_tier_draws_every_scheme_and_every_arch():
  fast = [(s, a) for s, a in itertools.product(sorted(schemes.SCHEMES), ARCHS) if in_fast_tier(s, a)]
  assert {s for s, _ in fast} == set(schemes.SCHEMES) and {a for _, a in fast} == set(ARCHS)
  assert len(fast) == len(schemes.SCHEMES)


@pytest.mark.parametrize(
    "scheme,arch",
    [
        pytest.param(*c, marks=() if in_fast_tier(*c) else pytest.mark.slow)
        for c in itertools.product(sorted(schemes.SCHEMES), ARCHS)
    ],
)
def test_realized_std_matches_paper_table(scheme, arch):
  model, variables = built(scheme, arch)
  mc = model.config
  params = variables["params"]
  roles = param_roles(model, params)
  hp = {"std": 0.02, "dsinit_alpha": 1.0, "mup_readout_zero": True, "mup_query_zero": True}
  # The scheme's documented target agrees with the paper's table, leaf by leaf.
  for r in jax.tree.leaves(roles):
    want = paper_std(scheme, r, mc)
    got = schemes.get_scheme(scheme).target_std(r, mc, hp)
    assert got == pytest.approx(0.0 if isinstance(want, tuple) else want, rel=1e-7), r.path
  for (role, stack, sublayer, target), x in pooled_groups(params, roles, scheme, mc).items():
    if isinstance(target, tuple):
      if not (scheme == "admin" and role == "residual_scale"):  # ω is set by profiling (test_procedures)
        assert np.all(x == target[1]), (role, stack, sublayer)
      continue
    assert x.std() == pytest.approx(target, rel=0.03), (role, stack, sublayer, x.size)
    assert abs(x.mean()) < 5 * target / math.sqrt(x.size), (role, stack, sublayer)


# Every scheme once, the architectures in rotation (each arch 4×): the key derivation is shared by all
# schemes, and three more inits per scheme × arch would double this file's time.
@pytest.mark.parametrize("scheme,arch", [(s, ARCHS[i % 3]) for i, s in enumerate(sorted(schemes.SCHEMES))])
def test_same_key_same_params_other_key_different(scheme, arch):
  model, variables = built(scheme, arch)
  batch = make_batch(arch)
  again = init.init_params({"scheme": scheme}, model, jax.random.key(0), batch)
  other = init.init_params({"scheme": scheme}, model, jax.random.key(1), batch)
  assert jax.tree.structure(again) == jax.tree.structure(variables)
  for a, b in zip(jax.tree.leaves(variables), jax.tree.leaves(again)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  random_leaves = 0
  for a, c in zip(jax.tree.leaves(variables["params"]), jax.tree.leaves(other["params"])):
    if np.asarray(a).std() > 0:  # sampled (not a constant): another key must change every such leaf
      assert not np.array_equal(np.asarray(a), np.asarray(c))
      random_leaves += 1
  assert random_leaves >= 8
  # Per-leaf keys differ: two layers' same-shaped kernels are not copies of each other.
  stack = "encoder" if arch == "encoder" else "decoder"
  k0, k1 = (variables["params"][stack][f"layer_{i}"]["self_attn"]["key"]["kernel"] for i in (0, 1))
  assert not np.array_equal(np.asarray(k0), np.asarray(k1))


@pytest.mark.parametrize("scheme,expected", [("bert", 0.0176), ("xavier", 1 / math.sqrt(768))])
def test_768_constants(scheme, expected):
  """docs/science.md §1-2: BERT's 0.02 realizes 0.0176 on a 768×768 kernel; Xavier realizes 1/√768 = 0.0361."""
  model = get_model(
      ModelConfig(
          vocab_size=64,
          scale_embeddings=False,
          arch="decoder",
          num_decoder_layers=1,
          d_model=768,
          num_heads=12,
          d_ff=768,
      )
  )
  params = init.init_params({"scheme": scheme}, model, jax.random.key(0))["params"]
  kernel = np.asarray(params["decoder"]["layer_0"]["mlp"]["wi"]["kernel"])
  assert kernel.shape == (768, 768)
  assert kernel.std() == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(
    "residual,kw",
    [
        ("rezero", {}),
        ("skipinit", {"skipinit_alpha": 0.25}),
        ("scheduled", {"alpha_init": 0.1}),
        ("admin", {}),
        ("layerscale", {}),
        ("layerscale", {"layerscale_init": 0.03}),
    ],
)
def test_residual_scalars_match_the_models_own_init(residual, kw):
  """Residual α/ω and the `residual_alpha` collection are what models/ itself initializes (cross-check)."""
  model = make_model(
      "xavier",
      "decoder",
      residual=residual,
      d_model=16,
      num_heads=2,
      head_dim=None,
      d_ff=16,
      vocab_size=32,
      max_len=16,
      **kw,
  )
  batch = make_batch("decoder", vocab=32)
  ours = init.init_params({"scheme": "xavier"}, model, jax.random.key(0), batch)
  theirs = model.init(jax.random.key(0), batch)  # eager: op compiles are shared across the cases
  assert set(ours) == set(theirs)
  roles = param_roles(model, theirs["params"])
  n = 0
  for a, b, r in zip(jax.tree.leaves(ours["params"]), jax.tree.leaves(theirs["params"]), jax.tree.leaves(roles)):
    if r.role == "residual_scale":
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
      n += 1
  for c in set(theirs) - {"params"}:
    for a, b in zip(jax.tree.leaves(ours[c]), jax.tree.leaves(theirs[c])):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
      n += 1
  assert n == 2 * 2  # 2 layers × (self_attn, mlp)


@pytest.mark.parametrize("scheme", sorted(schemes.SCHEMES))
def test_embedding_norm_starts_as_identity_gain_under_every_scheme(scheme):
  """model.embedding_norm's gain and bias have norm roles, so every scheme starts them at 1 and 0 (BERT's
  LayerNorm init, Devlin et al. 2019; the same rule as every other norm), in each stack."""
  model = make_model(scheme, "encoder_decoder", embedding_norm=True)
  params = init.init_params({"scheme": scheme}, model, jax.random.key(0), make_batch("encoder_decoder"))["params"]
  for stack in ("encoder", "decoder"):
    norm = params[stack]["embedding_norm"]
    np.testing.assert_array_equal(np.asarray(norm["scale"]), np.ones(SIZES["d_model"]))
    if "bias" in norm:
      np.testing.assert_array_equal(np.asarray(norm["bias"]), np.zeros(SIZES["d_model"]))
    rule = schemes.get_scheme(scheme).rule(
        param_roles(model, params)[stack]["embedding_norm"]["scale"], model.config, {}
    )
    assert rule.initializer == "ones"


def test_auto_scheme_follows_the_model_config():
  """init.scheme='auto' (configs/default.py) derives the scheme from the parameterization and residual rule."""
  cases = [
      (dict(), "xavier"),
      (dict(parameterization="ntk"), "ntk"),
      (dict(parameterization="mup"), "mup"),
      (dict(residual="deepnorm"), "deepnet"),
      (dict(residual="admin"), "admin"),
      (dict(residual="rezero"), "rezero"),
  ]
  for kw, expected in cases:
    mc = ModelConfig(**{**SIZES, "arch": "decoder", **kw})
    assert schemes.derived_scheme(mc) == expected, kw
  # 'auto' through init_params gives the same parameters as the derived scheme named explicitly.
  model = make_model("xavier", "decoder", parameterization="ntk")
  auto = init.init_params({"scheme": "auto"}, model, jax.random.key(0))
  named = init.init_params({"scheme": "ntk"}, model, jax.random.key(0))
  jax.tree.map(np.testing.assert_array_equal, auto, named)


GATED = dict(mlp="swiglu", attention_gate=True, d_ff=192)


@pytest.mark.parametrize("scheme", sorted(schemes.SCHEMES))
def test_every_scheme_draws_the_gate_matrices_by_role_or_refuses_them(scheme):
  """A gated MLP's W (mlp_gate) and gated attention's W_θ (attn_gate) realize the scheme's rule for their role (the
  paper_std table, pooled over the decoder's layers); the two-matrix depth schemes refuse the model in one line,
  naming init.scheme and the model key, before any compute."""
  model = make_model(scheme, "decoder", **GATED)
  if scheme in REFUSE_GATES:
    for kw, key in ((GATED, "model.mlp='swiglu'"), (dict(attention_gate=True), "model.attention_gate=True")):
      with pytest.raises(ValueError, match=rf"config.init.scheme='{scheme}' contradicts config.{key}: .*third matrix"):
        init.init_params({"scheme": scheme}, make_model(scheme, "decoder", **kw), jax.random.key(0))
    return
  params = init.init_params({"scheme": scheme}, model, jax.random.key(0), make_batch("decoder"))["params"]
  roles = param_roles(model, params)
  gates = {k: x for k, x in pooled_groups(params, roles, scheme, model.config).items() if k[0] in schemes.GATE_ROLES}
  assert {k[0] for k in gates} == {"attn_gate", "mlp_gate"}
  for (role, _, _, target), x in gates.items():
    if isinstance(target, tuple):
      assert np.all(x == target[1]), role
    else:
      assert x.std() == pytest.approx(target, rel=0.03), (role, target)


def test_new_scheme_constants_at_paper_sizes():
  """OLMo-7B (d = 4096, d_ff = 11008, 32 layers) under 'mitchell': attn_out of layer 0 has σ = 1/√(2·4096) = 0.011049,
  of layer 31 1/√(2·4096·32) = 0.0019531, mlp_out of layer 0 1/√(2·11008) = 0.0067395, W_q 1/√4096 = 0.015625 (each
  realized × 0.98658); 'olmo2' realizes 0.02 × 0.98658 = 0.019732; 'small_init' at d = 768: √(2/3840) = 0.022822;
  'megatron' is gpt2's rule: σ/√(2L) on the residual outputs (24 layers: 0.02/√48 = 0.0028868)."""
  mc = ModelConfig(arch="decoder", num_decoder_layers=32, d_model=4096, num_heads=32, d_ff=11008, vocab_size=8)
  role = lambda r, layer, fi, fo: models.ParamRole(r, "decoder", layer, "self_attn", fi, fo, "")
  std = lambda name, r, layer, fi, fo, hp={}: schemes.get_scheme(name).target_std(role(r, layer, fi, fo), mc, hp)
  assert TRUNC3 == pytest.approx(0.98658, abs=1e-5)
  assert std("mitchell", "attn_out", 0, 4096, 4096) == pytest.approx(0.011049 * TRUNC3, rel=1e-4)
  assert std("mitchell", "attn_out", 31, 4096, 4096) == pytest.approx(0.0019531 * TRUNC3, rel=1e-4)
  assert std("mitchell", "mlp_out", 0, 11008, 4096) == pytest.approx(0.0067395 * TRUNC3, rel=1e-4)
  assert std("mitchell", "attn_q", 5, 4096, 4096) == pytest.approx(0.015625 * TRUNC3, rel=1e-4)
  assert std("olmo2", "mlp_out", 3, 11008, 4096, {"std": 0.02}) == pytest.approx(0.019732, rel=1e-4)
  small = ModelConfig(arch="decoder", d_model=768, num_heads=12, d_ff=3072, vocab_size=8)
  assert schemes.get_scheme("small_init").target_std(role("mlp_in", 0, 768, 3072), small, {}) == pytest.approx(
      0.022822, rel=1e-4
  )
  megatron = ModelConfig(arch="decoder", num_decoder_layers=24, d_model=64, num_heads=4, d_ff=64, vocab_size=8)
  assert schemes.get_scheme("megatron").target_std(role("mlp_out", 0, 64, 64), megatron, {"std": 0.02}) == (
      pytest.approx(0.02 / math.sqrt(48), rel=1e-6)
  )
  assert schemes.SCHEMES["megatron"].matrix_rule is schemes.SCHEMES["gpt2"].matrix_rule
