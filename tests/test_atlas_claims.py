"""experiments/atlas/claims.py: claims 6, 8, 9 and 10 decided from hand-made atlas rows by outcome class, each rule's
branches (warmup rescuing at one lr only; too few seeds; a horizon too short; a grid that does not bracket)."""

import json

import pytest

from experiments.atlas import claims

LRS = [1e-3, 2e-3, 4e-3]
H = 5.4  # unigram reference
REF = {"unigram_entropy": H}
LOSS0 = 7.9
T, C, U = 4.0, 5.42, 6.5  # a trained, a collapsed and an undertrained final loss (H ± δ = 5.3 .. 5.5)


def _arm(*per_lr, seeds=3, outcomes=None):
  """A (method, warmup) row as experiments.atlas.collect.measure writes it: per lr, every seed's final loss."""
  losses = [[v] * seeds if not isinstance(v, list) else v for v in per_lr]
  return dict(lrs=LRS, losses=losses, outcomes=outcomes or [["finished"] * len(l) for l in losses])


def _m(**arms):
  """{method: {warmup: row}} → atlas.json's measured dict (warmup keys as strings, as json.dump writes them)."""
  methods = {}
  for key, row in arms.items():
    name, warm = {"post0": (claims.POST, 0), "postw": (claims.POST, 20), "pre0": (claims.PRE, 0),
                  "tf0": (claims.TFIXUP, 0), "bert0": (claims.BERT, 0)}.get(key, (key, 0))  # fmt: skip
    methods.setdefault(name, {"loss0": LOSS0, "runs": {}})["runs"][str(warm)] = row
  return json.loads(json.dumps({"methods": methods}))


RESCUE = dict(post0=_arm(T, C, C), postw=_arm(T, T, C), pre0=_arm(T, T, T))  # warmup rescues at 2e-3 only


def test_claim6_reproduced_when_warmup_rescues_at_one_lr_only():
  r = claims.warmup(_m(**RESCUE), seeds=3, reference=REF)
  assert r["verdict"] == "reproduced" and r["number"] == 6, r
  assert r["numbers"]["rescued lrs"] == [2e-3] and "rescues Post-LN at η {0.002}" in r["reason"]


@pytest.mark.parametrize(
    "change, verdict, why",
    [
        (dict(pre0=_arm(T, C, T)), "not reproduced", "Pre-LN fails at every rescued η"),
        (dict(postw=_arm(T, C, C)), "not reproduced", "rescues Post-LN at η none"),  # warmup does not help
        (dict(postw=_arm(U, U, C)), "inconclusive", "more steps"),  # the good arm never trains
        (dict(post0=_arm(T, T, U)), "inconclusive", "extend the lr grid"),  # Post-LN never fails on the grid
        (dict(post0=_arm(T, [C, C, T], C), postw=_arm(T, C, C)), "inconclusive", "mixed seeds"),
        (dict(post0=_arm(T, 9000.0, 1e4)), "reproduced", None),  # a blow-up above ℓ₀ fails as diverged
        (dict(post0=_arm(T, [C, C], C, outcomes=None), postw=_arm(T, [T, T], C)), "inconclusive", "fewer than 3"),
    ],
)
def test_claim6_branches(change, verdict, why):
  r = claims.warmup(_m(**{**RESCUE, **change}), seeds=2, reference=REF)
  assert r["verdict"] == verdict, r
  if why:
    assert why in r["reason"], r


def test_claim6_diverged_outcome_and_nonfinite_loss_are_failures():
  post0 = _arm(T, [None, None, None], C, outcomes=[["finished"] * 3, ["diverged"] * 3, ["finished"] * 3])
  r = claims.warmup(_m(**{**RESCUE, "post0": post0}), seeds=3, reference=REF)
  assert r["verdict"] == "reproduced" and "0.002 diverged" in r["reason"], r


@pytest.mark.parametrize(
    "arms, why",
    [
        (dict(post0=RESCUE["post0"], pre0=RESCUE["pre0"]), "no run yet"),
        (dict(RESCUE, postw=_arm(T, [T], C)), "lr 0.002 incomplete"),
        (dict(RESCUE, postw=_arm(T, T, C, outcomes=[["finished"] * 3, ["crashed"] * 3, ["finished"] * 3])), "crashed"),
    ],
)
def test_claim6_inconclusive_while_an_arm_is_incomplete(arms, why):
  r = claims.warmup(_m(**arms), seeds=3, reference=REF)
  assert r["verdict"] == "inconclusive" and why in r["reason"], r


def test_no_unigram_reference_no_classes():
  r = claims.warmup(_m(**RESCUE), seeds=3, reference=None)
  assert r["verdict"] == "inconclusive" and "no unigram reference" in r["reason"]


def test_claim8_tfixup():
  post0 = _arm(T, C, C)
  r = claims.tfixup(_m(post0=post0, tf0=_arm(T, T, C)), seeds=3, reference=REF)
  assert r["verdict"] == "reproduced" and r["numbers"]["lrs T-Fixup trains where Post-LN fails"] == [2e-3], r
  assert claims.tfixup(_m(post0=post0, tf0=_arm(T, C, C)), seeds=3, reference=REF)["verdict"] == "not reproduced"
  r = claims.tfixup(_m(post0=_arm(T, [C, C], C), tf0=_arm(T, [T, T], C)), seeds=2, reference=REF)
  assert r["verdict"] == "inconclusive" and "fewer than 3 seeds" in r["reason"], r
  r = claims.tfixup(_m(post0=_arm(T, T, T), tf0=_arm(T, T, T)), seeds=3, reference=REF)
  assert r["verdict"] == "inconclusive" and "extend the lr grid" in r["reason"], r


def test_claim9_compares_recipes_until_an_ablation_separates_them():
  r = claims.bert_vs_xavier(_m(post0=_arm(T, C, C), bert0=_arm(T, T, C)), seeds=3, reference=REF)
  assert r["verdict"] == "inconclusive" and "ablation arm" in r["reason"]
  assert r["numbers"]["lrs BERT recipe trains where Xavier fails"] == [2e-3]


def test_claim10_needs_two_depths_and_reports_the_cells():
  arms = {m: _arm(T, T, C) for m in claims.DEEP}
  r = claims.deep_no_warmup(_m(pre0=_arm(T, T, T), **arms), seeds=3, reference=REF)
  assert r["verdict"] == "inconclusive" and "12+12 or deeper" in r["reason"]
  assert r["numbers"]["Admin: Pre-LN's lrs it does not train at"] == [4e-3]


def test_decide_returns_the_four_claims_in_order():
  out = claims.decide({"methods": {}}, seeds=2)
  assert [r["number"] for r in out] == [6, 8, 9, 10]
  assert all(r["verdict"] == "inconclusive" and r["rules"] for r in out)


def test_markdown_lists_every_claim_with_its_verdict():
  text = claims.markdown(claims.decide({"methods": {}}, seeds=2))
  rows = [l for l in text.splitlines() if l.startswith("| ") and l[2].isdigit()]
  assert [r.split(" | ")[0] for r in rows] == ["| 6", "| 8", "| 9", "| 10"]
  assert all("**inconclusive**" in r and "atlas incomplete" in r for r in rows)
