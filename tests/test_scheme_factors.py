"""init.schemes: the depth factors of DS-Init, T-Fixup, DeepNet and GPT-2 show in the realized stds of a deeper
encoder-decoder (N=3, M=5, so a swapped depth shows), and the schemes' hyper-parameters reach their rules."""

import math

import jax
import numpy as np
import pytest

import init
from tests.test_schemes import TRUNC, make_batch, make_model


def kernel_std(params, stack, layer, sublayer, name):
  return float(np.asarray(params[stack][f"layer_{layer}"][sublayer][name]["kernel"]).std())


@pytest.fixture(scope="module")
def deep_params():
  """Encoder-decoder with N=3 encoder and M=5 decoder layers, so a swapped depth shows."""
  out = {}
  for scheme in ("dsinit", "tfixup", "deepnet", "gpt2"):
    model = make_model(scheme, "encoder_decoder", num_encoder_layers=3, num_decoder_layers=5, d_ff=128)
    out[scheme] = init.init_params({"scheme": scheme}, model, jax.random.key(2), make_batch("encoder_decoder"))
  return out


def test_dsinit_depth_factor(deep_params):
  """DS-Init: std of layer l = std of layer 1 / √l (Zhang, Titov & Sennrich 2019)."""
  p = deep_params["dsinit"]["params"]
  for stack, depth in (("encoder", 3), ("decoder", 5)):
    first = kernel_std(p, stack, 0, "mlp", "wi")
    for layer in range(1, depth):
      assert kernel_std(p, stack, layer, "mlp", "wi") / first == pytest.approx(1 / math.sqrt(layer + 1), rel=0.03)


def test_tfixup_depth_factors(deep_params):
  """T-Fixup: encoder 0.67·3^{-1/4} = 0.5091, decoder and embeddings (9·5)^{-1/4} = 0.3861 times Xavier/d^{-1/2}."""
  p = deep_params["tfixup"]["params"]
  xavier_mlp = math.sqrt(2 / (128 + 128))
  assert kernel_std(p, "encoder", 1, "mlp", "wi") / xavier_mlp == pytest.approx(0.50908, rel=0.03)
  assert kernel_std(p, "decoder", 3, "mlp", "wo") / xavier_mlp == pytest.approx(0.38610, rel=0.03)
  xavier_v = math.sqrt(2 / (128 + 64))
  assert kernel_std(p, "decoder", 4, "cross_attn", "value") / xavier_v == pytest.approx(0.38610, rel=0.03)
  assert kernel_std(p, "decoder", 0, "self_attn", "query") / xavier_v == pytest.approx(1.0, rel=0.03)
  emb = float(np.asarray(p["token_embedding"]["embedding"]).std())
  assert emb / 128**-0.5 == pytest.approx(0.38610, rel=0.03)


def test_deepnet_gains(deep_params):
  """DeepNet enc-dec, N=3, M=5: encoder β = 0.87·(3⁴·5)^{-1/16} = 0.5978, decoder β = (12·5)^{-1/4} = 0.3593."""
  p = deep_params["deepnet"]["params"]
  xavier_mlp = math.sqrt(2 / (128 + 128))
  xavier_qkv = math.sqrt(2 / (128 + 64))
  assert kernel_std(p, "encoder", 2, "mlp", "wi") / xavier_mlp == pytest.approx(0.59779, rel=0.03)
  assert kernel_std(p, "decoder", 2, "self_attn", "out") / xavier_qkv == pytest.approx(0.35930, rel=0.03)
  assert kernel_std(p, "decoder", 2, "self_attn", "key") / xavier_qkv == pytest.approx(1.0, rel=0.03)


def test_gpt2_residual_projection_factor(deep_params):
  """GPT-2: residual outputs × 1/√R, R residual layers: 2·3 = 6 (encoder), 3·5 = 15 (decoder with cross-attn)."""
  p = deep_params["gpt2"]["params"]
  assert kernel_std(p, "encoder", 0, "self_attn", "out") / 0.02 == pytest.approx(6**-0.5, rel=0.03)
  assert kernel_std(p, "decoder", 0, "mlp", "wo") / 0.02 == pytest.approx(15**-0.5, rel=0.03)
  assert kernel_std(p, "decoder", 0, "cross_attn", "query") / 0.02 == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize(
    "cfg,path,expected",
    [
        ({"scheme": "bert", "std": 0.05}, ("decoder", "layer_0", "mlp", "wi"), 0.05 * TRUNC),
        ({"scheme": "gpt2", "std": 0.05}, ("decoder", "layer_0", "mlp", "wi"), 0.05),
        (
            {"scheme": "dsinit", "dsinit_alpha": 0.5},
            ("decoder", "layer_1", "mlp", "wi"),
            0.5 * math.sqrt(2 / 384) / math.sqrt(2),
        ),
    ],
)
def test_hyper_parameters_reach_the_rule(cfg, path, expected):
  model = make_model(cfg["scheme"], "decoder")
  params = init.init_params(cfg, model, jax.random.key(0))["params"]
  x = np.asarray(params[path[0]][path[1]][path[2]][path[3]]["kernel"])
  assert x.std() == pytest.approx(expected, rel=0.03)


def test_mup_nonzero_readout_and_query():
  model = make_model("mup", "decoder")
  cfg = {"scheme": "mup", "mup_readout_zero": False, "mup_query_zero": False}
  params = init.init_params(cfg, model, jax.random.key(0))["params"]
  assert np.asarray(params["head"]["kernel"]).std() == pytest.approx(128**-0.5, rel=0.03)
  assert np.asarray(params["decoder"]["layer_0"]["self_attn"]["query"]["kernel"]).std() == pytest.approx(
      128**-0.5, rel=0.03
  )
