"""Study 13 (experiments/claims/depth.py, configs/claims/depth.py): the verdict on both sides of every threshold on
hand-made numbers, measure on hand-made run folders, the design at every scale (the branch and lr multipliers the
grid's keys give each arm, and the model they build), and the study end to end at tiny."""

import dataclasses
import json
import math

import jax
import numpy as np
import pytest

import models
import train.config
from configs.claims import depth as depth_config
from experiments import grid as grid_lib
from experiments import run, study
from experiments.claims import depth as claim
from experiments.claims.shared import transfer
from models import parameterization, residual
from models.roles import ParamRole
from tests import tiny

SP, CP, DMU = claim.SP, claim.CP, claim.DMU

# ----------------------------------------------------------------------------- the verdict on hand-made numbers


def _m(diff=(-0.3, -0.4, -0.2), sp=(0.3, 0.2, 0.4), seeds=2, no_loss=(), base_lr=0.01, crashed=(), unclassed=()):
  """Measured numbers at ends 2 and 16: `diff` D_loss's interval, `sp` SP's Δ (the control), `no_loss` runs at η_b
  without a final loss ('<arm> @ depth <L> seed <s>')."""
  arm = lambda a, delta: {
      "delta": list(delta),
      "per_seed": {"0": delta[0], "1": delta[0]},
      "loss": [3.7, 3.7 + delta[0]],
      "regret": 0.01,
      "no_loss": [x for x in no_loss if x.startswith(f"{a} @")],
  }
  return {
      "crashed": list(crashed),
      "unclassed": list(unclassed),
      "seeds": seeds,
      "depths": [2, 4, 8, 16],
      "ends": [2, 16],
      "optima": {a: {str(L): {"log2_lr": -6.0, "lr": 2**-6, "edge": False} for L in (2, 16)} for a in claim.ARMS},
      "shifts": {SP: [-2.5, -3.0, -2.0], CP: [-0.2, -0.6, 0.3], claim.D: [-2.0, -3.0, -1.0]},
      "at_base": {
          "lr": base_lr,
          "arms": {SP: arm(SP, sp), CP: arm(CP, (sp[0] + diff[0], 0.0, 0.0)), DMU: arm(DMU, (0.0, -0.1, 0.1))},
          "diff": list(diff),
          "paired_seeds": seeds,
      },
  }


@pytest.mark.parametrize(
    "m, verdict, why",
    [
        (_m(), study.REPRODUCED, "D_loss = Δ_CompleteP − Δ_SP -0.3 [-0.4, -0.2] over 2 seeds (rule: below 0"),
        (_m(), study.REPRODUCED, "SP 3.700 → 4.000, Δ 0.3 [0.2, 0.4]; CompleteP 3.700 → 3.700"),
        (_m(), study.REPRODUCED, "the optimum's shift in log₂ lr SP -2.5 [-3, -2] (the shift's positive control)"),
        # D_loss's interval just below / at / above / straddling 0
        (_m(diff=(-0.1, -0.2, -0.001)), study.REPRODUCED, "regret at depth 16 SP 0.010, CompleteP 0.010"),
        (_m(diff=(0.1, 0.0, 0.2)), study.NOT_REPRODUCED, "D_loss = Δ_CompleteP − Δ_SP 0.1 [0, 0.2]"),
        (_m(diff=(0.5, 0.3, 0.7), sp=(0.0, -0.1, 0.1)), study.NOT_REPRODUCED, "Δ_SP 0.5 [0.3, 0.7]"),
        (_m(diff=(-0.1, -0.3, 0.01)), study.INCONCLUSIVE, "D_loss's interval straddles 0 [decides it: more seeds"),
        # the control: SP's Δ above 0 (just above, at 0, straddling)
        (_m(sp=(0.1, 0.001, 0.2)), study.REPRODUCED, "rule: below 0"),
        (_m(sp=(0.1, 0.0, 0.2)), study.INCONCLUSIVE, "the control fails (SP's Δ interval is not above 0"),
        (_m(sp=(0.1, -0.05, 0.25)), study.INCONCLUSIVE, "[decides it: deeper stacks or longer runs"),
        # runs at η_b without a loss (CompleteP's or SP's decide; Depth-µP's do not); no base lr
        (_m(no_loss=("SP @ depth 16 seed 1",)), study.INCONCLUSIVE, "without a final loss: ['SP @ depth 16 seed 1']"),
        (_m(no_loss=("Depth-µP @ depth 16 seed 1",)), study.REPRODUCED, "rule: below 0"),
        (_m(base_lr=None), study.INCONCLUSIVE, "no lr trained at SP's depth 2"),
        # one seed; fewer than two depths
        (_m(seeds=1), study.INCONCLUSIVE, "1 seed(s) per cell: no interval [decides it: ≥ 2 seeds]"),
        ({**_m(), "ends": [], "depths": [2]}, study.INCONCLUSIVE, "depths every arm ran: [2], not two"),
        ({**_m(), "at_base": {**_m()["at_base"], "diff": None}}, study.INCONCLUSIVE, "fewer than 2 paired seeds"),
        # runs that crashed or have no outcome class
        (_m(crashed=["x seed 0: boom"]), study.INCONCLUSIVE, "1 run(s) crashed"),
        (_m(unclassed=["SP @ depth 2 η 0.01"]), study.INCONCLUSIVE, "without an outcome class"),
    ],
)  # fmt: skip
def test_verdict_on_both_sides_of_every_threshold(m, verdict, why):
  v = claim.verdict(json.loads(json.dumps(m)))
  assert v.verdict == verdict, v.reason
  assert why in v.reason, v.reason
  assert not v.reason.startswith("A re-reading")  # no runs: no seeds seen before the rule


@pytest.mark.parametrize("first, rereading", [(0, True), (claim.FRESH_SEEDS_FROM, False)])
def test_a_record_of_the_seeds_seen_before_the_rule_is_said_as_a_re_reading(first, rereading):
  runs = {SP: {"2": {"0.01": [{"seed": first + s} for s in range(2)]}}}
  v = claim.verdict(json.loads(json.dumps({**_m(), "runs": runs, "steps": 200})))
  assert v.verdict == study.REPRODUCED and v.reason.startswith(claim.REREADING) == rereading, v.reason
  assert not claim.verdict({**_m(), "runs": runs, "steps": 8}).reason.startswith("A re-reading")  # tiny: no record


# ----------------------------------------------------------------------------- measure on hand-made run folders

MOVES = {SP: -1.0, CP: 0.0, DMU: -0.5}  # log₂ η* per doubling of depth: SP falls, CompleteP stays
SLOPES = {SP: 1.0, CP: 0.5, DMU: 0.0}  # log₂ S per doubling of depth at the reference lr
REF = 2.0**-6


def _fake_sweep(tmp_path, seeds=2):
  """Runs whose loss is (log2 lr − log2 η*(L))²/4 + 3 + 0.01·seed, η*(2) = 2^−6 and moving by MOVES per depth
  doubling; a loss ≥ 6 diverged (no final loss); Depth-µP at the end depths only (as at cpu). The runs at `REF`
  carry curvature records at steps 2, 4, 6, 8 of the tiny config's 8: S = 10·(L/2)^SLOPES·(1 ± 1%) inside the window
  (steps 8/3 … 8), 100× that at step 2 (outside it), each record 5 Lanczos steps."""
  records, lrs = [], [2.0**k for k in range(-12, -2)]
  for arm, move in MOVES.items():
    for depth in (2, 16) if arm == DMU else (2, 4, 8, 16):
      for lr in lrs:
        for seed in range(seeds):
          folder = tmp_path / "cells" / f"{arm}{depth}{lr}" / f"seed_{seed}"
          folder.mkdir(parents=True)
          if lr == REF:
            s = 10 * (depth / 2) ** SLOPES[arm] * (1 + 0.01 * (seed - 0.5))
            lines = [{"split": "train", "step": t, transfer.SHARPNESS: s * (100 if t == 2 else 1), transfer.LANCZOS: 5}
                     for t in (2, 4, 6, 8)]  # fmt: skip
            (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
          loss = (math.log2(lr) - (-6 + move * math.log2(depth / 2))) ** 2 / 4 + 3 + 0.01 * seed
          records.append(dict(cell=f"{arm}{depth}{lr}", arm=f"{arm} @ depth {depth}", seed=seed, outcome="finished",
                              params={"model.num_encoder_layers": depth, "optim.learning_rate": lr},
                              workdir=str(folder), final={"eval/loss": loss if loss < 6 else None},
                              **{"class": "trained" if loss < 6 else "diverged"}))  # fmt: skip
  return study.Results(str(tmp_path), records, depth_config.get_config("tiny"))


def test_measure_reads_the_optima_and_the_shifts_between_the_end_depths(tmp_path):
  m = claim.measure(_fake_sweep(tmp_path))
  assert m["seeds"] == 2 and m["depths"] == [2, 4, 8, 16] and m["ends"] == [2, 16] and not m["crashed"]
  assert m["optima"][SP]["16"] == {"log2_lr": pytest.approx(-9.0), "lr": pytest.approx(2**-9), "edge": False}
  assert m["optima"][SP]["4"]["log2_lr"] == pytest.approx(-7.0) and set(m["optima"][DMU]) == {"2", "16"}
  assert m["optima"][CP]["16"]["log2_lr"] == pytest.approx(-6.0)
  assert m["shifts"][SP] == pytest.approx([-3.0] * 3) and m["shifts"][CP] == pytest.approx([0.0] * 3)
  assert m["shifts"][claim.D] == pytest.approx([-3.0] * 3) and m["shifts"]["|Depth-µP| − |SP|"][0] == pytest.approx(-1.5)  # fmt: skip
  assert m["runs"][SP]["16"]["0.00390625"][1]["final_loss"] == pytest.approx(3.26)  # 2^-8: (−8 + 9)²/4 + 3 + 0.01
  run = m["runs"][SP]["16"]["0.125"][0]  # (−3 + 9)²/4 + 3
  assert (run["seed"], run["cls"], run["final_loss"], run["curve"]) == (0, "diverged", None, [])
  # the sharpness at the reference lr: the window's records only, a slope per arm on log₂ L
  assert m["ref_lr"] == [REF] and m["sharpness"][SP]["16"]["mean"] == pytest.approx(80.0)
  for arm, slope in SLOPES.items():
    assert m["slopes"][arm][0] == pytest.approx(slope, abs=1e-9) and m["slopes"][arm][1] < slope < m["slopes"][arm][2]
  assert m["lanczos_steps"] == {"records": 4 * 10 * 2, "median": 5.0, "max": 5}  # every record, 10 (arm, depth)
  # the loss at the base-tuned lr η_b = 2^−6 (depth 2's best): SP's optimum moved 3 steps, (3)²/4 = 2.25 worse at 16
  base = m["at_base"]
  assert base["lr"] == pytest.approx(REF) and base["paired_seeds"] == 2
  assert base["arms"][SP]["delta"] == pytest.approx([2.25] * 3) and base["arms"][CP]["delta"] == pytest.approx([0] * 3)
  assert base["arms"][SP]["loss"] == pytest.approx([3.005, 5.255]) and base["diff"] == pytest.approx([-2.25] * 3)
  assert base["arms"][SP]["regret"] == pytest.approx(2.25) and base["arms"][CP]["regret"] == pytest.approx(0)
  assert base["arms"][DMU]["delta"][0] == pytest.approx(0.5625) and not base["arms"][SP]["no_loss"]  # (−6 + 7.5)²/4
  v = claim.verdict(m)
  assert v.verdict == study.REPRODUCED and "D_loss = Δ_CompleteP − Δ_SP -2.25 [-2.25, -2.25]" in v.reason, v.reason
  assert claim.summary(m)["shift |CompleteP| − |SP|"] == "-3 [-3, -3]"
  assert claim.summary(m)["D_loss = Δ_CompleteP − Δ_SP"] == "-2.25 [-2.25, -2.25]"
  # a record from before the rule (no `at_base`): read from its own runs, the same numbers
  old = json.loads(json.dumps({k: v for k, v in m.items() if k != "at_base"}))
  assert claim.with_at_base(old)["at_base"] == json.loads(json.dumps(base))
  assert claim.verdict(old) == v


def test_the_sharpness_is_read_at_one_lr_and_a_reference_run_without_records_is_named(tmp_path):
  results = _fake_sweep(tmp_path)
  (tmp_path / "cells" / f"{SP}16{REF}" / "seed_1" / "metrics.jsonl").write_text("")  # diverged before a record
  m = claim.measure(results)
  assert m["sharpness_missing"] == ["SP @ depth 16 seed 1"] and m["sharpness"][SP]["16"]["seeds"][1] is None
  assert claim.summary(m)["sharpness: reference-lr runs without a window median"] == "SP @ depth 16 seed 1"
  other = tmp_path / "cells" / f"{CP}2{2 * REF}" / "seed_0" / "metrics.jsonl"  # curvature records at a second lr
  other.write_text(json.dumps({"split": "train", "step": 8, transfer.SHARPNESS: 1.0}) + "\n")
  with pytest.raises(ValueError, match="sharpness at one lr; curvature records were found at lrs"):
    claim.measure(results)


def test_measure_names_crashed_and_unclassed_runs(tmp_path):
  results = _fake_sweep(tmp_path)
  crashed = dict(results.runs[0].record, outcome="crashed", error="boom", final={}, **{"class": None})
  unclassed = dict(results.runs[1].record, **{"class": None})
  records = [crashed, unclassed] + [r.record for r in results.runs[2:]]
  m = claim.measure(study.Results(str(tmp_path), records, results.config))
  assert m["crashed"] == [f"{crashed['cell']} seed 0: boom"] and m["unclassed"] == ["SP @ depth 2 η 0.000244141"]
  assert claim.verdict(m).verdict == study.INCONCLUSIVE and claim.summary(m) == {}


# ------------------------------------------------------------------------------------------ the design, end to end


def _closed_form(arm: str, depth: int, base: int) -> tuple[float, float]:
  """(branch multiplier, in-layer lr multiplier) of `arm` at `depth`: 1 and 1 for SP; (L/L_base)^{−α} and
  (L/L_base)^{α−1} for CompleteP (α = 1) and Depth-µP (α = 1/2) (Dey et al. 2025, Table 1)."""
  alpha = {CP: 1.0, DMU: 0.5}.get(arm)
  return (1.0, 1.0) if alpha is None else ((depth / base) ** -alpha, (depth / base) ** (alpha - 1))


@pytest.mark.parametrize("scale", ("tiny", "cpu", "paper"))
def test_the_design_at_every_scale(scale):
  config = depth_config.get_config(scale)
  config.data.dir = "/the/user/s/multi30k"
  base = min(depth_config.DEPTHS[scale])
  arms: dict[str, dict] = {}
  for c in grid_lib.cells(config):
    arm, depth = transfer.parse_label(c.arm, "depth")
    arms.setdefault(arm, {}).setdefault(depth, set()).add(c.params["optim.learning_rate"])
    r = train.config.resolve(grid_lib.cell_config(config, c, 0))
    mc = r.model
    assert mc.num_encoder_layers == mc.num_decoder_layers == depth and mc.depth_base == base
    assert mc.norm_position == "pre" and mc.parameterization == "standard" and r.init.scheme == "xavier"
    ref = c.params["optim.learning_rate"] == depth_config.REF_LR[scale]  # the sharpness cells record curvature
    assert r.train.curvature_every == (depth_config.CURVATURE_EVERY[scale] if ref else 0)
    assert r.train.eval_at_init and r.optim.warmup_steps == depth_config.WARMUP[scale]
    assert mc.residual == ("plain" if arm == SP else "completep")
    for stack in ("encoder", "decoder"):  # the multipliers these keys give the model (closed forms)
      branch = residual.depth_multiplier(mc, stack) if mc.residual == "completep" else 1.0
      lr = parameterization.lr_multiplier(ParamRole("mlp_in", stack, depth - 1, "mlp", 1, 1, ""), mc)
      assert (branch, lr) == pytest.approx(_closed_form(arm, depth, base))
  lrs = depth_config.LRS[scale]
  for arm, per in arms.items():
    assert tuple(per) == depth_config.arm_depths(arm, scale) and all(v == set(lrs) for v in per.values())
  assert tuple(arms[SP]) == tuple(arms[CP]) == depth_config.DEPTHS[scale]  # the verdict's arms at every depth
  assert tuple(arms) == depth_config.SCALE_ARMS[scale]
  if scale != "tiny":  # tiny: two lrs 20× apart, 1 → 2 layers (a failure to draw)
    assert all(b / a == pytest.approx(2) for a, b in zip(lrs, lrs[1:]))  # a factor-2 grid
    assert max(arms[SP]) / min(arms[SP]) >= 8 and config.sweep.seeds >= 2 and 100 <= config.train.num_steps
    assert max(lrs) / min(lrs) >= 64
  if scale == "cpu":  # the atlas's shallow optimum ~1e-2..2e-2 with 2 steps above and 3 below (module docstring)
    assert max(lrs) >= 4 * 2e-2 and min(lrs) <= 1e-2 / 8
    # fresh seeds (the rule was stated after seeds 0–3 were seen), SP's positive control at 2 vs 32 layers
    assert config.sweep.first_seed == claim.FRESH_SEEDS_FROM and depth_config.DEPTHS[scale] == (2, 32)


@pytest.mark.slow
def test_the_grid_keys_build_the_intended_model_at_tiny():
  """Each arm's cell at 2 layers per stack (L_base 1) built from the config the grid writes: every sublayer's
  residual update x_out − x_in is (branch multiplier)·F, 1 for SP, 1/2 for CompleteP, 1/√2 for Depth-µP; every
  parameter inside a layer has lr multiplier 1, 1, 1/√2; the embeddings 1."""
  config = depth_config.get_config("tiny")
  for c in grid_lib.cells(config):
    arm, depth = transfer.parse_label(c.arm, "depth")
    if depth != 2 or c.params["optim.learning_rate"] != 1e-3:
      continue
    mc = dataclasses.replace(train.config.resolve(grid_lib.cell_config(config, c, 0)).model, vocab_size=tiny.VOCAB)
    factor, lr = _closed_form(arm, 2, 1)
    model = models.get_model(mc)
    variables = model.init(jax.random.key(0), tiny.batch())
    _, state = model.apply(variables, tiny.batch(), mutable=["intermediates"])
    for stack in ("encoder", "decoder"):
      for i in range(2):
        inter = state["intermediates"][stack][f"layer_{i}"]
        for sub in ("self_attn", "mlp"):
          delta = inter[f"{sub}_residual_out"][0] - inter[f"{sub}_residual_in"][0]
          np.testing.assert_allclose(delta, factor * inter[f"{sub}_branch"][0], rtol=1e-5, atol=1e-6)
    mult = models.lr_multipliers(variables["params"], mc)
    for stack in ("encoder", "decoder"):
      layer = jax.tree.leaves(mult[stack]["layer_1"])
      assert len(layer) > 4 and all(m == pytest.approx(lr) for m in layer), arm
    outside = [m for k, v in mult.items() if k not in ("encoder", "decoder") for m in jax.tree.leaves(v)]
    assert outside and all(m == 1.0 for m in outside)


@pytest.mark.slow
def test_the_study_end_to_end_at_tiny(tmp_path):
  """SP and CompleteP × 1 and 2 layers at one lr (the tiny grid cut to 4 runs: the whole tiny grid is 12 runs, about
  a minute here). At L_base = 1 the two arms are one model: the same final loss to the bit."""
  config = depth_config.get_config("tiny")
  arms = ("SP @", "CompleteP @")
  config.sweep.products = tuple(p for p in depth_config.products("tiny") if dict(p)["arm"].startswith(arms))
  result = run.run_claim(config, str(tmp_path))
  m = result["measured"]
  assert list(m["runs"]) == [SP, CP] and m["depths"] == [1, 2] and m["ends"] == [1, 2]
  for arm in (SP, CP):
    for depth in ("1", "2"):
      (r,) = m["runs"][arm][depth]["0.001"]
      assert r["cls"] in ("diverged", "collapsed", "undertrained", "trained") and r["final_loss"] > 0
  assert m["runs"][SP]["1"]["0.001"][0]["final_loss"] == m["runs"][CP]["1"]["0.001"][0]["final_loss"]
  assert m["runs"][SP]["2"]["0.001"][0]["final_loss"] != m["runs"][CP]["2"]["0.001"][0]["final_loss"]
  assert result["verdict"] == study.INCONCLUSIVE  # one seed: no interval
  assert result["settings"].startswith("d=32, pre-norm") and "layers" not in result["settings"]
  assert result["figures"] == ["depth.png"] and (tmp_path / "depth.png").stat().st_size > 10_000
