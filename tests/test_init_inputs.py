"""init.init_params' inputs: an unknown scheme, a bad `config.init` or a model the scheme does not fit raise before
any compute, naming the keys; an encoder reads the text in `targets` of LM and translation batches alike; Admin's
profiling pass needs a batch with the right keys."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import init
from models import ModelConfig, get_model
from tests.test_schemes import SIZES, make_batch, make_model


def test_unknown_scheme_lists_valid_names():
  with pytest.raises(ValueError, match=r"init.scheme='nope'.*'admin'.*'xavier'"):
    init.get_scheme("nope")


@pytest.mark.parametrize(
    "cfg,model_kw,match",
    [
        ({"scheme": "nope"}, {}, r"config.init.scheme='nope' is invalid; valid: \['admin', .*'auto'\]"),
        ({"scheme": "admin"}, {}, r"model.residual in \['admin'\]"),
        ({"scheme": "deepnet"}, {}, r"model.residual in \['deepnorm'\]"),
        ({"scheme": "rezero"}, {}, r"model.residual in \['rezero'\]"),
        ({"scheme": "ntk"}, {}, r"model.parameterization in \['ntk'\]"),
        (
            {"scheme": "xavier"},
            {"parameterization": "ntk"},
            r"config.init.scheme='xavier' contradicts config.model.parameterization='ntk'.*init.scheme='ntk' or 'auto'",
        ),
        (
            {"scheme": "bert"},
            {"parameterization": "mup", "attention_logit_scale": "dk"},
            r"config.init.scheme='bert' contradicts config.model.parameterization='mup'",
        ),
        ({"scheme": "bert", "sdt": 0.02}, {}, r"config.init.sdt=0.02 is invalid \(unknown key\)"),
        ({"scheme": "bert", "std": -1.0}, {}, r"init.std=-1.0"),
        ({"scheme": "dsinit", "dsinit_alpha": 2.0}, {}, r"init.dsinit_alpha=2.0"),
        (
            {"scheme": "mup", "mup_readout_zero": 1},
            {"parameterization": "mup", "attention_logit_scale": "dk"},
            r"init.mup_readout_zero=1",
        ),
        ({"scheme": None}, {}, r"config.init.scheme=None is invalid; valid: a string"),
        ({"scheme": "bert", "std": "0.02"}, {}, r"config.init.std='0.02' is invalid; valid: a number"),
    ],
)
def test_bad_config_or_model_raises_before_compute(cfg, model_kw, match, monkeypatch):
  model = get_model(ModelConfig(**{**SIZES, "arch": "decoder", **model_kw}))

  def no_compute(*a, **k):
    raise AssertionError("computed before validating")

  monkeypatch.setattr(jax, "eval_shape", no_compute)
  with pytest.raises(ValueError, match=match):
    init.init_params(cfg, model, jax.random.key(0), make_batch("decoder"))


@pytest.mark.parametrize("scheme", ["bert", "xavier", "admin"])
def test_encoder_inits_from_lm_batches_and_reads_the_text_in_targets(scheme):
  """An encoder is fed LM batches ({"targets"} only) or translation batches whose `inputs` are not its text: init
  accepts both, reads `targets` (the same variables either way, Admin's profiling pass included), and the MLM loss
  of the train step's masked batch is finite. A batch without `targets` is refused, naming the key."""
  from train.loss import make_loss_fn
  from train.step import mlm_masked

  model = make_model(scheme, "encoder")
  translation = make_batch("encoder")
  lm = {"targets": translation["targets"]}
  variables = init.init_params({"scheme": scheme}, model, jax.random.key(0), lm)
  same = init.init_params({"scheme": scheme}, model, jax.random.key(0), translation)
  for a, b in zip(jax.tree.leaves(variables), jax.tree.leaves(same)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  masked = mlm_masked(model.config, lm, jax.random.key(1))
  loss = float(make_loss_fn(model, variables=variables)(variables["params"], masked))
  # At init the MLM head is near uniform over the vocabulary: loss ≈ log V.
  assert math.isfinite(loss) and loss == pytest.approx(math.log(SIZES["vocab_size"]), rel=0.2)
  with pytest.raises(ValueError, match=r"model.arch='encoder' needs key 'targets'"):
    init.init_params({"scheme": scheme}, model, jax.random.key(0), {"inputs": translation["inputs"]})


def test_admin_needs_a_batch_with_the_right_keys(monkeypatch):
  model = make_model("admin", "encoder_decoder")
  monkeypatch.setattr(jax, "eval_shape", lambda *a, **k: (_ for _ in ()).throw(AssertionError("computed")))
  with pytest.raises(ValueError, match="needs a batch"):
    init.init_params({"scheme": "admin"}, model, jax.random.key(0), None)
  with pytest.raises(ValueError, match=r"needs key 'inputs'"):
    init.init_params({"scheme": "admin"}, model, jax.random.key(0), {"targets": jnp.ones((2, 3), jnp.int32)})
