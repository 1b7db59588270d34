"""Claim 6 (Xiong et al. 2020, Fig. 2): Post-LN without warmup trains worse or diverges where Post-LN with warmup and
Pre-LN without warmup train.

The argument (Xiong et al. 2020 §3; docs/science.md §8): at init the gradients of Post-LN's last layers are large
(they do not shrink with depth as Pre-LN's do), so Adam's first full-size steps at the peak learning rate throw the
model onto a plateau or to non-finite values; a warmup keeps those steps small, and Pre-LN does not need it.

Measured (configs/claims/warmup.py; experiments/claims/training.py): three arms trained alike, same seeds and data order
— Post-LN with a linear warmup of T_w steps, Post-LN without warmup, Pre-LN without warmup — each summarized by its
mean final validation loss over seeds; an arm *fails* when any seed diverges (non-finite loss or gradient).

Thresholds (stated before any run; the earlier reproduction's, analysis/reproduce/training_claims.py
(retired; git commit 35e9f30)):
  δ = 0.1 nats, the smallest gap of mean final validation losses read as a difference.
  REPRODUCED      both references (Post-LN with warmup, Pre-LN without) train (no seed fails) and Post-LN without
                  warmup fails or ends ≥ δ above the worse of them;
  NOT_REPRODUCED  both references train and Post-LN without warmup ends less than δ above the worse of them;
  INCONCLUSIVE    a reference fails (the comparison has no baseline), or a run crashed (no measurement).
"""

from experiments.claims import base, training
from experiments.claims.training import DELTA, Variant, fails, loss_text

VARIANTS = {
    "postln_warmup": Variant(
        "Post-LN, warmup", {"model.norm_position": "post", "optim.warmup_steps": lambda t: t is not None and t > 0}
    ),
    "postln_nowarmup": Variant("Post-LN, no warmup", {"model.norm_position": "post", "optim.warmup_steps": 0}),
    "preln_nowarmup": Variant("Pre-LN, no warmup", {"model.norm_position": "pre", "optim.warmup_steps": 0}),
}
THRESHOLDS = {
    "δ": f"{DELTA} nats: the smallest gap of mean final validation losses read as a difference",
    "reproduced": "Post-LN with warmup and Pre-LN without warmup train (no seed diverges) and Post-LN without warmup "
    "diverges (any seed) or ends ≥ δ above the worse of the two",
    "not reproduced": "both references train and Post-LN without warmup ends < δ above the worse of them",
    "inconclusive": "a reference diverges, or a run crashed",
}


def numbers(arms: dict) -> dict:
  """The verdict's numbers from the arms' summaries: T_w, the worse reference's loss, Post-LN no warmup's gap to it."""
  refs = [arms[k] for k in ("postln_warmup", "preln_nowarmup")]
  reference = None if any(map(fails, refs)) else max(r["mean_final_loss"] for r in refs)
  bad = arms["postln_nowarmup"]
  return dict(
      warmup_steps=arms["postln_warmup"]["params"].get("optim.warmup_steps"),
      reference_loss=reference,
      gap=None if fails(bad) or reference is None else bad["mean_final_loss"] - reference,
  )


def measure(results: base.Results) -> dict:
  out = training.measure_variants(results, VARIANTS)
  return {**out, **numbers(out["variants"])}


def verdict(m: dict) -> base.Verdict:
  crashed = base.crashed_verdict(m)
  if crashed:
    return crashed
  arms = m["variants"]
  n = numbers(arms)
  reason = (
      f"final validation loss: Post-LN no warmup {loss_text(arms['postln_nowarmup'])}, Post-LN warmup "
      f"({n['warmup_steps']} steps) {loss_text(arms['postln_warmup'])}, Pre-LN no warmup "
      f"{loss_text(arms['preln_nowarmup'])}"
  )
  failed_refs = [VARIANTS[k].label for k in ("postln_warmup", "preln_nowarmup") if fails(arms[k])]
  if failed_refs:
    return base.Verdict(base.INCONCLUSIVE, reason + f"; the reference(s) {failed_refs} failed to train")
  if fails(arms["postln_nowarmup"]):
    return base.Verdict(base.REPRODUCED, reason + "; Post-LN without warmup diverged")
  gap = f"Post-LN without warmup − the worse reference = {n['gap']:+.3f} nats (δ = {DELTA})"
  if n["gap"] >= DELTA:
    return base.Verdict(base.REPRODUCED, reason + f"; {gap}")
  return base.Verdict(
      base.NOT_REPRODUCED,
      reason + f"; {gap}: Post-LN without warmup neither diverged nor ended δ worse at this scale (the paper's gap is "
      "at d = 512 and ~100k steps)",
  )


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  headline = (
      f"Claim 6 (Xiong et al. 2020, Fig. 2): Post-LN with a linear warmup of {m['warmup_steps']} steps vs Post-LN "
      "and Pre-LN without warmup (constant lr)"
  )
  ref = m["reference_loss"]
  lines = [
      (None if ref is None else ref + DELTA, r"worse reference $+\,\delta$: reproduced if Post-LN no warmup ends above")
  ]
  return [
      training.plot_curves(m, VARIANTS, out_dir, "warmup_curves.png", headline, settings),
      training.plot_finals(m, VARIANTS, out_dir, "warmup_final.png", headline, settings, lines),
  ]


def summary(m: dict) -> dict:
  return {**training.summary(m, VARIANTS), "gap to worse reference": m["gap"]}


CLAIM = base.Claim(
    name="warmup",
    number=6,
    statement="Xiong et al. Fig. 2: Post-LN without warmup trains worse or diverges where Post-LN with warmup and "
    "Pre-LN without warmup train.",
    source="Xiong et al. 2020, Fig. 2; docs/science.md §8",
    paper_scale="6+6 layers, d = 512, IWSLT14 De-En, ~100k steps, warmup 4000 steps",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
