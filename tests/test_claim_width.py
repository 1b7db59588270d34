"""Study 12 (experiments/claims/width.py, configs/claims/width.py): the lr-scaled preconditioned sharpness on a toy
whose answer is known, the verdict's rules on hand-made numbers, measure on hand-made run folders, the embedding-lr
key, the design at every scale and the study end to end at tiny."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import curvax
import models
import train.config
from analysis import hessian
from analysis.preconditioner import adam_state_preconditioner_scale, lr_multiplier_scale
from configs.claims import width as width_config
from experiments import grid as grid_lib
from experiments import run, stats, study, sweep_config
from experiments.claims import width as claim
from models.config import ModelConfig

# ------------------------------------------------------------------ the toy: µP flat, SP growing (known answer)

LR, BASE = 1e-2, 1


def _toy(parameterization, n, seed):
  """A 3-layer linear net f(x) = c·x uᵀWv (u: the 1×n input layer, W: n×n hidden, v: the readout), one example,
  MSE, after Adam's first update on the target 3. SP: c = 1, every lr ×1; µP (Tensor Programs V, Table 3, as
  models/parameterization.py: readout multiplier c = 1/r, hidden lr ×1/r, r = n/BASE). Returns the study's number
  η·λ_max(M·P⁻¹H) by its code path (Adam's state → P, lr multipliers → M, analysis.preconditioner's operator, Lanczos)
  and its closed form: H is taken where the residual is 0 (target f(θ₀)), so H = JJᵀ (rank one, no residual
  term) and λ_max(M^½P^-½JJᵀP^-½M^½) = Σ_i m_i J_i²/P_i exactly."""
  a, b, c = jax.random.split(jax.random.key(seed), 3)
  params = {
      "u": jax.random.normal(a, (1, n)),
      "w": jax.random.normal(b, (n, n)) / math.sqrt(n),
      "v": jax.random.normal(c, (n,)) / math.sqrt(n),
  }
  r = n / BASE
  scale = 1 / r if parameterization == "mup" else 1.0
  mult = {"u": 1.0, "w": scale, "v": 1.0}
  f = lambda p: scale * (p["u"] @ p["w"] @ p["v"])[0]
  loss = lambda p, batch: 0.5 * jnp.mean((f(p) - batch["targets"]) ** 2)
  tx = optax.scale_by_adam(b1=0.9, b2=0.98, eps=1e-9)
  _, adam = tx.update(jax.grad(loss)(params, {"targets": jnp.full((1,), 3.0)}), tx.init(params), params)
  p_scale = adam_state_preconditioner_scale(adam.nu, adam.count, 0.98, 1e-9) * lr_multiplier_scale(mult, params)
  op = hessian.hvp_fn(loss, params, [{"targets": jnp.full((1,), f(params))}], weights=[1.0])
  top = curvax.top_eigenvalues(curvax.diagonal_preconditioned(op, p_scale), 1, num_steps=8, key=jax.random.key(0))
  jac = jax.flatten_util.ravel_pytree(jax.grad(f)(params))[0]
  return LR * float(top.values[0]), LR * float(jnp.sum((p_scale * jac) ** 2))


@pytest.mark.slow
def test_the_toy_where_the_answer_is_known_mup_flat_sp_growing():
  """Σ m_i J_i²/|g_i| = Σ m_i |J_i| / |residual|: the ℓ1 norm of M·J. Under SP it grows as n^1.5 (W's n² entries of
  size n^-½); under µP the hidden part shrinks as n^-½ and the readout's stays n/r = BASE: flat as n grows."""
  out = {}
  for p in ("standard", "mup"):
    for n in (64, 256):
      got = [_toy(p, n, s) for s in range(3)]
      for lanczos, closed in got:  # the study's code path equals the closed form
        assert lanczos == pytest.approx(closed, rel=1e-4)
      out[p, n] = np.mean([x for x, _ in got])
  sp, mu = out["standard", 256] / out["standard", 64], out["mup", 256] / out["mup", 64]
  assert 0.8 < mu < 1.1, out  # flat (the n^-½ remainder: 0.9 at these widths)
  assert sp > 4, out  # n^1.5 predicts 8


# --------------------------------------------------------------------------- SP + µP's embedding lr (the key)


def _tiny_model(**kw):
  base = dict(
      preset="tiny", arch="decoder", vocab_size=40, norm_position="pre", tie_embeddings=False, mup_base_width=16
  )
  return ModelConfig.from_config({**base, **kw})


def _multipliers(c):
  """{role: the lr multipliers of its parameters} of the decoder-only model `c`."""
  params = models.get_model(c).init(jax.random.key(0), {"targets": jnp.ones((2, 6), jnp.int32)})["params"]
  roles = jax.tree.leaves(models.param_roles(c, params), is_leaf=lambda x: hasattr(x, "role"))
  out = {}
  for role, m in zip(roles, jax.tree.leaves(models.lr_multipliers(params, c))):
    out.setdefault(role.role, set()).add(float(m))
  return out


@pytest.mark.slow
def test_embedding_lr_scale_width_raises_only_the_embeddings_lr_by_the_width_ratio():
  """Kalra & Barkeshli 2026's arm: SP whose embedding lr is ×d/d_base (here 32/16 = 2), all else ×1; µP's own
  embedding/hidden lr ratio is the same 2 (embedding η, hidden η/2)."""
  arm = _multipliers(_tiny_model(embedding_lr_scale="width"))
  assert arm.pop("embedding") == {2.0} and all(v == {1.0} for v in arm.values()) and "mlp_in" in arm
  mup = _multipliers(_tiny_model(parameterization="mup", scale_embeddings=False))
  assert mup["embedding"] == {1.0} and mup["mlp_in"] == {0.5}
  assert _multipliers(_tiny_model())["embedding"] == {1.0}  # 'auto': SP's own


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(embedding_lr_scale="huge"), r"config.model.embedding_lr_scale='huge' is invalid; valid: \['auto', 'width'\]"),
        (dict(embedding_lr_scale="width", parameterization="mup", scale_embeddings=False), r"contradicts config.model.parameterization='mup'.*valid: parameterization 'standard'"),
        (dict(embedding_lr_scale="width", tie_embeddings=True), "contradicts config.model.tie_embeddings=True.*valid: tie_embeddings=False"),
    ],
)  # fmt: skip
def test_embedding_lr_scale_is_validated_with_the_key_the_value_and_the_choices(kw, match):
  with pytest.raises(ValueError, match=match):
    _tiny_model(**kw)


# ----------------------------------------------------------------------------- the verdict on hand-made numbers

FLAT_MU, GROW_SP = [0.02, -0.05, 0.08], [0.9, 0.6, 1.2]


def _sharp(slope, offset=0.0):
  """Rule (a)'s window medians at widths 32 and 64, two seeds each: log₂ S = slope·log₂(d/32) ± 0.1 + offset."""
  return {str(d): {"seeds": [2 ** (slope * k + offset + e) for e in (-0.1, 0.1)]} for k, d in enumerate((32, 64))}


def _m(mu=FLAT_MU, sp=GROW_SP, diff=(-2.0, -3.0, -1.0), seeds=2, edge=False, crashed=(), sharp=None):
  opt = lambda e: {"log2_lr": -9.0, "lr": 2**-9, "edge": e}
  return {
      "sharpness": sharp or {claim.MU: _sharp(0.2), claim.SP: _sharp(1.0)},
      "crashed": list(crashed),
      "unclassed": [],
      "seeds": seeds,
      "slopes": {claim.MU: list(mu), claim.SP: list(sp), claim.NTK: [0.5, 0.2, 0.8]},
      "transfer_widths": [32, 256],
      "optima": {a: {"32": opt(False), "256": opt(edge and a == claim.SP)} for a in (claim.MU, claim.SP)},
      "shifts": {claim.MU: [-0.3, -0.8, 0.1], claim.SP: [-2.3, -3.0, -1.5], "|µP| − |SP|": list(diff)},
  }


@pytest.mark.parametrize(
    "m, verdict, why",
    [
        (_m(), study.REPRODUCED, "(a) sharpness reproduced"),
        # (a): µP's interval just inside / just outside / straddling ±FLAT; SP's excluding 0 or not
        (_m(mu=[0.05, 0.0, 0.099]), study.REPRODUCED, "µP 0.05 [0, 0.099]"),
        (_m(mu=[0.3, 0.15, 0.45]), study.NOT_REPRODUCED, "µP's interval lies outside ±0.1"),
        (_m(mu=[0.1, 0.05, 0.15]), study.INCONCLUSIVE, "µP's straddles ±0.1"),
        (_m(sp=[0.3, 0.01, 0.6]), study.REPRODUCED, "SP 0.3 [0.01, 0.6]"),
        (_m(sp=[0.3, -0.01, 0.6]), study.INCONCLUSIVE, "SP's includes 0"),
        (_m(sp=[0.02, -0.05, 0.09]), study.NOT_REPRODUCED, "SP's interval lies inside ±0.1"),
        (_m(sp=[-0.5, -0.8, -0.2]), study.REPRODUCED, "SP -0.5"),  # not width-independent, either sign
        # (b): D's interval below 0 / at or above 0 / straddling; an edge; one seed
        (_m(diff=(-0.5, -1.0, -0.01)), study.REPRODUCED, "(b) transfer reproduced"),
        (_m(diff=(0.5, 0.0, 1.0)), study.NOT_REPRODUCED, "(b) transfer not reproduced"),
        (_m(diff=(-0.5, -1.0, 0.01)), study.INCONCLUSIVE, "D's interval straddles 0 [decides it: more seeds"),
        (_m(edge=True), study.INCONCLUSIVE, "edge at ['SP @ width 256'] [decides it: extend the lr grid"),
        (_m(seeds=1), study.INCONCLUSIVE, "1 seed(s) per cell: no interval"),
        # the claim: not reproduced when either part is, even with the other inconclusive
        (_m(mu=[0.3, 0.15, 0.45], diff=(-0.5, -1.0, 0.01)), study.NOT_REPRODUCED, "outside ±0.1"),
        (_m(crashed=["x seed 0: boom"]), study.INCONCLUSIVE, "crashed"),
    ],
)  # fmt: skip
def test_verdict_on_both_sides_of_every_threshold(m, verdict, why):
  v = claim.verdict(json.loads(json.dumps(m)))
  assert v.verdict == verdict, v.reason
  assert why in v.reason, v.reason


def test_an_undecided_rule_a_names_the_seeds_per_width_that_would_decide_it():
  """µP's points: log₂ S = 0.2·k ± 0.1 at two widths, the closed form of tests/test_stats.py (slope 0.2, s² = 0.02,
  0.1 from +FLAT): 17 seeds per width. SP's undecided reading is against 0 as well as ±FLAT: at slope −0.04 the
  reading is decided by clearing 0 or by lying inside ±0.1, whichever needs fewer seeds: at slope −0.04 the second
  (0.06 from −0.1, against 0.04 from 0)."""
  v = claim.verdict(json.loads(json.dumps(_m(mu=[0.1, 0.05, 0.15]))))
  assert "[decides it: more seeds per width at the reference lr, were the slope and its scatter to hold: µP: at least ≈ 17 per width (now 2)]" in v.reason, v.reason  # fmt: skip
  sharp = {claim.MU: _sharp(0.0), claim.SP: _sharp(-0.04)}
  v = claim.verdict(json.loads(json.dumps(_m(sp=[0.3, -0.01, 0.6], sharp=sharp))))
  x, y = [5, 5, 6, 6], [-0.1, 0.1, -0.14, 0.06]
  inside, excluding_0 = stats.repeats_to_decide(x, y, (-0.1, 0.1)), stats.repeats_to_decide(x, y, (0.0,))
  assert inside < excluding_0  # either decides SP's reading: lying inside ±0.1 is the nearer here
  assert f"SP: at least ≈ {inside} per width (now 2)]" in v.reason and "µP: at least" not in v.reason, v.reason


def test_a_straddling_shift_difference_names_the_seeds_per_cell_that_would_decide_it():
  """D = −0.5 [−1, 0.01] over 2 seeds is a Student-t interval with s = 0.51·√2/t₁ = 0.0568; t₂·s/√3 = 0.141 < 0.5,
  so 3 seeds would exclude 0."""
  v = claim.verdict(json.loads(json.dumps(_m(diff=(-0.5, -1.0, 0.01)))))
  assert (
      "[decides it: more seeds: ≈ 3 seeds per cell, were D's mean and its seeds' spread to hold (now 2;" in v.reason
  ), v.reason


# ----------------------------------------------------------------------------- measure on hand-made run folders


def _fake_sweep(tmp_path, seeds=2, arms=((claim.MU, 0.0, 0.0), (claim.SP, 1.0, -1.0)), ref_seeds=None):
  """Runs whose sharpness is S = c·d^slope (µP 0, SP 1) and whose loss is (log2 lr − log2 η*(d))² + 3, η* moving
  by 0 (µP) or −1 per width doubling (SP); seeds differ by ±1% of S. `arms`: (label, slope, move); `ref_seeds`:
  the seeds of the reference lr 2^−9 (default `seeds`)."""
  records, lrs = [], [2.0**k for k in range(-12, -5)]
  for arm, slope, move in arms:
    for d in (32, 64, 256):
      for lr in lrs if d != 64 else [2.0**-9]:
        for seed in range(ref_seeds if ref_seeds and lr == 2.0**-9 else seeds):
          folder = tmp_path / "cells" / f"{arm}{d}{lr}" / f"seed_{seed}"
          folder.mkdir(parents=True)
          s = 0.5 * (d / 32) ** slope * (1 + 0.01 * (seed - 0.5))
          lines = [
              {"split": "train", "step": t, "loss": 5.0, claim.METRIC: s * (1 + (t == 10))} for t in (10, 40, 70, 100)
          ]
          (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
          opt = -9 + move * math.log2(d / 32)
          loss = (math.log2(lr) - opt) ** 2 / 4 + 3 + 0.01 * seed
          records.append(dict(cell=f"{arm}{d}{lr}", arm=f"{arm} @ width {d}", seed=seed, outcome="finished",
                              params={"model.d_model": d, "optim.learning_rate": lr}, workdir=str(folder),
                              final={"eval/loss": loss if loss < 6 else None},
                              **{"class": "trained" if loss < 6 else "diverged"}))  # fmt: skip
  config = width_config.get_config("tiny")
  config.train.num_steps = 100
  return study.Results(str(tmp_path), records, config)


def test_measure_reads_the_sharpness_window_the_optima_and_the_shifts(tmp_path):
  m = claim.measure(_fake_sweep(tmp_path))
  assert m["ref_lr"] == 2.0**-9 and m["seeds"] == 2 and m["transfer_widths"] == [32, 256]
  sp = m["sharpness"][claim.SP]
  assert sp["256"]["mean"] == pytest.approx(4.0) and sp["32"]["max"] == pytest.approx(1.0)  # window excludes step 10
  assert m["slopes"][claim.MU][0] == pytest.approx(0.0, abs=1e-9) and m["slopes"][claim.SP][0] == pytest.approx(1.0)
  assert m["optima"][claim.SP]["256"]["log2_lr"] == pytest.approx(-12.0) and m["optima"][claim.SP]["256"]["edge"]
  assert m["optima"][claim.MU]["256"]["log2_lr"] == pytest.approx(-9.0)
  assert m["shifts"][claim.MU][0] == pytest.approx(0.0) and m["shifts"]["|µP| − |SP|"][0] == pytest.approx(-3.0)
  v = claim.verdict(m)
  assert v.verdict == study.INCONCLUSIVE and "(a) sharpness reproduced" in v.reason and "edge" in v.reason
  summary = claim.summary(json.loads(json.dumps(m)))  # as claim.json holds it: the lrs as strings
  assert summary["slope SP"].startswith("1 [")
  # µP's loss at 2^−9: 3 + 0.01·seed over seeds 0, 1 (mean 3.005, std 0.01/√2); SP's lowest lr at d 256 (its edge)
  assert summary["best loss µP @ width 32"] == "3 ± 0.0071 at η 0.00195312"
  assert summary["best loss SP @ width 256"] == "3 ± 0.0071 at η 0.000244141"


def test_rule_b_reads_the_seeds_every_lr_ran_when_the_reference_lr_runs_more(tmp_path):
  """Seeds 2–4 at the reference lr alone (rule (a)'s) join its slope, not the optima: each of them has one lr, an
  'optimum' at its grid's edge and a shift of 0 that would pull D towards 0."""
  m = claim.measure(_fake_sweep(tmp_path, ref_seeds=5))
  assert m["seeds"] == 2 and m["transfer_seeds"] == [0, 1]
  assert [len(r["seeds"]) for r in m["sharpness"][claim.MU].values()] == [5, 5, 5]
  assert m["shifts"]["|µP| − |SP|"][0] == pytest.approx(-3.0) and m["shifts"][claim.MU][0] == pytest.approx(0.0)
  assert m["optima"][claim.MU]["32"]["log2_lr"] == pytest.approx(-9.0)
  summary = claim.summary(json.loads(json.dumps(m)))  # the best loss over the same seeds 0, 1
  assert summary["best loss µP @ width 32"] == "3 ± 0.0071 at η 0.00195312"


# ------------------------------------------------------------------------------------------ the design, end to end


@pytest.mark.parametrize("scale", ("tiny", "cpu", "paper"))
def test_the_design_at_every_scale(scale):
  config = width_config.get_config(scale)
  config.data.dir = "/the/user/s/multi30k"
  cells = grid_lib.cells(config)
  arms = {}
  for c in cells:
    arm, d = claim.parse_arm(c.arm)
    arms.setdefault(arm, {}).setdefault(d, set()).add(c.params["optim.learning_rate"])
    r = train.config.resolve(grid_lib.cell_config(config, c, 0))
    assert r.model.d_ff == 4 * d and r.model.num_heads == width_config.HEADS[scale] and r.model.norm_position == "pre"
    assert r.train.eval_at_init and r.train.curvature_every > 0 and r.analysis.preconditioned_top_k == 1
    assert r.model.parameterization == {"µP": "mup", "NTK": "ntk"}.get(arm, "standard")
    assert (r.model.embedding_lr_scale == "width") == (arm == claim.EMB) and not r.model.tie_embeddings
  assert set(arms) == set(claim.ARMS)
  ref = width_config.REF_LR[scale]
  for arm in claim.ARMS:
    assert all(ref in lrs for lrs in arms[arm].values())
  lrs = width_config.LRS[scale]
  if scale != "tiny":  # tiny: two lrs 20× apart (a failure to draw)
    assert all(b / a == pytest.approx(2) for a, b in zip(lrs, lrs[1:]))  # a factor-2 grid
  t = width_config.TRANSFER_WIDTHS[scale]
  for arm in width_config.TRANSFER_ARMS[scale]:
    assert all(arms[arm][d] == set(lrs) for d in t)
  sweep = sweep_config.SweepConfig.from_config(config.sweep)
  for c in cells:  # the verdict arms' own seeds (rule (a) at the reference lr, rule (b) over the grid)
    arm, lr = claim.parse_arm(c.arm)[0], c.params["optim.learning_rate"]
    want = width_config.SEEDS[scale]
    if arm in width_config.VERDICT_ARMS:
      want = width_config.SHARPNESS_SEEDS[scale] if lr == ref else width_config.TRANSFER_SEEDS[scale]
    assert len(grid_lib.cell_seeds(c, sweep)) == want, (c.arm, lr)
  if scale != "tiny":
    assert max(arms[claim.MU]) / min(arms[claim.MU]) >= 16 and max(t) / min(t) >= 8 and config.sweep.seeds >= 2
    assert max(arms[claim.SP]) / min(arms[claim.SP]) >= 16 and 100 <= config.train.num_steps <= 2000


@pytest.mark.slow
def test_the_study_end_to_end_at_tiny(tmp_path):
  """Two arms × two widths at one lr (the tiny grid cut to 4 runs: the whole tiny grid is 12 runs, minutes here)."""
  config = width_config.get_config("tiny")
  config.sweep.products = tuple(
      tuple((k, (0.001,) if k == "optim.learning_rate" else v) for k, v in p)
      for p in width_config.products("tiny")
      if dict(p)["arm"].startswith(("SP @", "µP @"))
  )
  result = run.run_claim(config, str(tmp_path))
  m = result["measured"]
  assert set(m["runs"]) == {claim.SP, claim.MU} and m["ref_lr"] == 1e-3
  for arm in (claim.SP, claim.MU):
    for d in ("16", "32"):
      (r,) = m["runs"][arm][d]["0.001"]
      assert r["cls"] in ("diverged", "collapsed", "undertrained", "trained")
      assert [s for s, _ in r["curve"]] == [2, 4, 6, 8] and all(v > 0 for _, v in r["curve"])
  assert result["verdict"] == study.INCONCLUSIVE  # one seed, two widths: no interval
  assert result["figures"] == ["width.png"] and (tmp_path / "width.png").stat().st_size > 10_000


def test_extensions_step_past_an_edge_optimum_and_the_grid_takes_them(tmp_path):
  # SP's optimum moves a grid step down per width doubling: at d = 256 it is the grid's lowest lr, 2^-12
  assert claim.extensions(_fake_sweep(tmp_path / "down")) == {"SP @ width 256": {"optim.learning_rate": [2.0**-13]}}
  up = _fake_sweep(tmp_path / "up", arms=((claim.MU, 0.0, 0.0), (claim.SP, 1.0, 1.0)))  # to 2^-6, the highest
  assert claim.extensions(up) == {"SP @ width 256": {"optim.learning_rate": [2.0**-5]}}
  flat = _fake_sweep(tmp_path / "flat", arms=((claim.MU, 0.0, 0.0), (claim.SP, 1.0, 0.0)))
  assert claim.extensions(flat) == {}  # every optimum inside its grid: the grid is complete
  assert claim.CLAIM.extend is claim.extensions and claim.CLAIM.max_rounds == claim.MAX_ROUNDS >= 1
  config = width_config.get_config("cpu")  # the next round is one more product of the labelled (arm, width)
  written = grid_lib.format_grid(grid_lib.sweep_products(config))
  grid = grid_lib.extend_grid(written, config, {"SP @ width 32": {"optim.learning_rate": [0.016]}})
  added = grid.split(" | ")[len(written.split(" | ")) :]
  assert len(added) == 1 and added[0].startswith("SP @ width 32: ")
  assert added[0].endswith(f"optim.learning_rate=0.016;seeds={width_config.TRANSFER_SEEDS['cpu']}")  # rule (b)'s
