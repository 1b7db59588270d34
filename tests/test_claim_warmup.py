"""Claim 6 (experiments/claims/warmup.py, configs/claims/warmup.py): decided per learning rate by outcome class, with a
horizon check; the rule's branches on hand-made records, the design at every scale, and the study end to end at tiny."""

import json

import pytest

import train.config
from configs.claims import warmup as warmup_config
from experiments import grid as grid_lib
from experiments import run, study
from experiments.claims import warmup as claim

T, C, U, D = "trained", "collapsed", "undertrained", "diverged"
STEPS = 1000
CONVERGED = [[0, 7.9], [800, 3.50], [1000, 3.45]]  # −1.4% over the last 20%
IMPROVING = [[0, 7.9], [800, 3.80], [1000, 3.45]]  # −9%
H = 5.375  # the unigram entropy (nats)
PLATEAU = [[0, 7.9], [100, 5.42], [500, 5.40], [800, 5.38], [1000, 5.40]]  # within 0.1 of H from step 500 on
LEAVES = [[0, 7.9], [100, 5.42], [500, 5.40], [800, 5.10], [1000, 5.40]]  # dips 0.275 below H at 800: not a plateau


def _cell(cls, seeds=3, loss=3.45, curve=None):
  curve = curve or (PLATEAU if cls == C else CONVERGED)
  return [dict(seed=s, cls=cls, final_loss=None if cls == D else loss + 0.01 * s, converged=claim.near_convergence(
      [tuple(p) for p in curve], STEPS), curve=curve) for s in range(seeds)]  # fmt: skip


def _arm(norm, warmup, **cells):
  """cells: lr key ('0.001') -> a list of runs (`_cell`)."""
  return {"norm": norm, "warmup": warmup, "cells": cells}


def _m(post0, postw, pre0, crashed=()):
  arms = {"Post-LN, warmup 0": post0, "Post-LN, warmup 100": postw, "Pre-LN, warmup 0": pre0}
  return json.loads(json.dumps({"crashed": list(crashed), "arms": arms, "steps": STEPS, "unigram_entropy": H}))


def _rescue_at_2e3(**over):
  cells = dict(
      post0=_arm("post", 0, **{"0.001": _cell(T), "0.002": _cell(C, loss=5.4), "0.004": _cell(C, loss=5.4)}),
      postw=_arm("post", 100, **{"0.001": _cell(T), "0.002": _cell(T, loss=3.6), "0.004": _cell(C, loss=5.4)}),
      pre0=_arm("pre", 0, **{"0.001": _cell(T), "0.002": _cell(T, loss=3.3), "0.004": _cell(T, loss=3.2)}),
  )
  return _m(**{**cells, **over})


def test_near_convergence_reads_the_last_fifth_of_the_run():
  assert claim.near_convergence([(0, 8.0), (800, 3.5), (1000, 3.45)], 1000) is True
  assert claim.near_convergence([(0, 8.0), (800, 3.8), (1000, 3.45)], 1000) is False
  assert claim.near_convergence([(0, 8.0), (700, 3.5), (900, 3.45)], 1000) is None  # no evaluation at the end
  assert claim.near_convergence([(0, 8.0), (800, float("nan")), (1000, 3.45)], 1000) is None


def test_reproduced_when_warmup_rescues_at_one_lr_only_and_the_failing_arm_holds():
  v = claim.verdict(_rescue_at_2e3())
  assert v.verdict == study.REPRODUCED, v.reason
  assert "rescues Post-LN at η {0.002}" in v.reason and "3 of 3 collapsed seeds on the plateau" in v.reason
  s = claim.summary(_rescue_at_2e3())
  assert s["rescued lrs"] == [0.002] and s["rescued by warmup 100"] == [0.002]
  assert s["η 0.002: no-warmup seeds on the plateau"] == "3/3" and s["good arms near convergence (reported)"]
  assert s["η 0.002: no-warmup final − warmup 100's, nats"].startswith("1.8 [")  # 5.41 − 3.61


def test_the_failing_arms_plateau_and_gap():
  assert claim.plateau(PLATEAU, H, STEPS) and not claim.plateau(LEAVES, H, STEPS)
  assert not claim.plateau([[0, 7.9], [1000, float("nan")]], H, STEPS)
  g = claim.gap_interval([5.40, 5.41, 5.42], [3.60, 3.61, 3.62])
  assert g[0] == pytest.approx(1.8) and 1.7 < g[1] < 1.8 < g[2] < 1.9
  assert claim.gap_interval([None, None], [3.6, 3.7]) == (float("inf"),) * 3  # every failing seed diverged
  assert claim.gap_interval([5.4], [3.6, 3.7]) is None


def test_cells_read_fractions_of_seeds():
  assert claim.cell_class([C, C, T]) == C and claim.cell_class([T, T, C]) == T and claim.cell_class([D, C, D]) == D
  assert claim.cell_class([C, T]) == C and claim.cell_class([T, U, C]) == claim.MIXED


@pytest.mark.parametrize(
    "over, verdict, why",
    [
        # The good arms still improving no longer decide anything (reported only).
        (dict(pre0=_arm("pre", 0, **{"0.001": _cell(T), "0.002": _cell(T, loss=3.3, curve=IMPROVING),
                                     "0.004": _cell(T, loss=3.2, curve=IMPROVING)})),  # fmt: skip
         study.REPRODUCED, "on the plateau"),
        # The failing arm leaves the plateau in one seed, or ends less than 1 nat above the rescued cell.
        (dict(post0=_arm("post", 0, **{"0.001": _cell(T), "0.002": _cell(C, loss=5.4, curve=LEAVES),
                                       "0.004": _cell(C, loss=5.4)})),  # fmt: skip
         study.INCONCLUSIVE, "the failing arm does not hold"),
        (dict(postw=_arm("post", 100, **{"0.001": _cell(T), "0.002": _cell(T, loss=4.9), "0.004": _cell(C)})),
         study.INCONCLUSIVE, "(≥ 1 nat needed): the failing arm does not hold"),
        (dict(pre0=_arm("pre", 0, **{"0.001": _cell(T), "0.002": _cell(C), "0.004": _cell(T)})),
         study.NOT_REPRODUCED, "Pre-LN fails at every rescued η"),
        (dict(postw=_arm("post", 100, **{"0.001": _cell(T), "0.002": _cell(C), "0.004": _cell(C)})),
         study.NOT_REPRODUCED, "rescues Post-LN at η none"),
        (dict(post0=_arm("post", 0, **{"0.001": _cell(T), "0.002": _cell(T), "0.004": _cell(U)})),
         study.INCONCLUSIVE, "extend the lr grid upwards"),
        (dict(postw=_arm("post", 100, **{"0.001": _cell(U), "0.002": _cell(U), "0.004": _cell(C)})),
         study.INCONCLUSIVE, "smaller lrs or more steps"),
        (dict(post0=_arm("post", 0, **{"0.001": _cell(T), "0.002": _cell(C, seeds=2), "0.004": _cell(C)})),
         study.INCONCLUSIVE, "fewer than 3 seeds"),
        (dict(post0=_arm("post", 0, **{"0.001": _cell(T), "0.002": _cell(D), "0.004": _cell(D)})),
         study.REPRODUCED, "0.002 diverged"),
    ],
)  # fmt: skip
def test_verdict_branches(over, verdict, why):
  v = claim.verdict(_rescue_at_2e3(**over))
  assert v.verdict == verdict, v.reason
  assert why in v.reason, v.reason


def test_runs_without_a_class_or_a_crash_decide_nothing():
  m = _rescue_at_2e3()
  m["arms"]["Pre-LN, warmup 0"]["cells"]["0.002"][0]["cls"] = None
  assert "without an outcome class" in claim.verdict(m).reason
  crashed = claim.verdict(_rescue_at_2e3(crashed=["x seed 0: RuntimeError"]))
  assert crashed.verdict == study.INCONCLUSIVE and "crashed" in crashed.reason


@pytest.mark.parametrize("scale", ("tiny", "cpu", "paper"))
def test_the_design_at_every_scale(scale):
  config = warmup_config.get_config(scale)
  config.data.dir = "/the/user/s/multi30k"
  cells = grid_lib.cells(config)
  lrs = warmup_config.LRS[scale]
  arms = {(c.params["model.norm_position"], c.params["optim.warmup_steps"]) for c in cells}
  assert arms == {("post", w) for w in warmup_config.WARMUPS[scale]} | {("pre", 0)}
  assert len(cells) == len(arms) * len(lrs) and config.sweep.seeds == warmup_config.SEEDS[scale]
  for c in cells:
    r = train.config.resolve(grid_lib.cell_config(config, c, 0))
    assert r.optim.schedule == "warmup_rsqrt" and r.optim.decay_start == max(warmup_config.WARMUPS[scale])
    assert r.train.eval_at_init  # every run gets its outcome class
  if scale == "paper":
    assert all(abs(b / a - 2) < 1e-9 for a, b in zip(lrs, lrs[1:]))  # a factor-2 grid
  if scale == "cpu":  # the fresh-seed confirmation at the η the seeds-0–2 record rescued
    assert lrs == (8e-3,) and config.sweep.first_seed == 3
  if scale != "tiny":
    assert 100 in warmup_config.WARMUPS[scale]  # 2/(1 − β₂) at β₂ = 0.98 (Ma & Yarats 2021)
    assert config.optim.b2 == 0.98 and config.sweep.seeds >= 3
  if scale == "cpu":  # the atlas's cpu model, run HORIZON steps
    m = r.model
    assert (m.num_encoder_layers, m.d_model, m.num_heads, m.d_ff, config.data.vocab_size) == (6, 32, 2, 128, 2000)
    assert (config.train.num_steps, config.train.eval_every) == (3000, 300) == (warmup_config.HORIZON["cpu"], 300)


@pytest.mark.slow
def test_the_study_end_to_end_at_tiny(tmp_path):
  config = warmup_config.get_config("tiny")
  result = run.run_claim(config, str(tmp_path))
  assert result["figures"] == ["warmup.png"] and (tmp_path / "warmup.png").stat().st_size > 10_000
  m = result["measured"]
  assert set(m["arms"]) == {"Post-LN, warmup 0", "Post-LN, warmup 2", "Pre-LN, warmup 0"} and m["steps"] == 10
  records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
  assert len(records) == 6 and all(r["class"] in ("diverged", "collapsed", "undertrained", "trained") for r in records)
  for r in records:  # the measured class and final loss are the sweep record's
    arm = claim.arm_name(r["params"]["model.norm_position"], int(r["params"]["optim.warmup_steps"]))
    (seed,) = m["arms"][arm]["cells"][format(float(r["params"]["optim.learning_rate"]), "g")]
    assert seed["cls"] == r["class"] and seed["curve"][0][0] == 0  # evaluated at init
  assert result["verdict"] in study.VERDICTS and m["unigram_entropy"] > 0
  again = run.decide(config, str(tmp_path), records)
  assert (again["verdict"], again["reason"]) == (result["verdict"], result["reason"])


def test_a_record_of_the_seeds_that_saw_the_rule_written_is_said_as_a_re_reading():
  m = _rescue_at_2e3()
  assert claim.verdict(m).reason.startswith(claim.REREADING)
  for arm in m["arms"].values():
    for runs in arm["cells"].values():
      for r in runs:
        r["seed"] += 3  # fresh seeds 3–5
  v = claim.verdict(m)
  assert v.verdict == study.REPRODUCED and not v.reason.startswith(claim.REREADING)
