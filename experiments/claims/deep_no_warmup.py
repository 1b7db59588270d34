"""Claim 10: ReZero, scheduled α, DeepNorm and Admin train without warmup at depth (Bachlechner et al. 2020; Su 2021a
§6; Wang et al. 2022; Liu et al. 2020).

The argument (docs/science.md §6, §8): each method keeps the residual branches from dominating the stream early —
ReZero and the scheduled α start every branch at 0 (x + α·F, α = 0), DeepNorm up-weights the stream
(α·x + F, α > 1) and scales the branch init down, Admin sets ω ⊙ x + F with ω from the branches' profiled
variance (Liu et al. 2020, Eq. 6) — so Adam's first full-size updates do not destabilize the model and no warmup is
needed.

Measured (configs/claims/deep_no_warmup.py; experiments/claims/training.py): the four methods and a Pre-LN reference,
all without warmup, trained alike with the same seeds and data order, each summarized by its mean final validation
loss over seeds; an arm *fails* when any seed diverges (non-finite loss or gradient).

Thresholds (stated before any run; the earlier reproduction's, analysis/reproduce/training_claims.py
(retired; git commit 35e9f30)):
  a method *trains* when no seed fails and its mean final validation loss is ≤ Pre-LN's + 0.3 nats (the margin:
  trained, though not necessarily as well as the reference, at a few hundred steps).
  REPRODUCED      Pre-LN trains and all four methods train;
  NOT_REPRODUCED  Pre-LN trains and a method does not (named in the reason);
  INCONCLUSIVE    the Pre-LN reference fails (no baseline), or a run crashed (no measurement).
"""

from experiments.claims import base, training
from experiments.claims.training import Variant, fails, loss_text

REFERENCE_MARGIN = 0.3
METHODS = {
    "rezero": Variant("ReZero (no norm)", {"model.residual": "rezero"}),
    "scheduled_alpha": Variant("scheduled α (no norm)", {"model.residual": "scheduled"}),
    "deepnorm": Variant("DeepNorm (Post-LN)", {"model.residual": "deepnorm"}),
    "admin": Variant("Admin (Post-LN)", {"model.residual": "admin"}),
}
VARIANTS = {
    **METHODS,
    "preln_reference": Variant("Pre-LN reference", {"model.residual": "plain", "model.norm_position": "pre"}),
}
THRESHOLDS = {
    "trains": f"no seed diverges and the mean final validation loss ≤ Pre-LN's + {REFERENCE_MARGIN} nats",
    "reproduced": "the Pre-LN reference trains and ReZero, scheduled α, DeepNorm and Admin all train",
    "not reproduced": "the Pre-LN reference trains and a method does not",
    "inconclusive": "the Pre-LN reference diverges, or a run crashed",
}


def numbers(arms: dict) -> dict:
  """The verdict's numbers from the arms' summaries: the limit Pre-LN + margin, and whether each method trains."""
  ref = arms["preln_reference"]
  limit = None if fails(ref) else ref["mean_final_loss"] + REFERENCE_MARGIN
  trains = {k: limit is not None and not fails(arms[k]) and arms[k]["mean_final_loss"] <= limit for k in METHODS}
  return dict(reference_limit=limit, trains=trains)


def measure(results: base.Results) -> dict:
  out = training.measure_variants(results, VARIANTS)
  return {**out, **numbers(out["variants"])}


def verdict(m: dict) -> base.Verdict:
  crashed = base.crashed_verdict(m)
  if crashed:
    return crashed
  reason = "final validation loss without warmup: " + ", ".join(
      f"{v.label} {loss_text(m['variants'][k])}" for k, v in VARIANTS.items()
  )
  if fails(m["variants"]["preln_reference"]):
    return base.Verdict(base.INCONCLUSIVE, reason + "; the Pre-LN reference failed to train")
  n = numbers(m["variants"])
  reason += f"; limit = Pre-LN + {REFERENCE_MARGIN} = {n['reference_limit']:.3f}"
  failed = [METHODS[k].label for k, ok in n["trains"].items() if not ok]
  if failed:
    return base.Verdict(base.NOT_REPRODUCED, reason + f"; did not train (diverged or above the limit): {failed}")
  return base.Verdict(base.REPRODUCED, reason + "; all four trained")


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  headline = (
      "Claim 10: ReZero, scheduled α (0 → 1 over the first third of the steps), DeepNorm, Admin and a Pre-LN "
      "reference, all without warmup (constant lr)"
  )
  lines = [(m["reference_limit"], f"Pre-LN $+\\,{REFERENCE_MARGIN}$: a method trains if it ends below")]
  return [
      training.plot_curves(m, VARIANTS, out_dir, "deep_no_warmup_curves.png", headline, settings),
      training.plot_finals(m, VARIANTS, out_dir, "deep_no_warmup_final.png", headline, settings, lines),
  ]


def summary(m: dict) -> dict:
  return {**training.summary(m, VARIANTS), **{f"{METHODS[k].label} trains": ok for k, ok in m["trains"].items()}}


CLAIM = base.Claim(
    name="deep_no_warmup",
    number=10,
    statement="ReZero / scheduled α / DeepNorm / Admin train without warmup at depth.",
    source="Bachlechner et al. 2020; Su 2021a §6; Wang et al. 2022; Liu et al. 2020",
    paper_scale="12–1000 layers, d ≥ 512, WMT / IWSLT",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
