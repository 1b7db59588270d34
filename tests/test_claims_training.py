"""The training claims on the claims framework (6 warmup, 8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup): every
verdict branch on synthetic measurements (reproduced, not reproduced, inconclusive, a diverged seed, a crashed run);
claim 6 end to end at `tiny` through `run_claim`; a sweep whose runs all diverge (claim 8); claim 9's at-init analysis
and the closed forms of what x_0 is made of; claim 10's `measure` on a hand-written sweep; and the configs: every arm
of a claim selects exactly its cells, the cpu scale keeps the earlier reproduction's sizes, `--config.data.dir`
reaches every cell."""

import importlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import init as init_lib
import models
import train.config
from analysis import signal
from experiments import grid as grid_lib
from experiments.claims import base, run, training
from experiments.claims import bert_vs_xavier as bert_claim
from experiments.claims import deep_no_warmup as deep_claim
from experiments.claims import tfixup as tfixup_claim

CLAIMS = ("tfixup", "bert_vs_xavier", "deep_no_warmup")  # claim 6 reads classes per lr: tests/test_claim_warmup.py
DELTA = training.DELTA
TRUNC = 0.87962566  # std of N(0, 1) truncated to ±2 (docs/science.md §1): BERT's 0.02 realizes 0.0176
CRASH = ["postln seed 1: RuntimeError: out of memory"]


def config_module(name):
  return importlib.import_module(f"configs.claims.{name}")


def arm(loss=None, diverged_at=None, params=None):
  """A synthetic arm (`training.summarize`'s keys): two finished seeds around `loss`; or seed 1 diverged at step
  `diverged_at` (seed 0 then finished with `loss`, if given)."""
  seeds = [dict(seed=0, outcome="finished", final_loss=loss, final_bleu=1.0)]
  seeds.append(
      dict(seed=1, outcome="diverged", final_loss=None, final_bleu=None)
      if diverged_at
      else dict(seed=1, outcome="finished", final_loss=loss, final_bleu=1.0)
  )
  return dict(
      params=params or {},
      seeds=seeds,
      failed_seeds=[1] if diverged_at else [],
      diverged_steps={"1": diverged_at} if diverged_at else {},
      crashed_seeds=[],
      mean_final_loss=loss,
      std_final_loss=0.0 if not diverged_at else None,
      mean_final_bleu=1.0,
      std_final_bleu=0.0,
  )


def measured(crashed=(), **arms):
  return {"crashed": list(crashed), "variants": arms}


# ------------------------------------------------------------------------------------ verdicts, every branch


@pytest.mark.parametrize(
    "tfixup, post, expected",
    [
        (arm(2.5), arm(diverged_at=4), base.REPRODUCED),
        (arm(2.5), arm(2.7), base.REPRODUCED),
        (arm(2.5), arm(2.55), base.INCONCLUSIVE),  # both train within δ
        (arm(2.5), arm(2.45), base.INCONCLUSIVE),
        (arm(2.7), arm(2.5), base.NOT_REPRODUCED),  # T-Fixup ≥ δ worse
        (arm(diverged_at=4), arm(2.5), base.NOT_REPRODUCED),  # T-Fixup diverged
        (arm(diverged_at=4), arm(diverged_at=4), base.NOT_REPRODUCED),
    ],
)
def test_tfixup_verdict(tfixup, post, expected):
  v = tfixup_claim.verdict(measured(tfixup_nowarmup=tfixup, postln_nowarmup=post))
  assert v.verdict == expected, v.reason


@pytest.mark.parametrize(
    "bert_cos, bert, xavier, expected",
    [
        (0.8, arm(2.5), arm(2.7), base.REPRODUCED),
        (0.8, arm(2.5), arm(diverged_at=2), base.REPRODUCED),  # Xavier diverged, BERT did not
        (0.8, arm(2.5), arm(2.55), base.INCONCLUSIVE),
        (0.8, arm(2.7), arm(2.5), base.NOT_REPRODUCED),  # BERT ≥ δ worse
        (0.3, arm(2.5), arm(2.7), base.NOT_REPRODUCED),  # identity path not stronger at init (encoder)
        (0.8, arm(diverged_at=2), arm(2.7), base.NOT_REPRODUCED),  # BERT diverged
    ],
)
def test_bert_vs_xavier_verdict(bert_cos, bert, xavier, expected):
  m = measured(postln_bert=bert, postln_xavier=xavier)
  m["identity_cosine_at_init"] = {
      "bert": {"encoder": bert_cos, "decoder": 0.8},
      "xavier": {"encoder": 0.5, "decoder": 0.4},
  }
  v = bert_claim.verdict(m)
  assert v.verdict == expected, v.reason
  assert f"encoder {bert_cos:.3f} vs 0.500" in v.reason


def test_deep_no_warmup_verdict():
  limit = 2.0 + deep_claim.REFERENCE_MARGIN
  ok = dict(
      preln_reference=arm(2.0), rezero=arm(limit - 0.01), scheduled_alpha=arm(2.1), deepnorm=arm(2.2), admin=arm(1.9)
  )
  assert deep_claim.verdict(measured(**ok)).verdict == base.REPRODUCED
  slow = deep_claim.verdict(measured(**dict(ok, rezero=arm(limit + 0.01))))
  assert slow.verdict == base.NOT_REPRODUCED and "['ReZero (no norm)']" in slow.reason
  diverged = deep_claim.verdict(measured(**dict(ok, admin=arm(1.9, diverged_at=5))))
  assert diverged.verdict == base.NOT_REPRODUCED and "['Admin (Post-LN)']" in diverged.reason
  assert "seed 1 diverged at step 5" in diverged.reason
  no_ref = deep_claim.verdict(measured(**dict(ok, preln_reference=arm(diverged_at=3))))
  assert no_ref.verdict == base.INCONCLUSIVE and "Pre-LN reference failed" in no_ref.reason


@pytest.mark.parametrize("name", CLAIMS)
def test_a_crashed_run_makes_every_claim_inconclusive(name):
  """Arms that would reproduce each claim, plus one crashed run: no measurement, INCONCLUSIVE naming it."""
  arms = {
      "tfixup": dict(tfixup_nowarmup=arm(2.5), postln_nowarmup=arm(diverged_at=4)),
      "bert_vs_xavier": dict(postln_bert=arm(2.5), postln_xavier=arm(2.7)),
      "deep_no_warmup": {k: arm(2.0) for k in deep_claim.VARIANTS},
  }[name]
  module = importlib.import_module(f"experiments.claims.{name}")
  m = measured(**arms)
  m["identity_cosine_at_init"] = {"bert": {"encoder": 0.9}, "xavier": {"encoder": 0.1}}
  assert module.verdict(m).verdict == base.REPRODUCED
  v = module.verdict({**m, "crashed": CRASH})
  assert v.verdict == base.INCONCLUSIVE and CRASH[0] in v.reason


# ---------------------------------------------------------------------------------------------- the configs


@pytest.mark.parametrize("name", CLAIMS)
@pytest.mark.parametrize("scale", ("tiny", "cpu", "paper"))
def test_every_arm_selects_its_cells_and_every_cell_is_valid(name, scale):
  """The claim's arms (experiments/claims/<name>.py) and its grid (configs/claims/<name>.py) agree: each cell in
  exactly one arm, no arm empty; every cell's config resolves (before any compute)."""
  config = config_module(name).get_config(scale)
  config.data.dir = "/the/user/s/multi30k"
  cells = grid_lib.cells(config)
  records = [dict(cell=c.name, params=c.params, seed=0, outcome="finished", final={}, workdir=c.name) for c in cells]
  module = importlib.import_module(f"experiments.claims.{name}")
  arms = training.measure_variants(base.Results("/nonexistent", records), module.VARIANTS)["variants"]
  assert sorted(len(a["seeds"]) for a in arms.values()) == [1] * len(cells) == [1] * len(module.VARIANTS)
  for cell in cells:
    train.config.resolve(grid_lib.cell_config(config, cell, 0))


@pytest.mark.parametrize("name", CLAIMS)
def test_cpu_scale_keeps_the_earlier_sizes_and_data_dir_reaches_every_cell(name, tmp_path):
  config = config_module(name).get_config("cpu")
  config.data.dir = str(tmp_path)
  for cell in grid_lib.cells(config):
    for seed in range(config.sweep.seeds):
      c = grid_lib.cell_config(config, cell, seed)
      assert (c.data.name, c.data.dir, c.train.seed, c.mode) == ("multi30k", str(tmp_path), seed, "train")
      # analysis/reproduce/training.py (retired; git commit 35e9f30)'s SCALES['cpu']: results stay comparable with
      # reports/REPRODUCTION.md.
      m = c.model
      assert (m.num_encoder_layers, m.num_decoder_layers, m.d_model, m.num_heads, m.d_ff) == (6, 6, 128, 4, 512)
      assert (c.train.num_steps, c.data.batch_size, c.optim.learning_rate, c.optim.b2) == (300, 32, 1e-3, 0.98)
      assert (c.train.eval_every, c.train.num_decode_examples, c.data.max_eval_loss_examples) == (100, 64, 512)
      assert c.optim.warmup_steps == (30 if cell.params.get("optim.warmup_steps") == 30 else 0)
  assert config.sweep.seeds == 2 and config.sweep.metric == "eval/loss" and config.claim.scale == "cpu"


# ------------------------------------------------------------------------------------------- end to end, tiny


def _check_claim_json(result, workdir, name, number, figures):
  with open(os.path.join(workdir, run.RESULT_FILE)) as f:
    on_disk = json.load(f)
  assert on_disk["verdict"] == result["verdict"] and on_disk["reason"] == result["reason"]
  assert (on_disk["claim"], on_disk["number"], on_disk["scale"]) == (name, number, "tiny")
  assert on_disk["data"]["name"] == "embedded" and on_disk["verdict"] in base.VERDICTS
  assert on_disk["thresholds"] == importlib.import_module(f"experiments.claims.{name}").THRESHOLDS
  assert on_disk["figures"] == figures
  for fig in figures:
    assert os.path.getsize(os.path.join(workdir, fig)) > 10_000, fig
  with open(os.path.join(workdir, "results.jsonl")) as f:
    records = [json.loads(line) for line in f]
  assert sum(on_disk["runs"].values()) == len(records) == len(grid_lib.cells(config_module(name).get_config("tiny")))
  return on_disk, records


def test_diverged_runs_are_failures_of_their_arm(tmp_path):
  """Claim 8 at lr 10^30: every run diverges at step 2 (Adam's first update moves each weight by ~lr) — recorded as
  failed seeds with the step, T-Fixup failing means NOT_REPRODUCED, and the figures mark where the runs stopped."""
  config = config_module("tfixup").get_config("tiny")
  config.optim.learning_rate = 1e30
  result = run.run_claim(config, str(tmp_path))
  on_disk, _ = _check_claim_json(result, str(tmp_path), "tfixup", 8, ["tfixup_curves.png", "tfixup_final.png"])
  assert on_disk["runs"] == {"diverged": 2}
  for a in on_disk["measured"]["variants"].values():
    assert (a["failed_seeds"], a["diverged_steps"], a["mean_final_loss"]) == ([0], {"0": 2}, None)
  assert result["verdict"] == base.NOT_REPRODUCED and "seed 0 diverged at step 2" in result["reason"]


def test_bert_vs_xavier_end_to_end_at_tiny(tmp_path):
  """Claim 9 with its at-init signal analysis: cos(x_k, x_0) per sublayer and stack, x_0's make-up, the figures."""
  config = config_module("bert_vs_xavier").get_config("tiny")
  result = run.run_claim(config, str(tmp_path))
  figs = ["bert_vs_xavier_at_init.png", "bert_vs_xavier_curves.png", "bert_vs_xavier_final.png"]
  on_disk, records = _check_claim_json(result, str(tmp_path), "bert_vs_xavier", 9, figs)
  m = on_disk["measured"]
  for arm_name in ("bert", "xavier"):
    at_init = m["at_init"][arm_name]
    assert list(at_init) == ["encoder", "decoder"]
    # 1+1 layers: encoder self-attention, MLP; decoder self-attention, cross-attention, MLP.
    assert len(at_init["encoder"]["cos_profile"]) == 2 and len(at_init["decoder"]["cos_profile"]) == 3
    for stack, d in at_init.items():
      assert d["cos_last"] == d["cos_profile"][-1] == m["identity_cosine_at_init"][arm_name][stack]
  # BERT's 0.02 branches barely move the stream: x_L ≈ x_0 at init; Xavier's do.
  for stack in ("encoder", "decoder"):
    assert m["at_init"]["bert"][stack]["cos_last"] > 0.99 > 0.9 > m["at_init"]["xavier"][stack]["cos_last"]
  assert m["identity_holds"] is True
  assert result["verdict"] != base.NOT_REPRODUCED or "BERT" in result["reason"]


def test_deep_no_warmup_measure_on_a_written_sweep(tmp_path):
  """measure/verdict/figure of claim 10 on a sweep written by hand (no training): a diverged Admin seed, then a
  crashed ReZero run."""
  config = config_module("deep_no_warmup").get_config("tiny")
  losses = {"rezero": 5.9, "scheduled": 6.0, "deepnorm": 6.05, "admin": 5.8, "plain": 5.85}
  records = []
  for cell in grid_lib.cells(config):
    residual = cell.params["model.residual"]
    rdir = tmp_path / cell.name
    rdir.mkdir()
    stop = 3 if residual == "admin" else 11
    lines = [dict(step=s, split="train", loss=7.0 - 0.1 * s) for s in range(1, stop)]
    lines += [dict(step=s, split="eval", loss=losses[residual], bleu=1.5) for s in (5, 10) if s < stop]
    (rdir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    outcome = "diverged" if residual == "admin" else "finished"
    final = {} if residual == "admin" else {"eval/loss": losses[residual], "eval/bleu": 1.5}
    records.append(
        dict(
            cell=cell.name,
            params=cell.params,
            seed=0,
            outcome=outcome,
            final=final,
            status={"status": outcome, "step": stop},
            error="non-finite loss" if residual == "admin" else None,
            workdir=cell.name,
        )
    )
  results = base.Results(str(tmp_path), records, config, "d=32, 1+1 layers, 10 steps, lr 0.001, warmup 0")
  m = deep_claim.measure(results)
  assert m["variants"]["admin"]["diverged_steps"] == {"0": 3} and m["trains"]["admin"] is False
  assert m["reference_limit"] == pytest.approx(5.85 + deep_claim.REFERENCE_MARGIN)
  assert m["trains"] == {"rezero": True, "scheduled_alpha": True, "deepnorm": True, "admin": False}
  v = deep_claim.verdict(m)
  assert v.verdict == base.NOT_REPRODUCED and "Admin (Post-LN) failed (seed 0 diverged at step 3)" in v.reason
  for fig in deep_claim.figure(m, results, str(tmp_path), results.settings):
    assert os.path.getsize(tmp_path / fig) > 10_000
  records[0] = dict(records[0], outcome="crashed", final={}, error="RuntimeError: boom")
  m = deep_claim.measure(base.Results(str(tmp_path), records, config))
  assert m["crashed"] == [f"{records[0]['cell']} seed 0: RuntimeError: boom"]
  assert m["variants"]["rezero"]["crashed_seeds"] == [0] and m["variants"]["rezero"]["mean_final_loss"] is None
  assert deep_claim.verdict(m).verdict == base.INCONCLUSIVE


# ------------------------------------------------------------------------------------- x_0's make-up at init


def test_input_stream_closed_forms_in_the_signal_profile():
  """analysis.signal's embedding records carry what x_0 is made of (analysis/embeddings.py). BERT's pipeline
  (learned positions, LayerNorm of token + position, both tables at 0.0176) splits x_0 evenly: token fraction ≈ 1/2,
  cos(x_0, p) ≈ 1/√2; 0.0176 tokens + unit sinusoids (mean square 1/2 per entry), no norm, no √d: the tokens are
  σ²/(σ² + 1/2) of it."""
  config = config_module("bert_vs_xavier").get_config("tiny")
  config.model.update(dict(num_encoder_layers=1, num_decoder_layers=1, d_model=256, num_heads=4, d_ff=64))
  config.init.scheme = "bert"
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, 512, size=(2, 8, 32))
  tokens[:, :, 24:] = 0  # padding, left out of the statistics
  batch = {"inputs": jnp.asarray(tokens[0], jnp.int32), "targets": jnp.asarray(tokens[1], jnp.int32)}
  sigma2 = (0.02 * TRUNC) ** 2
  bert = dict(scale_embeddings=False, position="learned", embedding_norm=True)
  former = dict(scale_embeddings=False, position="sinusoidal", embedding_norm=False)
  for overrides, fraction, cos in (
      (bert, 0.5, 0.5**0.5),
      (former, sigma2 / (sigma2 + 0.5), (0.5 / (sigma2 + 0.5)) ** 0.5),
  ):
    config.model.update(overrides)
    resolved = train.config.resolve(config)
    model = models.get_model(models.ModelConfig.from_config(resolved.model, vocab_size=512))
    variables = init_lib.init_params(resolved.init, model, jax.random.key(0), batch)
    records = [r for r in signal.signal_profile(model, variables, batch) if r["sublayer"] == "embedding"]
    assert [r["stack"] for r in records] == ["encoder", "decoder"]
    for r in records:
      assert r["token_fraction"] == pytest.approx(fraction, rel=0.05), (overrides, r["stack"])
      assert r["cos_positions"] == pytest.approx(cos, rel=0.02), (overrides, r["stack"])
