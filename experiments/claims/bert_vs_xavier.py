"""Claim 9 (Su 2021b; docs/science.md §6): in a Post-LN model BERT's 0.02 init keeps the identity path stronger at
init than Xavier, and trains better without long warmup.

The argument (Su 2021b): Post-LN's stream after l sublayers is x_l ≈ x_0/2^{l/2} + branches when every branch has
the stream's variance (Xavier, σ = 1 branches), so the input is washed out with depth and the first updates must
rebuild it (hence warmup); with BERT's 0.02 kernels (std 0.0176 realized, below Xavier's d^{-1/2}: 0.088 at d = 128,
0.036 at d = 768) the branches start small, each LayerNorm nearly the identity on the normalized stream, so x_L stays
close to x_0 and training starts from a near-identity network.

Measured (configs/claims/bert_vs_xavier.py; experiments/claims/training.py): two Post-LN arms without warmup, each
with its input pipeline — BERT (learned positions, LayerNorm(token + position), no √d, N(0, 0.02²) truncated) and
Xavier (√d tokens + sinusoids) — trained alike with the same seeds and data order, and analyzed at init before
training (`analysis.signal`): per stack cos(x_L, x_0), the cosine between the stack's last sublayer output and its
input (mean over the analysis batches, then over seeds), the whole profile cos(x_k, x_0) over sublayers k, and what
x_0 is made of (token fraction of E[x_0²], cos(x_0, positions); analysis/embeddings.py; reported, not judged).

Thresholds (stated before any run; the earlier reproduction's, analysis/reproduce/training_claims.py
(retired; git commit 35e9f30)):
  δ = 0.1 nats, the smallest gap of mean final validation losses read as a difference.
  identity        cos(x_L, x_0) at init is larger with BERT than with Xavier in every stack (mean over seeds);
  REPRODUCED      identity holds, BERT trains (no seed diverges) and ends ≥ δ below Xavier, or Xavier diverges;
  NOT_REPRODUCED  identity fails, or BERT diverges, or Xavier trains and BERT ends ≥ δ above it;
  INCONCLUSIVE    identity holds and both train within δ of each other, or a run crashed (no measurement).
(The earlier reproduction took cos(x_L, x_0) after the last layer's *self-attention* sublayer — a max over sublayer
names; here it is the stack's last sublayer, the layer's output.)
"""

import numpy as np

from experiments.claims import base, figures, training
from experiments.claims.training import DELTA, Variant, fails, loss_text

VARIANTS = {
    "postln_bert": Variant("Post-LN, BERT 0.02 inputs/init, no warmup", {"init.scheme": "bert"}),
    "postln_xavier": Variant("Post-LN, Xavier inputs/init, no warmup", {"init.scheme": "xavier"}),
}
ARMS = {"postln_bert": "bert", "postln_xavier": "xavier"}
THRESHOLDS = {
    "δ": f"{DELTA} nats: the smallest gap of mean final validation losses read as a difference",
    "identity": "cos(x_L, x_0) at init (the stack's last sublayer vs its input, mean over seeds) larger for BERT than "
    "for Xavier in every stack",
    "reproduced": "identity holds, BERT trains (no seed diverges) and ends ≥ δ below Xavier, or Xavier diverges",
    "not reproduced": "identity fails, or BERT diverges, or Xavier trains and BERT ends ≥ δ above it",
    "inconclusive": "identity holds and both train within δ of each other, or a run crashed",
}


def _profile(run: base.Run) -> dict:
  """{stack: {"cos": [cos(x_k, x_0) per sublayer k, stack order], "token_fraction", "cos_positions"}}, averaged
  over the run's analysis batches."""
  per_batch = run.analysis("signal")
  out: dict = {}
  for batch in per_batch:
    for r in batch["records"]:
      s = out.setdefault(r["stack"], {"cos": [], "kinds": [], "token_fraction": [], "cos_positions": []})
      if r["layer"] is not None:
        s["cos"].append(r["x0_cosine"])
        s["kinds"].append(f"{r['layer']}/{r['sublayer']}")
      else:
        for key in ("token_fraction", "cos_positions"):
          if key in r:
            s[key].append(r[key])
  n = len(per_batch)
  return {
      stack: dict(
          cos=np.asarray(s["cos"]).reshape(n, -1).mean(0).tolist(),
          sublayers=s["kinds"][: len(s["kinds"]) // n],
          token_fraction=float(np.mean(s["token_fraction"])) if s["token_fraction"] else None,
          cos_positions=float(np.mean(s["cos_positions"])) if s["cos_positions"] else None,
      )
      for stack, s in out.items()
  }


def _at_init(runs: list[base.Run]) -> dict:
  """Per stack: the profile and cos(x_L, x_0) per seed and their means (runs without an analysis, crashed, left out)."""
  profiles = [(r.seed, _profile(r)) for r in runs if r.outcome != "crashed"]
  out = {}
  for stack in profiles[0][1] if profiles else []:
    per_seed = [p[stack] for _, p in profiles]
    last = [p["cos"][-1] for p in per_seed]
    out[stack] = dict(
        seeds=[s for s, _ in profiles],
        sublayers=per_seed[0]["sublayers"],
        cos_profile=np.mean([p["cos"] for p in per_seed], 0).tolist(),
        cos_profile_per_seed=[p["cos"] for p in per_seed],
        cos_last_per_seed=last,
        cos_last=float(np.mean(last)),
        token_fraction=base.mean_std(p["token_fraction"] for p in per_seed)[0],
        cos_positions=base.mean_std(p["cos_positions"] for p in per_seed)[0],
    )
  return out


def numbers(arms: dict, identity: dict) -> dict:
  """The verdict's numbers from the arms' summaries and `identity` = {arm: {stack: cos(x_L, x_0)}}: whether BERT's
  cosine is larger in every stack, and Xavier's mean final loss minus BERT's (None if one failed)."""
  stacks = [s for s in identity["bert"] if s in identity["xavier"]]
  b, x = arms["postln_bert"], arms["postln_xavier"]
  return dict(
      identity_holds=bool(stacks) and all(identity["bert"][s] > identity["xavier"][s] for s in stacks),
      gap=None if fails(b) or fails(x) else x["mean_final_loss"] - b["mean_final_loss"],
  )


def measure(results: base.Results) -> dict:
  out = training.measure_variants(results, VARIANTS)
  out["at_init"] = {ARMS[k]: _at_init([r for r in results.runs if v.matches(r.params)]) for k, v in VARIANTS.items()}
  out["identity_cosine_at_init"] = {
      arm: {s: d["cos_last"] for s, d in out["at_init"][arm].items()} for arm in ARMS.values()
  }
  return {**out, **numbers(out["variants"], out["identity_cosine_at_init"])}


def verdict(m: dict) -> base.Verdict:
  crashed = base.crashed_verdict(m)
  if crashed:
    return crashed
  cos = m["identity_cosine_at_init"]
  n = numbers(m["variants"], cos)
  bert, xav = m["variants"]["postln_bert"], m["variants"]["postln_xavier"]
  reason = (
      "cos(x_L, x_0) at init, BERT vs Xavier: "
      + ", ".join(f"{s} {cos['bert'][s]:.3f} vs {cos['xavier'][s]:.3f}" for s in cos["bert"] if s in cos["xavier"])
      + f"; final validation loss without warmup: BERT {loss_text(bert)}, Xavier {loss_text(xav)}"
  )
  if not n["identity_holds"]:
    return base.Verdict(base.NOT_REPRODUCED, reason + "; BERT's identity path is not stronger at init in every stack")
  if fails(bert):
    return base.Verdict(base.NOT_REPRODUCED, reason + "; BERT itself failed to train")
  if fails(xav):
    return base.Verdict(base.REPRODUCED, reason + "; Xavier diverged, BERT did not")
  gap = f"Xavier − BERT = {n['gap']:+.3f} nats (δ = {DELTA})"
  if n["gap"] >= DELTA:
    return base.Verdict(base.REPRODUCED, reason + f"; {gap}")
  if n["gap"] <= -DELTA:
    return base.Verdict(base.NOT_REPRODUCED, reason + f"; {gap}: BERT trained worse")
  return base.Verdict(base.INCONCLUSIVE, reason + f"; {gap}: both trained within δ")


def _plot_at_init(m: dict, out_dir: str, settings: str) -> str:
  """cos(x_k, x_0) over sublayers k at init, one panel per stack: each arm's mean over seeds with the min–max band,
  the deciding last sublayer marked with its value; the legend says what x_0 is made of."""
  stacks = [s for s in m["at_init"]["bert"] if s in m["at_init"]["xavier"]]
  fig, axes = figures.plt.subplots(1, max(len(stacks), 1), figsize=(6 * max(len(stacks), 1), 4.6), squeeze=False)
  for ax, stack in zip(axes[0], stacks):
    for i, (key, arm) in enumerate(ARMS.items()):
      d, color = m["at_init"][arm][stack], f"C{i}"
      k = np.arange(1, len(d["cos_profile"]) + 1)
      per_seed = np.asarray(d["cos_profile_per_seed"])
      label = VARIANTS[key].label.split(",")[1].strip()
      if d["token_fraction"] is not None:
        label += f"\n($x_0$: token fraction {d['token_fraction']:.2f}, $\\cos(x_0, p)$ = {d['cos_positions']:.2f})"
      ax.plot(k, d["cos_profile"], "o-", ms=3, color=color, label=label)
      if len(per_seed) > 1:
        ax.fill_between(k, per_seed.min(0), per_seed.max(0), color=color, alpha=0.2, lw=0)
      ax.plot(k[-1:], [d["cos_last"]], "*", ms=14, color=color, mec="k")
      ax.plot(np.full(len(d["cos_last_per_seed"]), k[-1] + 0.15), d["cos_last_per_seed"], "o", mfc="none", color=color)
      ax.annotate(
          f"{d['cos_last']:.3f}", (k[-1], d["cos_last"]), textcoords="offset points", xytext=(-6, 8), ha="right"
      )
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylim(min(-0.1, ax.get_ylim()[0]), 1.08)
    ax.set_xlabel(f"{stack} sublayer k (attention, {'cross-attention, ' if stack == 'decoder' else ''}MLP in turn)")
    ax.set_ylabel(r"$\cos(x_k, x_0) = \langle x_k, x_0\rangle / (\|x_k\|\,\|x_0\|)$")
    ax.set_title(f"{stack}: ★ = $\\cos(x_L, x_0)$, the verdict's number (mean over seeds; ○ each seed)", fontsize=8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7, loc="lower left")
  figures.suptitle(
      fig,
      "Claim 9 (Su 2021b): the identity path at init (before training), Post-LN with BERT's 0.02 vs Xavier",
      settings,
  )
  return figures.save(fig, out_dir, "bert_vs_xavier_at_init.png")


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  headline = "Claim 9 (Su 2021b): Post-LN with BERT's 0.02 inputs/init vs Xavier's, both without warmup (constant lr)"
  xav = m["variants"]["postln_xavier"]
  y = None if fails(xav) else xav["mean_final_loss"]
  lines = [
      (None if y is None else y - DELTA, r"Xavier $-\,\delta$: reproduced if BERT ends below"),
      (None if y is None else y + DELTA, r"Xavier $+\,\delta$: not reproduced if BERT ends above"),
  ]
  return [
      _plot_at_init(m, out_dir, settings),
      training.plot_curves(m, VARIANTS, out_dir, "bert_vs_xavier_curves.png", headline, settings),
      training.plot_finals(m, VARIANTS, out_dir, "bert_vs_xavier_final.png", headline, settings, lines),
  ]


def summary(m: dict) -> dict:
  out = {f"cos(x_L,x_0) {arm} {s}": v for arm, d in m["identity_cosine_at_init"].items() for s, v in d.items()}
  for arm, stacks in m["at_init"].items():
    for s, d in stacks.items():
      out[f"x_0 token fraction {arm} {s}"] = d["token_fraction"]
      out[f"cos(x_0, positions) {arm} {s}"] = d["cos_positions"]
  return {**out, **training.summary(m, VARIANTS), "Xavier − BERT": m["gap"]}


CLAIM = base.Claim(
    name="bert_vs_xavier",
    number=9,
    statement="BERT's 0.02 vs Xavier in a Post-LN model: the smaller init keeps the identity path stronger at init "
    "and trains better without long warmup.",
    source="Su 2021b; docs/science.md §6",
    paper_scale="BERT-base (12 layers, d = 768), pre-training",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
