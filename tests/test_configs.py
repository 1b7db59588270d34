"""Every config file in configs/ loads, validates, and initializes the model it names with a finite loss."""

import glob
import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from train import loop
from train.loss import make_loss_fn

CONFIG_FILES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "configs", "*.py")))
# A config file defines get_config; configs/schema.py (the typed-config base) and __init__.py are modules.
CONFIG_FILES = [f for f in CONFIG_FILES if "\ndef get_config(" in open(f).read()]


def load(path):
  spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_every_experiment_config_exists():
  names = {os.path.basename(f)[:-3] for f in CONFIG_FILES}
  expected = {
      "default",
      "t5_init",
      "bert_init",
      "xavier_postln",
      "xavier_preln",
      "tfixup",
      "rezero",
      "deepnet",
      "admin",
      "dsinit",
      "ntk",
      "mup",
      "rope",
      "swiglu",
      "gqa",
      "gated_attention",
      "softcap",
      "reordered_norm",
      "mitchell",
      "olmo2_init",
      "small_init",
      "muon",
      "muon_clip",
      "schedule_free",
      "llama_style",
  }
  assert expected <= names, expected - names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[os.path.basename(f) for f in CONFIG_FILES])
@pytest.mark.slow
def test_config_initializes_its_model(path, tmp_path):
  module = load(path)
  assert "python main.py --config=configs/" in module.__doc__, "the docstring must give the launch command"
  config = module.get_config()
  if config.data.name == "multi30k" and not config.data.dir:  # the user's folder (--config.data.dir): synthetic here
    config.data.name = "embedded"
  config.data.embedded.num_train, config.data.embedded.num_eval = 200, 16
  config.data.batch_size = config.data.eval_batch_size = 8
  exp = loop.setup(config, str(tmp_path))
  c = exp.model.config
  assert (c.norm_position, c.residual, c.parameterization) == (
      config.model.norm_position,
      config.model.residual,
      config.model.parameterization,
  )
  batch = jax.tree.map(jnp.asarray, exp.batches(1)[0])
  loss = float(make_loss_fn(exp.model, variables=exp.state.variables)(exp.state.params, batch))
  assert np.isfinite(loss) and 0.0 < loss < 3 * np.log(c.vocab_size), loss
