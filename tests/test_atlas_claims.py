"""experiments/atlas/claims.py: claims 6, 8, 9 and 10 decided from hand-made atlas rows, each rule's branches."""

import json

import pytest

from experiments.atlas import claims

LRS = [1e-4, 1e-3, 1e-2]


def _arm(losses, stable, seeds=2, outcomes=None):
  """A (method, warmup) row as experiments.atlas.collect.measure writes it: per-lr mean loss, stability, outcomes."""
  best = min([x for x in losses if x is not None], default=None)
  return dict(
      lrs=LRS,
      mean_loss=losses,
      stable=stable,
      outcomes=outcomes or [["finished"] * seeds for _ in LRS],
      best=best,
  )


GOOD = _arm([4.0, 3.5, 3.6], [True, True, True])


def _measured_pairs(post0, postw, pre0):
  """Claim 6's arms: Post-LN + Xavier without and with warmup, Pre-LN without."""
  return {"methods": {claims.POST: {"runs": {0: post0, 20: postw}}, claims.PRE: {"runs": {0: pre0}}}}


def test_claim6_reproduced_by_a_rescued_lr_and_string_keys_of_atlas_json():
  post0 = _arm([4.0, 5.5, None], [True, False, False])
  postw = _arm([4.1, 3.6, 5.9], [True, True, False])
  pre0 = _arm([4.0, 3.55, 3.7], [True, True, True])
  m = json.loads(json.dumps(_measured_pairs(post0, postw, pre0)))  # warmup keys become "0", "20"
  r = claims.warmup(m, seeds=2)
  assert r["verdict"] == "reproduced" and r["number"] == 6, r
  assert r["numbers"]["rescued lrs"] == [1e-3]
  assert "rescues Post-LN at lr {0.001}" in r["reason"]


def test_claim6_not_reproduced_when_pre_ln_fails_where_warmup_rescued_or_warmup_does_not_help():
  post0 = _arm([4.0, 5.5, None], [True, False, False])
  postw = _arm([4.1, 3.6, 5.9], [True, True, False])
  pre_fails = _arm([4.0, 5.4, 3.7], [True, False, True])
  r = claims.warmup(_measured_pairs(post0, postw, pre_fails), seeds=2)
  assert r["verdict"] == "not reproduced" and "unstable at {0.001}" in r["reason"], r
  # Warmup neither rescues an lr nor lowers the best loss by δ: not reproduced.
  same = _arm([4.0, 3.6, 5.9], [True, True, False])
  r = claims.warmup(_measured_pairs(same, _arm([4.0, 3.55, 5.9], [True, True, False]), GOOD), seeds=2)
  assert r["verdict"] == "not reproduced", r
  # ... but a best-loss gain of δ alone is enough.
  r = claims.warmup(_measured_pairs(same, _arm([4.0, 3.5, 5.9], [True, True, False]), GOOD), seeds=2)
  assert r["verdict"] == "reproduced", r


@pytest.mark.parametrize(
    "postw,why",
    [
        (None, "no run yet"),
        (_arm([4.0, 3.6, 5.9], [True, True, False], outcomes=[["finished"] * 2, ["finished"], ["finished"] * 2]),
         "lr 0.001 incomplete"),
        (_arm([4.0, 3.6, 5.9], [True, True, None], outcomes=[["finished"] * 2, ["finished"] * 2, ["crashed", "finished"]]),
         "a run crashed"),
    ],
)  # fmt: skip
def test_claim6_inconclusive_while_an_arm_is_incomplete(postw, why):
  post0 = _arm([4.0, 5.5, None], [True, False, False])
  m = _measured_pairs(post0, postw, GOOD)
  if postw is None:
    del m["methods"][claims.POST]["runs"][20]
  r = claims.warmup(m, seeds=2)
  assert r["verdict"] == "inconclusive" and why in r["reason"], r


def test_claim8_tfixup():
  post0 = _arm([4.0, 5.5, None], [True, False, False])
  m = {"methods": {claims.POST: {"runs": {0: post0}}, claims.TFIXUP: {"runs": {0: GOOD}}}}
  r = claims.tfixup(m, seeds=2)
  assert r["verdict"] == "reproduced" and r["numbers"]["lrs T-Fixup only"] == [1e-3, 1e-2], r
  worse = _arm([4.2, 4.15, 5.9], [True, True, False])  # stable where Post-LN is not, but 0.15 nats worse at best
  m["methods"][claims.TFIXUP]["runs"][0] = worse
  assert claims.tfixup(m, seeds=2)["verdict"] == "not reproduced"
  m["methods"][claims.TFIXUP]["runs"][0] = post0  # fails exactly where Post-LN fails
  assert claims.tfixup(m, seeds=2)["verdict"] == "not reproduced"


@pytest.mark.parametrize("bert_best,verdict", [(3.89, "reproduced"), (3.95, "inconclusive"), (4.1, "not reproduced")])
def test_claim9_training_half_uses_delta(bert_best, verdict):
  xavier = _arm([4.0, 5.5, None], [True, False, False])  # best 4.0
  bert = _arm([bert_best, 5.0, None], [True, True, False])
  m = {"methods": {claims.POST: {"runs": {0: xavier}}, claims.BERT: {"runs": {0: bert}}}}
  assert claims.bert_vs_xavier(m, seeds=2)["verdict"] == verdict


def test_claim10_each_method_within_the_margin_of_pre_ln():
  pre = _arm([4.0, 3.5, 3.6], [True, True, True])  # best 3.5: limit 3.8
  ok = _arm([4.0, 3.79, None], [True, True, False])
  m = {"methods": {name: {"runs": {0: ok}} for name in claims.DEEP}}
  m["methods"][claims.PRE] = {"runs": {0: pre}}
  r = claims.deep_no_warmup(m, seeds=2)
  assert r["verdict"] == "reproduced" and "limit 3.800" in r["reason"], r
  m["methods"]["DeepNorm"]["runs"][0] = _arm([4.0, 3.81, None], [True, True, False])
  r = claims.deep_no_warmup(m, seeds=2)
  assert r["verdict"] == "not reproduced" and "['DeepNorm']" in r["reason"], r
  del m["methods"]["Admin"]
  assert claims.deep_no_warmup(m, seeds=2)["verdict"] == "inconclusive"


def test_decide_returns_the_four_claims_in_order():
  out = claims.decide({"methods": {}}, seeds=2)
  assert [r["number"] for r in out] == [6, 8, 9, 10]
  assert all(r["verdict"] == "inconclusive" and r["rules"] for r in out)


def test_with_atlas_replaces_the_verdict_and_claim_9_keeps_its_identity_half(tmp_path):
  from experiments.claims import report

  xavier = _arm([4.0, 5.5, None], [True, False, False])
  bert = _arm([3.5, 5.0, None], [True, True, False])
  m = {"methods": {claims.POST: {"runs": {0: xavier}}, claims.BERT: {"runs": {0: bert}}}}
  decisions = claims.decide(m, seeds=2)
  results = [
      {"claim": "bert_vs_xavier", "number": 9, "verdict": "reproduced", "reason": "one lr", "measured": {}},
      {"claim": "identity_path", "number": 4, "verdict": "reproduced", "reason": "at init"},
  ]
  out = report.with_atlas(results, decisions)
  assert out[0]["verdict"] == "reproduced" and out[0]["single_lr"]["verdict"] == "reproduced"
  assert out[0]["reason"].startswith("decided from the atlas's lr × warmup grid") and out[1] == results[1]
  results[0]["measured"]["identity_holds"] = False
  assert report.with_atlas(results, decisions)[0]["verdict"] == "not reproduced"
  path = report.write_reproduction(out, str(tmp_path / "R.md"), figure_dir="f", command="c")
  text = open(path, encoding="utf-8").read()
  assert "| 9 | [bert_vs_xavier](#bert-vs-xavier) | **reproduced** (atlas) |" in text
  assert "| 4 | [identity_path](#identity-path) | **reproduced** |" in text
  assert "superseded by the atlas (issue 15): verdict reproduced. one lr" in text
  assert f"- {claims.RULES['bert_vs_xavier'][1]}" in text
  row = report.readme_table(out).splitlines()[2]  # the README row shows the numbers the atlas's verdict read
  assert row.startswith("| 9 | [bert_vs_xavier]") and "BERT best 3.5; Xavier best 4" in row, row


def test_markdown_lists_every_claim_with_its_verdict():
  text = claims.markdown(claims.decide({"methods": {}}, seeds=2))
  rows = [l for l in text.splitlines() if l.startswith("| ") and l[2].isdigit()]
  assert [r.split(" | ")[0] for r in rows] == ["| 6", "| 8", "| 9", "| 10"]
  assert all("**inconclusive**" in r and "atlas incomplete" in r for r in rows)
