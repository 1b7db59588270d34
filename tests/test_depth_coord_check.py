"""CompleteP / Depth-µP (Dey et al. 2025, "Don't be lazy: CompleteP...", Table 1; Bordelon et al. 2024): the branch
multiplier (L/L_base)^{−α} and the learning-rate rule (L/L_base)^{α−1} against their closed forms, and the depth
coordinate check (analysis/coord_check.py: `depth_coord_check`).

The coordinate check's setting: a Pre-LN causal LM of width 64 (4 heads, d_ff 128, embeddings ×√d), Xavier init,
one batch of 8 sequences of 8 tokens, one Adam step at a constant η = 1e-3, depths L = 2, 4, 8, 16 (8×), 2 inits
averaged. CompleteP with α = 1 and L_base = 1 (branches × 1/L, the paper's L^{−α}): the residual stream after the last
layer at init, its change after the step and the change of the logits are each within 1.3× (max/min) across depths
(measured 1.16×, 1.20×, 1.08×: the stream converges to x_0 + O(L^{−1/2}) from above; with L = 32 added, 1.16×,
1.27×, 1.07×). With the plain residual the same three grow monotonically with depth, by more than `GROWTH` = 1.6×
from L = 2 to 16 (measured 2.2×, 15×, 5.2×; to L = 32: 3.2×, 29×, 6.6×): the stream's size like √L, its one-step
change like L. L = 32 is left out of the test: it alone cost as much as L = 2 to 16 together (22 s of 51 s per
residual rule on 2 cores), and the 8× range already separates the two rules by 45× in the stream's change.
The modern block (RMSNorm, RoPE, SwiGLU, GQA, no biases) under CompleteP is checked from L = 2 to 32 at width 32
(`test_completep_keeps_the_modern_block_flat_in_depth_up_to_32_layers`; its measurements: docs/science.md).
"""

import jax
import numpy as np
import pytest

import models
from analysis import coord_check
from configs import default
from tests import tiny
from train import config as config_lib

DEPTHS = (2, 4, 8, 16)
VOCAB = 64
TOLERANCE = 1.3
GROWTH = 1.6  # the plain residual's least growth from L = 2 to 16, above CompleteP's TOLERANCE


def test_completep_branch_multiplier_is_l_over_l_base_to_the_minus_alpha():
  """x_out − x_in = (L/L_base)^{−α}·F for every sublayer: L = 4, L_base = 2, α = 1 (CompleteP) gives 1/2 and
  α = 1/2 (Depth-µP) 1/√2; for the 2-layer encoder of the same model (L/L_base = 1) the factor is 1."""
  for alpha, factor in ((1.0, 0.5), (0.5, 2**-0.5)):
    c = tiny.model_config(
        residual="completep",
        norm_position="pre",
        num_encoder_layers=2,
        num_decoder_layers=4,
        depth_alpha=alpha,
        depth_base=2,
    )
    model = models.get_model(c)
    variables = model.init(jax.random.key(0), tiny.batch())
    _, state = model.apply(variables, tiny.batch(), mutable=["intermediates"])
    for stack, layers, f in (("decoder", 4, factor), ("encoder", 2, 1.0)):
      for i in range(layers):
        inter = state["intermediates"][stack][f"layer_{i}"]
        for sub in ("self_attn", "mlp"):
          delta = inter[f"{sub}_residual_out"][0] - inter[f"{sub}_residual_in"][0]
          np.testing.assert_allclose(delta, f * inter[f"{sub}_branch"][0], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_completep_learning_rates_are_l_over_l_base_to_the_alpha_minus_one():
  """Dey et al. 2025, Table 1 (AdamW): every parameter inside a layer (hidden matrices, biases, norms) × (L/L_base)^{α−1}
  — 1 for CompleteP's α = 1, (8/2)^{−1/2} = 1/2 for Depth-µP's α = 1/2 — embeddings and readout × 1; under µP the
  hidden matrices also get 1/width_ratio."""
  for alpha, expected in ((1.0, 1.0), (0.5, 0.5)):
    c = tiny.model_config(
        residual="completep", norm_position="pre", arch="decoder", num_decoder_layers=8, depth_alpha=alpha
    )
    params = models.get_model(c).init(jax.random.key(0), {"targets": tiny.batch()["targets"]})["params"]
    mult = models.lr_multipliers(params, c)
    assert mult["decoder"]["layer_3"]["mlp"]["wi"]["kernel"] == pytest.approx(expected)
    assert mult["decoder"]["layer_7"]["self_attn_norm"]["scale"] == pytest.approx(expected)
    assert mult["token_embedding"]["embedding"] == 1.0
  c = tiny.model_config(
      residual="completep",
      norm_position="pre",
      arch="decoder",
      num_decoder_layers=8,
      depth_alpha=0.5,
      parameterization="mup",
      attention_logit_scale="dk",
      tie_embeddings=False,
      d_model=16,
      mup_base_width=8,
  )
  params = models.get_model(c).init(jax.random.key(0), {"targets": tiny.batch()["targets"]})["params"]
  assert models.lr_multipliers(params, c)["decoder"]["layer_0"]["mlp"]["wo"]["kernel"] == pytest.approx(0.5 / 2)


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"model.norm_position": "post"}, r"config.model.residual='completep' contradicts config.model.norm_position"),
        ({"model.depth_alpha": 1.5}, r"config.model.depth_alpha=1.5 is invalid; valid: a number in \[0, 1\]"),
        (
            {"model.depth_alpha": 0.5, "optim.name": "sgd"},
            r"config.model.residual='completep' contradicts config.optim",
        ),
    ],
)
def test_bad_completep_values_are_named(overrides, match):
  config = default.get_config()
  config.model.residual, config.model.norm_position = "completep", "pre"
  for key, value in overrides.items():
    group, name = key.split(".")
    config[group][name] = value
  with pytest.raises(ValueError, match=match):
    config_lib.resolve(config)


def _config(residual):
  config = default.get_config()
  m = config.model
  m.arch, m.preset, m.num_encoder_layers = "decoder", "tiny", 0
  m.d_model, m.num_heads, m.d_ff = 64, 4, 128
  m.norm_position, m.tie_embeddings, m.scale_embeddings, m.max_len = "pre", False, True, 16
  m.residual, m.depth_alpha, m.depth_base = residual, 1.0, 1
  config.init.scheme = "xavier"
  config.optim.name, config.optim.schedule, config.optim.learning_rate, config.optim.warmup_steps = (
      "adam",
      "constant",
      1e-3,
      0,
  )
  return config


@pytest.fixture(scope="module")
def depth_sizes():
  data = {"targets": np.random.default_rng(0).integers(1, VOCAB, (8, 8)).astype(np.int32)}
  out = {}
  for residual in ("completep", "plain"):
    sizes = coord_check.depth_coord_check(_config(residual), DEPTHS, data, num_steps=1, vocab_size=VOCAB, num_draws=2)
    out[residual] = {
        "stream": {d: v["stream"] for d, v in coord_check.depth_sizes(sizes, 0).items()},
        **{
            k: {d: v[k] for d, v in coord_check.depth_sizes(sizes, 1).items()} for k in ("delta/stream", "delta/logits")
        },
    }
  return out


def _spread(values: dict) -> float:
  v = np.asarray(list(values.values()))
  return float(v.max() / v.min())


@pytest.mark.slow
def test_completep_activations_and_one_step_updates_are_flat_in_depth(depth_sizes):
  spreads = {k: _spread(v) for k, v in depth_sizes["completep"].items()}
  assert all(s <= TOLERANCE for s in spreads.values()), (spreads, depth_sizes["completep"])


@pytest.mark.slow
def test_plain_residual_activations_and_updates_grow_with_depth(depth_sizes):
  for name, values in depth_sizes["plain"].items():
    sizes = [values[d] for d in DEPTHS]
    assert all(b > a for a, b in zip(sizes, sizes[1:])) and sizes[-1] > GROWTH * sizes[0], (name, sizes)
  assert depth_sizes["plain"]["delta/stream"][16] > 10 * depth_sizes["completep"]["delta/stream"][16]


# The modern block (configs/llama_style.py's: RMSNorm before each sublayer, RoPE, SwiGLU, GQA with 2 key/value heads
# for 4 query heads, no biases) at width 32 under CompleteP. Its stream and the logits' one-step change are flat from
# L = 2 to 32 as today's block's are; the stream's one-step change is flat from L = 4 to 32 and converges to that
# value from above: at L = 2 it is larger by more than the tolerance (docs/science.md, "Depth coordinate check": RoPE
# adds no position vector to x_0, so the branches' share of the stream is larger at small L).
MODERN_DEPTHS = (2, 4, 32)


def _modern_config():
  config = _config("completep")
  m = config.model
  m.d_model, m.num_heads, m.num_kv_heads, m.d_ff = 32, 4, 2, 64
  m.norm_type, m.position, m.mlp, m.use_bias = "rmsnorm", "rope", "swiglu", False
  return config


@pytest.mark.slow
def test_completep_keeps_the_modern_block_flat_in_depth_up_to_32_layers():
  data = {"targets": np.random.default_rng(0).integers(1, VOCAB, (8, 8)).astype(np.int32)}
  sizes = coord_check.depth_coord_check(
      _modern_config(), MODERN_DEPTHS, data, num_steps=1, vocab_size=VOCAB, num_draws=2
  )
  got = {
      "stream": {d: v["stream"] for d, v in coord_check.depth_sizes(sizes, 0).items()},
      **{k: {d: v[k] for d, v in coord_check.depth_sizes(sizes, 1).items()} for k in ("delta/stream", "delta/logits")},
  }
  assert _spread(got["stream"]) <= TOLERANCE and _spread(got["delta/logits"]) <= TOLERANCE, got
  change = got["delta/stream"]
  assert _spread({d: change[d] for d in (4, 32)}) <= TOLERANCE, change
  assert change[2] > change[4] > change[32], change  # from above: a finite-depth correction, not the plain growth
