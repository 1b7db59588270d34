"""Claims 6, 8, 9, 10: training comparisons on Multi30k at CPU scale (`analysis.reproduce.training`), verdicts as code.

Every variant trains with Adam (β2 = 0.98) at lr 1e-3, the same data order and the same seeds; "no warmup" is the
constant schedule, "warmup" linear warmup over 10% of the steps (Su 2021b's rule of thumb, docs/science.md §8). A
variant *fails* when any seed diverges (non-finite loss or gradient; `train.loop.Diverged`) or errors; otherwise it
is summarized by its mean final validation loss over seeds. δ = 0.1 nats is the smallest gap read as a difference.

- 6 warmup (Xiong et al. 2020, Fig. 2): reproduced if Post-LN without warmup fails or ends ≥ δ above BOTH Post-LN
  with warmup and Pre-LN without warmup, which must not fail; inconclusive if one of those two fails; else not
  reproduced.
- 8 tfixup (Huang et al. 2020): T-Fixup (no norm, no warmup) vs Post-LN without warmup. Reproduced if T-Fixup
  does not fail and Post-LN fails or ends ≥ δ above it; not reproduced if T-Fixup fails or ends ≥ δ above
  Post-LN; inconclusive if both train within δ (Post-LN without warmup did not fail at this scale).
- 9 bert_vs_xavier (Su 2021b; docs/science.md §6): both Post-LN without warmup. The BERT arm has BERT's input pipeline (Devlin et al.
  2019 §3: learned positions, token + position embeddings, LayerNorm, dropout; no √d scaling, all tables at the
  0.02 truncated normal), the Xavier arm the original Transformer's (√d-scaled tokens + sinusoids, no norm). (i) at
  init, cos(x_L, x_0) of each stack's output larger with BERT's 0.02 than with Xavier (mean over seeds); (ii) BERT
  ends ≥ δ below Xavier or Xavier fails while BERT does not. Reproduced if (i) and (ii); not reproduced if (i)
  fails, BERT fails, or BERT ends ≥ δ above Xavier; else inconclusive. Also measured at init, per arm and stack:
  the token part of x_0's second moment and cos(x_0, positions) (`analysis.reproduce.embeddings`).
- 10 deep_no_warmup: ReZero, scheduled α, DeepNorm, Admin and a Pre-LN reference, none with warmup. A method
  trains if it does not fail and ends ≤ 0.3 nats above Pre-LN. Reproduced if all four train; inconclusive if the
  Pre-LN reference fails; else not reproduced (naming the methods that did not train).
"""

import numpy as np

from analysis import signal
from analysis.reproduce import embeddings, inputs, training
from analysis.reproduce.result import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Outcome

SCALES = training.SCALES
DELTA = 0.1
REFERENCE_MARGIN = 0.3
NO_WARMUP = {"optim.schedule": "constant", "optim.warmup_steps": 0}
NO_NORM = {"model.norm_type": "none", "model.norm_position": "none"}
# Claim 9's arms, both Post-LN. BERT: learned positions, LayerNorm(token + position), no √d scaling (Devlin et al.
# 2019 §3; its 0.02 tables are not scaled). Xavier: √d-scaled tokens + sinusoids (Vaswani et al. 2017 §3.4–3.5).
BERT_MODEL = {"norm_position": "post", "scale_embeddings": False, "position": "learned", "embedding_norm": True}
XAVIER_MODEL = {"norm_position": "post", "scale_embeddings": True, "position": "sinusoidal", "embedding_norm": False}
ARM_MODEL = {"bert": BERT_MODEL, "xavier": XAVIER_MODEL}


def _steps(config, scale):
  return config.reproduce.num_steps or SCALES[scale]["num_steps"]


def _loss(groups, name):
  g = groups[name]
  return (
      "failed (seeds " + str(g["failed_seeds"]) + ")"
      if g["failed_seeds"]
      else f"{g['mean_final_loss']:.3f}±{g['std_final_loss']:.3f}"
  )


def _summary(groups):
  return {f"{name}: val loss": g["mean_final_loss"] for name, g in groups.items()} | {
      f"{name}: BLEU": g["mean_final_bleu"] for name, g in groups.items()
  }


def _measured(groups):
  return {name: {k: v for k, v in g.items()} for name, g in groups.items()}


def _fails(g):
  return bool(g["failed_seeds"])


# Verdicts: pure functions of the per-variant summaries (`training.summarize`), unit-tested on synthetic groups.
def warmup_verdict(groups: dict) -> str:
  """Claim 6 (rule in the module docstring)."""
  bad, warm_g, pre_g = groups["postln_nowarmup"], groups["postln_warmup"], groups["preln_nowarmup"]
  if _fails(warm_g) or _fails(pre_g):
    return INCONCLUSIVE
  if _fails(bad) or bad["mean_final_loss"] >= max(warm_g["mean_final_loss"], pre_g["mean_final_loss"]) + DELTA:
    return REPRODUCED
  return NOT_REPRODUCED


def tfixup_verdict(groups: dict) -> str:
  """Claim 8 (rule in the module docstring)."""
  tf, post = groups["tfixup_nowarmup"], groups["postln_nowarmup"]
  if _fails(tf) or (not _fails(post) and tf["mean_final_loss"] >= post["mean_final_loss"] + DELTA):
    return NOT_REPRODUCED
  if _fails(post) or post["mean_final_loss"] >= tf["mean_final_loss"] + DELTA:
    return REPRODUCED
  return INCONCLUSIVE


def bert_vs_xavier_verdict(identity: dict, groups: dict) -> str:
  """Claim 9 (rule in the module docstring); `identity` = {scheme: {stack: cos(x_L, x_0) at init}}."""
  identity_ok = all(identity["bert"][k] > identity["xavier"][k] for k in identity["bert"])
  bert, xav = groups["postln_bert"], groups["postln_xavier"]
  if not identity_ok or _fails(bert) or (not _fails(xav) and bert["mean_final_loss"] >= xav["mean_final_loss"] + DELTA):
    return NOT_REPRODUCED
  if _fails(xav) or bert["mean_final_loss"] <= xav["mean_final_loss"] - DELTA:
    return REPRODUCED
  return INCONCLUSIVE


def deep_no_warmup_verdict(groups: dict, methods: list) -> tuple:
  """Claim 10 (rule in the module docstring); returns (verdict, {method: trains})."""
  ref = groups["preln_reference"]
  trains = {
      m: bool(
          not _fails(groups[m])
          and not _fails(ref)
          and groups[m]["mean_final_loss"] <= ref["mean_final_loss"] + REFERENCE_MARGIN
      )
      for m in methods
  }
  if _fails(ref):
    return INCONCLUSIVE, trains
  return (REPRODUCED if all(trains.values()) else NOT_REPRODUCED), trains


def run_warmup(config, scale, seeds, workdir) -> Outcome:
  steps = _steps(config, scale)
  warm = {"optim.schedule": "linear_warmup", "optim.warmup_steps": max(1, steps // 10)}
  groups = training.run_variants(
      config,
      scale,
      seeds,
      workdir,
      {
          "postln_warmup": {"model.norm_position": "post", **warm},
          "postln_nowarmup": {"model.norm_position": "post", **NO_WARMUP},
          "preln_nowarmup": {"model.norm_position": "pre", **NO_WARMUP},
      },
      steps,
  )
  verdict = warmup_verdict(groups)
  reason = (
      f"final validation loss: Post-LN no warmup {_loss(groups, 'postln_nowarmup')}, Post-LN warmup "
      f"{_loss(groups, 'postln_warmup')}, Pre-LN no warmup {_loss(groups, 'preln_nowarmup')}"
  )
  if verdict == NOT_REPRODUCED:
    reason += (
        "; Post-LN without warmup neither diverged nor ended δ worse at this scale (the paper's gap is at "
        "d = 512 and ~100k steps)"
    )
  fig = training.plot(groups, workdir, "warmup_curves.png", "Post-LN with/without warmup vs Pre-LN without warmup")
  return Outcome(
      measured=_measured(groups),
      summary=_summary(groups),
      thresholds={"δ": f"{DELTA} nats", "rule": "see module docstring (claim 6)"},
      verdict=verdict,
      reason=reason,
      figures=[fig],
      scale_used=training.describe(scale, steps, seeds),
  )


def run_tfixup(config, scale, seeds, workdir) -> Outcome:
  steps = _steps(config, scale)
  groups = training.run_variants(
      config,
      scale,
      seeds,
      workdir,
      {
          "tfixup_nowarmup": {**NO_NORM, "init.scheme": "tfixup", **NO_WARMUP},
          "postln_nowarmup": {"model.norm_position": "post", **NO_WARMUP},
      },
      steps,
  )
  verdict = tfixup_verdict(groups)
  reason = (
      f"final validation loss: T-Fixup {_loss(groups, 'tfixup_nowarmup')}, Post-LN no warmup "
      f"{_loss(groups, 'postln_nowarmup')}"
  )
  if verdict == INCONCLUSIVE:
    reason += "; both trained within δ: Post-LN without warmup did not fail at this depth and length"
  fig = training.plot(groups, workdir, "tfixup_curves.png", "T-Fixup (no norm, no warmup) vs Post-LN without warmup")
  return Outcome(
      measured=_measured(groups),
      summary=_summary(groups),
      thresholds={"δ": f"{DELTA} nats", "rule": "see module docstring (claim 8)"},
      verdict=verdict,
      reason=reason,
      figures=[fig],
      scale_used=training.describe(scale, steps, seeds),
  )


def _at_init(config, scale, seeds, workdir, scheme):
  """(cos(x_out, x_0) of the last sublayer of each stack, mean over seeds (analysis.signal); the input stream's
  token fraction and cos(x_0, positions) per stack, mean over seeds (analysis.reproduce.embeddings))."""
  batches, vocab, _ = inputs.batches(config, scale, workdir, 1, 16)
  cfg = training.base_config(config, scale, 1)
  cos, stream = {}, {}
  for seed in seeds:
    model, variables = inputs.model_and_variables(cfg, ARM_MODEL[scheme], {"scheme": scheme}, vocab, seed, batches[0])
    for r in signal.signal_profile(model, variables, batches[0]):
      if r["layer"] is not None:
        cos.setdefault(r["stack"], {}).setdefault((r["layer"], r["sublayer"]), []).append(r["x0_cosine"])
    for stack, d in embeddings.input_stream(model, variables, batches[0]).items():
      for k in ("token_fraction", "cos_positions"):
        stream.setdefault(stack, {}).setdefault(k, []).append(d[k])
  identity = {stack: float(np.mean(d[max(d)])) for stack, d in cos.items()}
  return identity, {stack: {k: float(np.mean(v)) for k, v in d.items()} for stack, d in stream.items()}


def run_bert_vs_xavier(config, scale, seeds, workdir) -> Outcome:
  steps = _steps(config, scale)
  at_init = {s: _at_init(config, scale, seeds, workdir, s) for s in ("bert", "xavier")}
  identity = {s: v[0] for s, v in at_init.items()}
  stream = {s: v[1] for s, v in at_init.items()}
  arm = lambda s: {f"model.{k}": v for k, v in ARM_MODEL[s].items()} | {"init.scheme": s, **NO_WARMUP}
  groups = training.run_variants(
      config, scale, seeds, workdir, {"postln_bert": arm("bert"), "postln_xavier": arm("xavier")}, steps
  )
  verdict = bert_vs_xavier_verdict(identity, groups)
  cosines = ", ".join(f"{k} {identity['bert'][k]:.3f} vs {identity['xavier'][k]:.3f}" for k in identity["bert"])
  inputs_at_init = ", ".join(
      f"{s} {d['encoder']['token_fraction']:.3g} / {d['encoder']['cos_positions']:.4f}" for s, d in stream.items()
  )
  reason = (
      f"cos(x_L, x_0) at init, BERT vs Xavier: {cosines}; final validation loss without warmup: BERT "
      f"{_loss(groups, 'postln_bert')}, Xavier {_loss(groups, 'postln_xavier')}; input stream at init (encoder), "
      f"token fraction / cos(x_0, positions): {inputs_at_init}"
  )
  fig = training.plot(groups, workdir, "bert_vs_xavier_curves.png", "Post-LN without warmup: BERT 0.02 vs Xavier")
  measured = _measured(groups)
  measured["identity_cosine_at_init"] = identity
  measured["input_stream_at_init"] = stream
  return Outcome(
      measured=measured,
      summary={
          **{f"cos(x_L,x_0) {s} {k}": v for s, d in identity.items() for k, v in d.items()},
          **{f"x_0 token fraction {s} {k}": d["token_fraction"] for s, v in stream.items() for k, d in v.items()},
          **{f"cos(x_0, positions) {s} {k}": d["cos_positions"] for s, v in stream.items() for k, d in v.items()},
          **_summary(groups),
      },
      thresholds={
          "δ": f"{DELTA} nats",
          "identity": "cos(x_L, x_0) larger for BERT in every stack",
          "rule": "see module docstring (claim 9)",
      },
      verdict=verdict,
      reason=reason,
      figures=[fig],
      scale_used=training.describe(scale, steps, seeds),
  )


def run_deep_no_warmup(config, scale, seeds, workdir) -> Outcome:
  steps = _steps(config, scale)
  methods = {
      "rezero": {**NO_NORM, "model.residual": "rezero", "init.scheme": "rezero"},
      # Su 2021a §6's scheduled α: fixed step so that α reaches 1 after a third of the run.
      "scheduled_alpha": {
          **NO_NORM,
          "model.residual": "scheduled",
          "model.alpha_init": 0.0,
          "model.alpha_step": 3.0 / steps,
          "model.alpha_final": 1.0,
          "init.scheme": "xavier",
      },
      "deepnorm": {"model.norm_position": "post", "model.residual": "deepnorm", "init.scheme": "deepnet"},
      "admin": {"model.norm_position": "post", "model.residual": "admin", "init.scheme": "admin"},
  }
  variants = {k: {**v, **NO_WARMUP} for k, v in methods.items()}
  variants["preln_reference"] = {"model.norm_position": "pre", **NO_WARMUP}
  groups = training.run_variants(config, scale, seeds, workdir, variants, steps)
  verdict, trains = deep_no_warmup_verdict(groups, list(methods))
  reason = "final validation loss without warmup: " + ", ".join(f"{m} {_loss(groups, m)}" for m in variants)
  if verdict == NOT_REPRODUCED:
    reason += (
        f"; did not train (fail or > {REFERENCE_MARGIN} above Pre-LN): {[m for m, ok in trains.items() if not ok]}"
    )
  fig = training.plot(groups, workdir, "deep_no_warmup_curves.png", "No warmup: ReZero, scheduled α, DeepNorm, Admin")
  measured = _measured(groups)
  measured["trains"] = trains
  return Outcome(
      measured=measured,
      summary=_summary(groups),
      thresholds={
          "trains": f"no seed fails and mean final val loss ≤ Pre-LN's + {REFERENCE_MARGIN}",
          "rule": "see module docstring (claim 10)",
      },
      verdict=verdict,
      reason=reason,
      figures=[fig],
      scale_used=training.describe(scale, steps, seeds),
  )
