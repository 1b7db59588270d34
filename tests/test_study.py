"""experiments/study.py `decide`: the one fold of a claim's rules into its verdict, on every branch, with the reason's
text as the claims state it (their verdicts' own tests check each claim's thresholds)."""

import pytest

from experiments import study


@pytest.mark.parametrize(
    "rules, verdict, tail",
    [
        ({"a": True, "b": True}, study.REPRODUCED, ""),
        ({"a": True, "b": False, "c": None, "d": False}, study.NOT_REPRODUCED, "; failing: ['b', 'd']"),  # fails first
        ({"a": True, "b": None, "c": None}, study.INCONCLUSIVE, "; more seeds: ['b', 'c']"),
        ({}, study.REPRODUCED, ""),
        # a part's own verdict (study 12's two parts): labels fold the same way
        ({"a": study.REPRODUCED, "b": study.INCONCLUSIVE}, study.INCONCLUSIVE, "; more seeds: ['b']"),
        ({"a": study.NOT_REPRODUCED, "b": study.INCONCLUSIVE}, study.NOT_REPRODUCED, "; failing: ['a']"),
        ({"a": study.REPRODUCED, "b": study.REPRODUCED}, study.REPRODUCED, ""),
    ],
)
def test_decide_folds_the_rules_failed_first_then_undetermined(rules, verdict, tail):
  v = study.decide(rules, "numbers", undetermined=lambda keys: f"more seeds: {keys}")
  assert v == study.Verdict(verdict, "numbers" + tail)


def test_decide_names_the_failing_rules_its_own_way_or_not_at_all():
  rules = {"larger": False, "wider": None}
  assert study.decide(rules, "r", failing="failing (Pre-LN larger)").reason == "r; failing (Pre-LN larger): ['larger']"
  assert study.decide(rules, "r", failing=None) == study.Verdict(study.NOT_REPRODUCED, "r")
  assert study.decide({"wider": None}, "r") == study.Verdict(study.INCONCLUSIVE, "r")  # no advice: the reason alone


def test_decide_asks_for_advice_only_when_a_rule_is_undetermined():
  asked = []
  advise = lambda keys: asked.append(keys) or "x"
  study.decide({"a": False, "b": None}, "r", undetermined=advise)
  study.decide({"a": True}, "r", undetermined=advise)
  assert asked == []  # the advice's numbers (a t quantile, seeds to decide) are computed for an undetermined rule only
