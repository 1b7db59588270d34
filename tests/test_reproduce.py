"""Claims 1–4 at the 'tiny' scale: their verdicts and the numbers behind them; registry, config and report checks."""

import json
import math
import os

import pytest

from analysis.reproduce import CLAIMS, get_claim, run_claim
from analysis.reproduce.report import write_report
from configs.reproduce._base import reproduce_config


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
