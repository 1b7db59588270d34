"""Claims 1–4 at the 'tiny' scale: their verdicts and the numbers behind them; registry, config and report checks."""

import json
import math
import os

import pytest

from analysis.reproduce import CLAIMS, get_claim, run_claim
from analysis.reproduce.report import write_report
from configs.reproduce._base import reproduce_config

TRUNC = 0.87962566  # std of N(0, 1) truncated to ±2 (docs/science.md §1)


def _run(claim, tmp_path):
  config = reproduce_config(claim)
  config.reproduce.scale = "tiny"
  workdir = str(tmp_path / claim)
  result = run_claim(config, workdir)
  with open(os.path.join(workdir, "result.json")) as f:
    assert json.load(f)["verdict"] == result["verdict"]
  for fig in result["figures"]:
    assert os.path.getsize(os.path.join(workdir, fig)) > 1000
  return result


def test_truncated_normal_claim(tmp_path):
  r = _run("truncated_normal", tmp_path)
  assert r["verdict"] == "reproduced", r["reason"]
  assert r["measured"]["truncated_normal_tf(σ=1)"]["measured_std"] == pytest.approx(0.87962566, rel=0.01)
  assert r["measured"]["bert_rounded_4dp"] == 0.0176
  assert r["measured"]["xavier_768_rounded_4dp"] == 0.0361


def test_activation_moments_claim(tmp_path):
  r = _run("activation_moments", tmp_path)
  m = r["measured"]
  assert m["selu"]["solved_lambda"] == pytest.approx(1.0507009873554805, rel=1e-6)
  assert m["selu"]["solved_alpha"] == pytest.approx(1.6732632423543772, rel=1e-6)
  # Plain ReLU halves E[x²] per layer under LeCun init: 2^-20 (mean-field and measured).
  assert m["activations"]["relu"]["mean_field"][-1] == pytest.approx(2.0**-20, rel=1e-3)
  assert m["activations"]["relu"]["final"] == pytest.approx(2.0**-20, rel=0.5)
  assert m["stable_ok"]["normalized_relu"] and m["stable_ok"]["selu"] and all(m["drift_ok"].values())
  # The normalized GELU's fixed point q = 1 is repelling (slope > 1), so finite-width noise grows: the claim does
  # not hold for it, and the verdict says so rather than hiding it.
  assert m["activations"]["normalized_gelu"]["fixed_point_slope"] > 1.1
  assert m["activations"]["normalized_relu"]["fixed_point_slope"] == pytest.approx(1.0, abs=1e-3)
  assert m["activations"]["selu"]["fixed_point_slope"] < 0.9
  assert not m["stable_ok"]["normalized_gelu"]
  assert r["verdict"] == "not reproduced" and "normalized_gelu" in r["reason"]


def test_attention_scale_claim(tmp_path):
  r = _run("attention_scale", tmp_path)
  assert r["verdict"] == "reproduced", r["reason"]
  per = r["measured"]["per_variant"]
  assert per["unscaled"]["mean_logit_std"] == pytest.approx(math.sqrt(64), rel=0.25)
  assert per["scaled"]["mean_logit_std"] == pytest.approx(1.0, rel=0.25)
  assert per["unscaled"]["mean_entropy_ratio"] < 0.5 * per["scaled"]["mean_entropy_ratio"]


def test_identity_path_claim(tmp_path):
  r = _run("identity_path", tmp_path)
  assert r["verdict"] == "reproduced", r["reason"]
  post = r["measured"]["post"]
  assert post["coefficient"][-1] == pytest.approx(2.0**-3, rel=0.2)  # 6 layers
  assert r["measured"]["pre"]["coefficient"][-1] == pytest.approx(1.0, abs=0.1)


def test_registry_and_config_errors():
  assert [c.number for c in CLAIMS.values()] == list(range(1, 11))
  with pytest.raises(ValueError, match="reproduce.claim='nope' is not one of"):
    get_claim("nope")
  config = reproduce_config("truncated_normal")
  config.reproduce.scale = "huge"
  with pytest.raises(ValueError, match="reproduce.scale='huge' is not one of"):
    run_claim(config, "/nonexistent")
  for name in CLAIMS:
    assert os.path.exists(os.path.join("configs", "reproduce", f"{name}.py"))


def test_report_lists_every_claim(tmp_path):
  results = [
      dict(
          claim="a_b",
          number=1,
          statement="s",
          source="x",
          paper_scale="p",
          scale="tiny",
          scale_used="u",
          verdict="reproduced",
          reason="because 1.0",
          thresholds={"t": "≤ 1"},
          summary={"q": 0.5},
          figures=["f.png"],
          seconds=1.0,
      ),
      dict(claim="c", number=2, verdict="inconclusive", reason="crashed"),
  ]
  text = open(write_report(results, str(tmp_path / "R.md"), figure_dir="reproduction")).read()
  assert "| 1 | [a_b](#a-b) | **reproduced** |" in text and "**Verdict: inconclusive.** crashed" in text
  assert "![a_b](reproduction/a_b/f.png)" in text and "| q | 0.5 |" in text


def _group(loss=None, failed=()):
  """A synthetic `training.summarize` record: mean final loss, or failed seeds (loss inf)."""
  return dict(failed_seeds=list(failed), mean_final_loss=math.inf if failed else loss)


@pytest.mark.parametrize(
    "no_warm, warm, pre, expected",
    [
        (_group(3.0), _group(2.5), _group(2.6), "reproduced"),  # ≥ δ above both references
        (_group(failed=[0]), _group(2.5), _group(2.6), "reproduced"),  # diverged
        (_group(2.65), _group(2.5), _group(2.6), "not reproduced"),  # within δ of the worse reference
        (_group(3.0), _group(failed=[1]), _group(2.6), "inconclusive"),  # a reference failed
    ],
)
def test_warmup_verdict(no_warm, warm, pre, expected):
  from analysis.reproduce.training_claims import warmup_verdict

  assert warmup_verdict({"postln_nowarmup": no_warm, "postln_warmup": warm, "preln_nowarmup": pre}) == expected


@pytest.mark.parametrize(
    "tfixup, post, expected",
    [
        (_group(2.5), _group(failed=[0]), "reproduced"),
        (_group(2.5), _group(2.7), "reproduced"),
        (_group(2.5), _group(2.55), "inconclusive"),
        (_group(2.7), _group(2.5), "not reproduced"),
        (_group(failed=[0]), _group(failed=[0]), "not reproduced"),
    ],
)
def test_tfixup_verdict(tfixup, post, expected):
  from analysis.reproduce.training_claims import tfixup_verdict

  assert tfixup_verdict({"tfixup_nowarmup": tfixup, "postln_nowarmup": post}) == expected


@pytest.mark.parametrize(
    "bert_cos, bert, xavier, expected",
    [
        (0.8, _group(2.5), _group(2.7), "reproduced"),
        (0.8, _group(2.5), _group(failed=[0]), "reproduced"),
        (0.8, _group(2.5), _group(2.55), "inconclusive"),
        (0.8, _group(2.7), _group(2.5), "not reproduced"),
        (0.3, _group(2.5), _group(2.7), "not reproduced"),  # identity path not stronger at init
        (0.8, _group(failed=[1]), _group(2.7), "not reproduced"),
    ],
)
def test_bert_vs_xavier_verdict(bert_cos, bert, xavier, expected):
  from analysis.reproduce.training_claims import bert_vs_xavier_verdict

  identity = {"bert": {"encoder": bert_cos, "decoder": 0.8}, "xavier": {"encoder": 0.5, "decoder": 0.4}}
  assert bert_vs_xavier_verdict(identity, {"postln_bert": bert, "postln_xavier": xavier}) == expected


def _spectrum(top, top_bound, lam_min, min_bound):
  """A synthetic per-seed record of claim 7 (`curvature._analyze`): top Ritz value, λ_min, their bounds, width."""
  return dict(top=[top], top_bounds=[top_bound], lambda_min=lam_min, lambda_min_bound=min_bound, width=top - lam_min)


@pytest.mark.parametrize(
    "post, pre, wider",
    [
        # width 15 vs 14.5, every bound 0.01: wider beyond the bounds.
        (_spectrum(10.0, 0.01, -5.0, 0.01), _spectrum(9.0, 0.01, -5.5, 0.01), True),
        # Same Ritz values, but Post-LN's smallest Ritz value is known only to ±2: 15 − 2.01 < 14.5 + 0.02.
        (_spectrum(10.0, 0.01, -5.0, 2.0), _spectrum(9.0, 0.01, -5.5, 0.01), False),
        # Pre-LN's smallest Ritz value's bound alone flips it: 15 − 0.02 < 14.5 + 0.51.
        (_spectrum(10.0, 0.01, -5.0, 0.01), _spectrum(9.0, 0.01, -5.5, 0.5), False),
        # The top bounds count too: 15 − 0.3 < 14.5 + 0.21; with them 0.1 smaller it holds (15 − 0.2 > 14.5 + 0.11).
        (_spectrum(10.0, 0.29, -5.0, 0.01), _spectrum(9.0, 0.2, -5.5, 0.01), False),
        (_spectrum(10.0, 0.19, -5.0, 0.01), _spectrum(9.0, 0.1, -5.5, 0.01), True),
    ],
)
def test_hessian_spectrum_wider_uses_both_ends_bounds(post, pre, wider):
  from analysis.reproduce.curvature import larger_beyond_bounds, wider_beyond_bounds, width_bound

  assert post["width"] > pre["width"]  # the bare widths always say "wider"; only the bounds can say otherwise
  assert width_bound(post) == pytest.approx(post["top_bounds"][0] + post["lambda_min_bound"], rel=1e-15)
  assert wider_beyond_bounds(post, pre) is wider
  assert larger_beyond_bounds(post, pre) is (10.0 - post["top_bounds"][0] > 9.0 + pre["top_bounds"][0])


def test_deep_no_warmup_verdict():
  from analysis.reproduce.training_claims import REFERENCE_MARGIN, deep_no_warmup_verdict

  methods = ["rezero", "admin"]
  ok = {"preln_reference": _group(2.0), "rezero": _group(2.0 + REFERENCE_MARGIN - 0.01), "admin": _group(1.9)}
  assert deep_no_warmup_verdict(ok, methods) == ("reproduced", {"rezero": True, "admin": True})
  slow = dict(ok, rezero=_group(2.0 + REFERENCE_MARGIN + 0.01))
  assert deep_no_warmup_verdict(slow, methods) == ("not reproduced", {"rezero": False, "admin": True})
  diverged = dict(ok, admin=_group(failed=[0]))
  assert deep_no_warmup_verdict(diverged, methods)[0] == "not reproduced"
  assert deep_no_warmup_verdict(dict(ok, preln_reference=_group(failed=[1])), methods)[0] == "inconclusive"


def test_sweep_merges_earlier_results(tmp_path):
  from analysis.reproduce.sweep import merged_results

  root = tmp_path / "reproduction"
  for name, verdict in (("truncated_normal", "reproduced"), ("warmup", "not reproduced")):
    os.makedirs(root / name)
    with open(root / name / "result.json", "w") as f:
      json.dump(dict(claim=name, verdict=verdict), f)
  fresh = [dict(claim="warmup", verdict="reproduced"), dict(claim="tfixup", verdict="inconclusive")]
  merged = merged_results(fresh, str(root))
  names = [r["claim"] for r in merged]
  assert names == [n for n in CLAIMS if n in ("truncated_normal", "warmup", "tfixup")]  # registry order
  assert {r["claim"]: r["verdict"] for r in merged} == {
      "truncated_normal": "reproduced",
      "warmup": "reproduced",
      "tfixup": "inconclusive",
  }  # fresh wins


def test_bert_arm_input_stream_closed_forms():
  """Claim 9's arms at init (analysis.reproduce.embeddings): BERT's pipeline (learned positions, LayerNorm of token +
  position, both tables at 0.0176) splits x_0 evenly, token fraction ≈ 1/2 and cos(x_0, p) ≈ 1/√2; the former arm
  (0.0176 tokens + unit sinusoids, mean square 1/2 per entry, no norm) leaves the tokens σ²/(σ² + 1/2)."""
  from analysis.reproduce import embeddings, inputs
  from analysis.reproduce.training_claims import ARM_MODEL

  config = reproduce_config("bert_vs_xavier")
  config.model.update(dict(num_encoder_layers=1, num_decoder_layers=1, d_model=256, num_heads=4, d_ff=64))
  batch = inputs.batches(config, "tiny", "/unused", 1, 8)[0][0]
  sigma2 = (0.02 * TRUNC) ** 2
  former = {"norm_position": "post", "scale_embeddings": False}
  for overrides, fraction, cos in (
      (ARM_MODEL["bert"], 0.5, 0.5**0.5),
      (former, sigma2 / (sigma2 + 0.5), (0.5 / (sigma2 + 0.5)) ** 0.5),
  ):
    model, variables = inputs.model_and_variables(config, overrides, {"scheme": "bert"}, inputs.TINY_VOCAB, 0, batch)
    for stack, got in embeddings.input_stream(model, variables, batch).items():
      assert got["token_fraction"] == pytest.approx(fraction, rel=0.05), (overrides, stack)
      assert got["cos_positions"] == pytest.approx(cos, rel=0.02), (overrides, stack)
