"""The `paper` scale of the training claims (6 warmup, 8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup) and of the atlas
trains with the papers' IWSLT14 recipe (configs/claims/_training.py RECIPE: Xiong et al. 2020; Liu et al. 2020's
released recipe; fairseq's IWSLT14 example), in every cell: dropout 0.3, label smoothing 0.1, inverse-square-root
decay after a 4000-step warmup, batches of 4096 tokens, the papers' model and step count (claims 8-10: the atlas's
cells, its 20k steps, without warmup). `tiny` and `cpu` keep the setup their committed results were measured with."""

import importlib
import math

import pytest

import train.config
from experiments import grid as grid_lib
from train import optim

CLAIMS = ("warmup", "tfixup", "bert_vs_xavier", "deep_no_warmup")
T_W = 4000  # Xiong et al. 2020 Fig. 2; fairseq's IWSLT14 example --warmup-updates 4000


def _cells(config):
  config.data.dir = "/the/user/s/multi30k"
  return [train.config.resolve(grid_lib.cell_config(config, cell, 0)) for cell in grid_lib.cells(config)]


def _claim(name, scale):
  return importlib.import_module(f"configs.claims.{name}").get_config(scale)


def _atlas(scale):
  return importlib.import_module("configs.atlas").get_config(scale)


def _check_recipe(c, steps, warmups=(0, T_W)):
  assert (c.model.dropout_rate, c.model.attention_dropout_rate, c.train.label_smoothing) == (0.3, 0.1, 0.1)
  assert (c.model.d_model, c.model.num_heads, c.model.d_ff) == (512, 4, 1024)  # transformer_iwslt_de_en
  assert c.data.pack and c.data.batch_size * c.data.max_target_length == 4096  # --max-tokens 4096
  assert c.data.max_source_length == c.data.max_target_length == 128
  assert c.train.num_steps == steps
  o = c.optim
  assert (o.name, o.schedule, o.decay_start, o.b1, o.b2) == ("adam", "warmup_rsqrt", T_W, 0.9, 0.98)
  assert o.warmup_steps in warmups
  lr = optim.make_schedule(o, total_steps=steps)
  peak = o.learning_rate
  # The decay after T_w is the closed form η·√(T_w/t) (t = count + 1), in the warmup arms and in those without.
  for count in (T_W - 1, 2 * T_W - 1, steps - 1):
    assert float(lr(count)) == pytest.approx(peak * math.sqrt(T_W / (count + 1)), rel=1e-5)
  assert float(lr(steps - 1)) < 0.5 * peak  # it decays
  first = float(lr(0))
  assert first == pytest.approx(peak / max(o.warmup_steps, 1), rel=1e-5)


@pytest.mark.parametrize("name", CLAIMS)
def test_paper_scale_of_each_training_claim_uses_the_papers_recipe(name):
  config = _claim(name, "paper")
  cells = _cells(config)
  # claim 6 adds the untuned rule's 2/(1 − β₂) = 100 steps (Ma & Yarats 2021) to the papers' 4000; claims 8-10
  # compare arms without warmup on the atlas's cells, at its 20k steps (configs/claims/_atlas_cells.py)
  warmups = (0, 100, T_W) if name == "warmup" else (0,)
  assert {c.optim.warmup_steps for c in cells} == set(warmups) and len(cells) >= 2
  for c in cells:
    _check_recipe(c, 100_000 if name == "warmup" else 20_000, warmups)  # Liu et al.'s recipe: --max-update 100000
  if name == "warmup":  # claim 6 compares the same decay with and without the warmups, at every lr of its grid
    assert len({c.optim.learning_rate for c in cells}) == 5
  if name == "deep_no_warmup":  # two depths: the papers' base 6+6 and 12+12
    assert {(c.model.num_encoder_layers, c.model.num_decoder_layers) for c in cells} == {(6, 6), (12, 12)}
  else:
    assert {(c.model.num_encoder_layers, c.model.num_decoder_layers) for c in cells} == {(6, 6)}


@pytest.mark.slow
def test_paper_scale_of_the_atlas_uses_the_papers_recipe():
  for c in _cells(_atlas("paper")):
    _check_recipe(c, 20_000)  # the atlas keeps 20k steps: 378 runs (configs/atlas.py)


# What tiny and cpu train with, as committed (their results in reports/ depend on it).
ATLAS_BEFORE = {"tiny": dict(batch=8, steps=6), "cpu": dict(batch=32, steps=200)}


def _check_unchanged(c, batch, steps, heads_ff=None):
  assert (c.model.dropout_rate, c.model.attention_dropout_rate, c.train.label_smoothing) == (0.0, 0.0, 0.0)
  assert (c.optim.schedule, c.optim.decay_start) == ("linear_warmup", 0)
  assert (c.data.pack, c.data.batch_size, c.train.num_steps) == (False, batch, steps)
  if heads_ff:
    assert (c.model.num_heads, c.model.d_ff) == heads_ff


@pytest.mark.parametrize("scale", ("tiny", "cpu"))
@pytest.mark.parametrize("name", CLAIMS[1:])  # claim 6's design changed at every scale (tests/test_claim_warmup.py)
def test_tiny_and_cpu_scales_of_claims_8_to_10_are_the_atlas_s(name, scale):
  b = ATLAS_BEFORE[scale]  # claims 8-10 run the atlas's cells (tests/test_claims_training.py)
  for c in _cells(_claim(name, scale)):
    _check_unchanged(c, b["batch"], b["steps"], heads_ff=(2, 128) if scale == "cpu" else None)
    assert c.optim.warmup_steps == 0


@pytest.mark.parametrize("scale", ("tiny", "cpu"))
def test_tiny_and_cpu_scales_of_the_atlas_are_unchanged(scale):
  b = ATLAS_BEFORE[scale]
  for c in _cells(_atlas(scale)):
    _check_unchanged(c, b["batch"], b["steps"], heads_ff=(2, 128) if scale == "cpu" else None)
