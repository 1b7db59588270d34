"""Claim 8 (Huang et al. 2020): T-Fixup — without LayerNorm and without warmup — trains where Post-LN without warmup
fails.

The argument (Huang et al. 2020 §3; docs/science.md §7): Post-LN needs warmup because Adam's early updates are large
while the norms' gradients are unstable; scaling the init with depth (T-Fixup, init/schemes.py: Xavier, then the
value/output/MLP kernels ×0.67·N^{-1/4} in the encoder, ×(9M)^{-1/4} in the decoder and the embeddings) bounds the
update of the whole stack, so neither the norms nor the warmup are needed.

Measured (configs/claims/tfixup.py; experiments/claims/training.py): T-Fixup (no norm, no warmup) and Post-LN (Xavier,
no warmup), trained alike with the same seeds and data order, each summarized by its mean final validation loss over
seeds; an arm *fails* when any seed diverges (non-finite loss or gradient).

Thresholds (stated before any run; the earlier reproduction's, analysis/reproduce/training_claims.py
(retired; git commit 35e9f30)):
  δ = 0.1 nats, the smallest gap of mean final validation losses read as a difference.
  REPRODUCED      T-Fixup trains (no seed fails) and Post-LN fails or ends ≥ δ above it;
  NOT_REPRODUCED  T-Fixup fails, or Post-LN trains and T-Fixup ends ≥ δ above it;
  INCONCLUSIVE    both train within δ of each other (Post-LN without warmup did not fail at this depth and length),
                  or a run crashed (no measurement).
"""

from experiments.claims import base, training
from experiments.claims.training import DELTA, Variant, fails, loss_text

VARIANTS = {
    "tfixup_nowarmup": Variant("T-Fixup, no norm, no warmup", {"init.scheme": "tfixup"}),
    "postln_nowarmup": Variant(
        "Post-LN (Xavier), no warmup", {"model.norm_position": "post", "init.scheme": lambda s: s != "tfixup"}
    ),
}
THRESHOLDS = {
    "δ": f"{DELTA} nats: the smallest gap of mean final validation losses read as a difference",
    "reproduced": "T-Fixup trains (no seed diverges) and Post-LN without warmup diverges (any seed) or ends ≥ δ "
    "above T-Fixup",
    "not reproduced": "T-Fixup diverges (any seed), or Post-LN trains and T-Fixup ends ≥ δ above it",
    "inconclusive": "both train within δ of each other, or a run crashed",
}


def numbers(arms: dict) -> dict:
  """The verdict's number from the arms' summaries: Post-LN's mean final loss minus T-Fixup's (None if one failed)."""
  tf, post = arms["tfixup_nowarmup"], arms["postln_nowarmup"]
  return dict(gap=None if fails(tf) or fails(post) else post["mean_final_loss"] - tf["mean_final_loss"])


def measure(results: base.Results) -> dict:
  out = training.measure_variants(results, VARIANTS)
  return {**out, **numbers(out["variants"])}


def verdict(m: dict) -> base.Verdict:
  crashed = base.crashed_verdict(m)
  if crashed:
    return crashed
  tf, post = m["variants"]["tfixup_nowarmup"], m["variants"]["postln_nowarmup"]
  reason = f"final validation loss without warmup: T-Fixup {loss_text(tf)}, Post-LN {loss_text(post)}"
  if fails(tf):
    return base.Verdict(base.NOT_REPRODUCED, reason + "; T-Fixup itself failed to train")
  if fails(post):
    return base.Verdict(base.REPRODUCED, reason + "; Post-LN without warmup diverged, T-Fixup did not")
  d = numbers(m["variants"])["gap"]
  gap = f"Post-LN − T-Fixup = {d:+.3f} nats (δ = {DELTA})"
  if d >= DELTA:
    return base.Verdict(base.REPRODUCED, reason + f"; {gap}")
  if d <= -DELTA:
    return base.Verdict(base.NOT_REPRODUCED, reason + f"; {gap}: T-Fixup trained worse")
  return base.Verdict(
      base.INCONCLUSIVE,
      reason + f"; {gap}: both trained within δ — Post-LN without warmup did not fail at this depth and length",
  )


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  headline = "Claim 8 (Huang et al. 2020): T-Fixup (no LayerNorm) vs Post-LN, both without warmup (constant lr)"
  post = m["variants"]["postln_nowarmup"]
  y = None if fails(post) else post["mean_final_loss"]
  lines = [
      (None if y is None else y - DELTA, r"Post-LN $-\,\delta$: reproduced if T-Fixup ends below"),
      (None if y is None else y + DELTA, r"Post-LN $+\,\delta$: not reproduced if T-Fixup ends above"),
  ]
  return [
      training.plot_curves(m, VARIANTS, out_dir, "tfixup_curves.png", headline, settings),
      training.plot_finals(m, VARIANTS, out_dir, "tfixup_final.png", headline, settings, lines),
  ]


def summary(m: dict) -> dict:
  return {**training.summary(m, VARIANTS), "Post-LN − T-Fixup": m["gap"]}


CLAIM = base.Claim(
    name="tfixup",
    number=8,
    statement="T-Fixup: without LayerNorm and without warmup a deep model trains where Post-LN without warmup fails.",
    source="Huang et al. 2020; docs/science.md §7",
    paper_scale="6+6 to 200+200 layers, d = 512, IWSLT/WMT",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
