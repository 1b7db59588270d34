"""The config boundary: every key declared once in configs/ (with a comment), settable from the command line,
derived keys resolved, one error format naming the key(s), the value and the valid choices."""

import dataclasses
import glob
import importlib
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import init
import models
from analysis.config import ANALYSIS_KEYS, AnalysisConfig
from configs import default
from models.config import DTYPES
from train import cli, optim_config
from train import config as config_lib
from train.data.config import DATA_KEYS, EMBEDDED_KEYS, DataConfig, EmbeddedConfig
from train.loss import make_loss_fn
from train.trackers import MetricsConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE_KEYS = ("num_encoder_layers", "num_decoder_layers", "d_model", "num_heads", "d_ff", "head_dim")
CONFIG_FILES = sorted(
    os.path.relpath(p, REPO)
    for p in glob.glob(os.path.join(REPO, "configs", "**", "*.py"), recursive=True)
    if not os.path.basename(p).startswith("_") and "\ndef get_config(" in open(p).read()
)


def parse(argv):
  """The config as main.py's flag parsing gives it for `argv` (config_flags with lock_config, as in main.py), read
  back through JSON from a subprocess (absl defines the override flags while parsing the real command line)."""
  code = (
      "from absl import app; from ml_collections import config_flags; "
      "F = config_flags.DEFINE_config_file('config', None, '', lock_config=True); "
      "app.run(lambda _: print('CONFIG ' + F.value.to_json()))"
  )
  out = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
  lines = [l for l in out.stdout.splitlines() if l.startswith("CONFIG ")]
  if out.returncode or not lines:
    raise ValueError(out.stderr[-2000:])
  return ml_collections.ConfigDict(json.loads(lines[0][len("CONFIG ") :]))


def test_every_size_key_is_settable_from_the_command_line():
  values = dict(num_encoder_layers=3, num_decoder_layers=5, d_model=48, num_heads=3, d_ff=80, head_dim=20)
  config = parse(["--config=configs/t5_init.py", *(f"--config.model.{k}={v}" for k, v in values.items())])
  for key, value in values.items():
    assert config.model[key] == value and isinstance(config.model[key], int)
  mc = models.ModelConfig.from_config(config_lib.resolve(config).model, vocab_size=10)
  assert {k: getattr(mc, k) for k in values} == values
  with pytest.raises(ValueError, match="d_model"):
    parse(["--config=configs/t5_init.py", "--config.model.d_model=wide"])


def test_defaults_declared_once_agree_with_the_typed_configs():
  raw = default.get_config()
  for field in dataclasses.fields(models.ModelConfig):
    if field.name == "vocab_size":
      continue
    expected = raw.model[field.name]
    if field.name in SIZE_KEYS and expected is None and field.name != "head_dim":
      expected = models.PRESETS[raw.model.preset][field.name]  # placeholders: from the default preset
    if field.name in ("dtype", "param_dtype"):
      expected = DTYPES[expected]
    assert field.default == expected, (field.name, field.default, expected)  # dataclass default = configs/
  for field in dataclasses.fields(init.InitConfig):  # the one other subtree whose class has defaults
    assert field.default == raw.init[field.name], (field.name, field.default, raw.init[field.name])
  assert set(raw.model) - {"preset"} == {f.name for f in dataclasses.fields(models.ModelConfig)} - {"vocab_size"}
  assert set(raw.init) == {f.name for f in dataclasses.fields(init.InitConfig)}
  assert set(raw.optim) == set(optim_config.OPTIM_KEYS)
  assert set(raw.data) == set(DATA_KEYS) and set(raw.data.embedded) == set(EMBEDDED_KEYS)
  assert set(raw.analysis) == set(ANALYSIS_KEYS)
  assert set(raw.train) == set(config_lib.TRAIN_KEYS)
  assert set(raw.metrics) == {f.name for f in dataclasses.fields(MetricsConfig)}


def test_resolve_types_every_subtree_once_into_frozen_dataclasses():
  raw = default.get_config()
  config = config_lib.resolve(raw, groups={"analysis": AnalysisConfig})
  expected = dict(
      model=models.ModelConfig,
      init=init.InitConfig,
      optim=optim_config.OptimConfig,
      data=DataConfig,
      train=config_lib.TrainConfig,
      analysis=AnalysisConfig,
      metrics=MetricsConfig,
  )
  for group, cls in expected.items():
    sub = getattr(config, group)
    assert type(sub) is cls and dataclasses.is_dataclass(sub), group
    with pytest.raises(dataclasses.FrozenInstanceError):
      setattr(sub, sub.keys()[0], None)
  assert type(config.data.embedded) is EmbeddedConfig
  assert config.model.vocab_size is None and config.model.d_model == models.PRESETS["mini"]["d_model"]
  assert config.init.scheme == "xavier"  # 'auto' derived
  assert config.optim.learning_rate == raw.optim.learning_rate and isinstance(config.optim.warmup_steps, int)
  # Read like the ConfigDict it replaces; the key tree (config.json) round-trips through resolve.
  assert config.train["num_steps"] == config.train.get("num_steps") == raw.train.num_steps
  assert config.to_dict()["init"]["scheme"] == "xavier" and config.to_dict()["model"]["preset"] == "mini"
  again = config_lib.resolve(ml_collections.ConfigDict(config.to_dict()), groups={"analysis": AnalysisConfig})
  assert again == config
  assert config_lib.resolve(config) is config  # a Config passes through
  # A group no builder types stays a read-only ConfigDict; an unknown attribute names the groups there are.
  untyped = config_lib.resolve(raw)
  assert isinstance(untyped.analysis, ml_collections.FrozenConfigDict)
  with pytest.raises(AttributeError, match="no group 'plots'.*'analysis'"):
    _ = untyped.plots


@pytest.mark.parametrize(
    "group,key,value,valid",
    [
        ("optim", "nesterov", 1, "True or False"),
        ("optim", "learning_rate", "1e-3", "a number"),
        ("train", "num_steps", 2.0, "an integer"),
        ("data", "pack", "no", "True or False"),
        ("data", "dir", None, "a string"),
        ("analysis", "blocks", 1, "True or False"),
        ("init", "mup_query_zero", "yes", "True or False"),
        ("model", "use_bias", 0, "True or False"),
        ("model", "head_dim", 2.5, "an integer or None"),
    ],
)
def test_every_subtree_rejects_a_value_of_the_wrong_type_naming_key_and_type(group, key, value, valid):
  tree = default.get_config().to_dict()  # a mapping, as a config file or a notebook may build one
  tree[group][key] = value
  config = ml_collections.ConfigDict(tree)
  with pytest.raises(ValueError, match=re.escape(f"config.{group}.{key}={value!r} is invalid; valid: {valid}")):
    config_lib.resolve(config, groups={"analysis": AnalysisConfig})


def test_nested_subtree_errors_name_the_full_key():
  config = default.get_config()
  config.data.embedded.unlock()
  config.data.embedded.seeds = 3
  with pytest.raises(ValueError, match=r"config.data.embedded.seeds=3 is invalid \(unknown key\)"):
    config_lib.resolve(config)


def _leaves(tree, prefix=""):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _leaves(value, f"{prefix}{key}.")
    else:
      yield prefix + key


def test_every_default_key_has_a_comment():
  source = open(os.path.join(REPO, "configs", "default.py")).read().splitlines()
  pattern = re.compile(r"\s+(config|[a-z])\.(\w+(\.\w+)?) = (?!ml_collections.ConfigDict\(\))")
  declared = [i for i, line in enumerate(source) if pattern.match(line)]
  assert len(declared) == len(list(_leaves(default.get_config().to_dict())))  # each key assigned exactly once
  for i in declared:
    assert "  # " in source[i] or source[i - 1].strip().startswith("#"), source[i]


@pytest.mark.parametrize("path", CONFIG_FILES)
@pytest.mark.slow
def test_loading_a_config_imports_none_of_the_library(path):
  module = path[:-3].replace(os.sep, ".")
  code = (
      f"import sys; import {module} as c; c.get_config() if hasattr(c, 'get_config') else None; "
      "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
      "('jax', 'flax', 'optax', 'matplotlib', 'models', 'init', 'train', 'analysis', 'orbax', 'grain')); "
      "print(bad); sys.exit(1 if bad else 0)"
  )
  out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
  assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", CONFIG_FILES)
@pytest.mark.slow
def test_every_config_initializes_its_model_with_a_finite_loss(path):
  module = importlib.import_module(path[:-3].replace(os.sep, "."))
  if not hasattr(module, "get_config"):
    pytest.skip(f"{path} is shared code, not a config")
  config = module.get_config()
  config.model.preset = "tiny"  # every size from the tiny preset: the config's rules, not its width, are tested
  for key in SIZE_KEYS:
    config.model[key] = None
  if config.data.name == "multi30k" and not config.data.dir:  # claim configs: the user's folder, --config.data.dir
    config.data.dir = "/the/user/s/multi30k"
  config = config_lib.resolve(config)
  mc = models.ModelConfig.from_config(config.model, vocab_size=50)
  model = models.get_model(mc)
  rng = np.random.default_rng(0)
  batch = {k: jnp.asarray(rng.integers(3, 50, (4, 6)), jnp.int32) for k in ("inputs", "targets")}
  if mc.arch == "decoder":
    batch = {"targets": batch["targets"]}
  variables = init.init_params(config.init, model, jax.random.key(0), batch)
  loss = make_loss_fn(model, variables=variables)(variables["params"], batch)
  assert np.isfinite(float(loss)), path


def test_derived_keys_follow_the_keys_they_come_from():
  config = default.get_config()
  resolved = config_lib.resolve(config)
  assert (resolved.model.attention_logit_scale, resolved.init.scheme) == ("sqrt_dk", "xavier")
  config.model.parameterization = "mup"
  resolved = config_lib.resolve(config)
  assert (resolved.model.attention_logit_scale, resolved.init.scheme) == ("dk", "mup")
  config = default.get_config()
  config.model.residual = "deepnorm"
  assert config_lib.resolve(config).init.scheme == "deepnet"
  assert config_lib.resolve(resolved).to_dict() == resolved.to_dict()  # idempotent


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"model.norm_position": "middle"}, r"config.model.norm_position='middle' is invalid; valid: \['post', 'pre'"),
        ({"init.scheme": "nope"}, r"config.init.scheme='nope' is invalid; valid: \[.*'xavier', 'auto'\]"),
        ({"optim.name": "lamb"}, r"config.optim.name='lamb' is invalid; valid: \['adafactor', 'adam'"),
        ({"data.batch_size": 0}, r"config.data.batch_size=0 is invalid; valid: an integer >= 1"),
        ({"train.num_steps": -1}, r"config.train.num_steps=-1 is invalid; valid: an integer >= 0"),
        ({"train.label_smoothing": 1.0}, r"config.train.label_smoothing=1.0 is invalid; valid: a number in \[0, 1\)"),
        (
            {"model.residual": "deepnorm", "model.norm_position": "pre"},
            r"config.model.residual='deepnorm' contradicts config.model.norm_position='pre'",
        ),
        (
            {"model.residual": "admin", "model.norm_position": "sandwich"},
            r"config.model.residual='admin' contradicts config.model.norm_position='sandwich'",
        ),
        (
            {"model.parameterization": "mup", "model.attention_logit_scale": "sqrt_dk"},
            r"config.model.parameterization='mup' contradicts config.model.attention_logit_scale='sqrt_dk'",
        ),
        (
            {"model.parameterization": "mup", "init.scheme": "xavier"},
            r"config.init.scheme='xavier' contradicts config.model.parameterization='mup'",
        ),
        (
            {"model.parameterization": "mup", "optim.name": "sgd"},
            r"config.model.parameterization='mup' contradicts config.optim.name='sgd'.*\['adam', 'adamw'\]",
        ),
        (
            {"model.residual": "plain", "init.scheme": "deepnet"},
            r"config.init.scheme='deepnet' contradicts config.model.residual='plain'",
        ),
    ],
)
def test_bad_values_and_contradictions_name_their_keys(overrides, match):
  config = default.get_config()
  for dotted, value in overrides.items():
    group, key = dotted.split(".")
    config[group][key] = value
  with pytest.raises(ValueError, match=match):
    config_lib.resolve(config)


def test_mup_with_adamw_is_accepted():
  config = default.get_config()
  config.model.parameterization, config.optim.name = "mup", "adamw"
  assert config_lib.resolve(config).optim.name == "adamw"


def test_a_rerun_with_another_trained_config_fails_naming_the_keys(tmp_path):
  """train.config.check_unchanged (main.py's train mode and every sweep run): the workdir's config.json against the
  rerun's config, before any compute. Only what trains counts; a key missing from an old config.json counts as its
  default; `mode` only where asked."""
  config = default.get_config()
  resolved = config_lib.resolve(config)
  (tmp_path / "config.json").write_text(json.dumps(resolved.to_dict()))
  config_lib.check_unchanged(str(tmp_path), resolved, "here")  # the same config: resumes
  config_lib.check_unchanged(str(tmp_path / "new"), resolved, "here")  # no run there yet
  other = config.copy_and_resolve_references()
  other.analysis.lanczos_steps += 1  # no run trains it
  other.train.eval_at_init = not other.train.eval_at_init  # an evaluation at step 0 trains nothing
  config_lib.check_unchanged(str(tmp_path), config_lib.resolve(other), "here")
  other.mode = "analyze"
  config_lib.check_unchanged(str(tmp_path), config_lib.resolve(other), "here", compare_mode=False)
  with pytest.raises(
      ValueError, match=r"here: .*config.json was trained with another config \(mode: 'train' -> 'analyze'\)"
  ):
    config_lib.check_unchanged(str(tmp_path), config_lib.resolve(other), "here")
  changed = config.copy_and_resolve_references()
  changed.model.d_model, changed.optim.learning_rate = 96, 3e-3
  with pytest.raises(ValueError, match=r"model\.d_model: None -> 96, optim\.learning_rate: .* -> 0\.003\);"):
    config_lib.check_unchanged(str(tmp_path), config_lib.resolve(changed), "here")
  longer = config.copy_and_resolve_references()
  longer.train.num_steps += 100  # main.py's rerun may train longer (the run's summary says how)
  with pytest.raises(ValueError, match=r"train\.num_steps: "):
    config_lib.check_unchanged(str(tmp_path), config_lib.resolve(longer), "here")
  config_lib.check_unchanged(str(tmp_path), config_lib.resolve(longer), "here", may_change=("train.num_steps",))
  old = json.loads((tmp_path / "config.json").read_text())
  del old["train"]["eval_every"]  # a key added to the code after the run: unchanged while it holds its default
  (tmp_path / "config.json").write_text(json.dumps(old))
  config_lib.check_unchanged(str(tmp_path), resolved, "here")


@pytest.mark.slow
def test_an_unknown_key_is_one_line_naming_the_closest_keys(capsys):
  cli.check_override_keys(["--config=configs/claims/edge.py:tiny", "--config.sweep.seeds=2", "--config.optim.b1=0.8"])
  cli.check_override_keys(["--config", "configs/claims/edge.py:tiny", "--config.analysis.edge_predictors"])  # spaced
  with pytest.raises(SystemExit) as stop:
    cli.check_override_keys(["--config.model.dmodel=3"])  # configs/default.py
  assert stop.value.code == cli.EXIT_CONFIG == 2
  assert capsys.readouterr().err == (
      "main.py: config.model.dmodel=3 is invalid (no such key in configs/default.py); valid: config.model.d_model, "
      "config.model.mlp, config.model.dtype\n"  # difflib's three closest keys
  )
  with pytest.raises(SystemExit):
    cli.check_override_keys(["--config=configs/t5_init.py", "--config.atlas.parts=width"])  # not this config's
  assert "config.atlas.parts=width is invalid (no such key in configs/t5_init.py)" in capsys.readouterr().err
  # Through the command line: the check runs before ml_collections applies the override (a double traceback).
  proc = subprocess.run(
      [sys.executable, "main.py", "--config=configs/t5_init.py", "--config.model.nonexistent=1"],
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].startswith("main.py: config.model.nonexistent=1 is invalid")
