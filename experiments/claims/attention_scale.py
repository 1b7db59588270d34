"""Claim 3 (Vaswani et al. 2017 §3.2.1; Raffel et al. 2020; docs/science.md §4): without 1/√d_k attention logits
have std √d_k and the attention entropy collapses at init; with the scale, or with T5's query-init compensation, it
does not.

The derivation: for a query q and key k with iid zero-mean, unit-variance entries, E[(q·k)²] = d_k, so the logits
q·k have std √d_k and the softmax over them is nearly one-hot; multiplying by d_k^{-1/2} (Vaswani eq. 1) brings the
std to 1, and so does T5's init, which draws W_q with std (d·d_k)^{-1/2} (q entries of variance 1/d_k) and no scale.

Measured (configs/claims/attention_scale.py; analysis.signal at init): three Pre-norm models (every attention input
has unit second moment per token), identical but for the attention rule: `scaled`, `unscaled`, `t5`. Per attention
kind (encoder self, decoder self, decoder cross) and layer: the logit std over valid (query, key) pairs and the
attention entropy, each the mean over heads, and the entropy ratio H / H_uniform, where H_uniform is the entropy of
uniform attention under the same mask (mean over valid queries of log #valid keys): 1 = uniform, 0 = one-hot.
`measure` averages over the analysis batches and seeds; a variant's mean is over every kind and layer.

Thresholds (stated before any run; those of analysis/reproduce/attention.py (retired; git commit 35e9f30)):
  logit std     each variant's mean logit std within ×/÷ 1.5 of its prediction: √d_k (unscaled), 1 (scaled, t5);
  no collapse   scaled and t5: mean entropy ratio ≥ 0.7;
  collapse      unscaled: mean entropy ratio ≤ 0.5 × scaled's.
REPRODUCED if all hold; NOT_REPRODUCED if any fails; INCONCLUSIVE if a run crashed (no measurement).
"""

import math

import numpy as np

from experiments.claims import at_init, base, figures

STD_FACTOR, MIN_ENTROPY_RATIO, COLLAPSE_FRACTION = 1.5, 0.7, 0.5
THRESHOLDS = {
    "logit std": f"mean over layers and kinds within ×/÷{STD_FACTOR} of √d_k (unscaled) or 1 (scaled, t5)",
    "no collapse": f"scaled and t5: mean entropy / uniform entropy ≥ {MIN_ENTROPY_RATIO}",
    "collapse": f"unscaled: mean entropy / uniform entropy ≤ {COLLAPSE_FRACTION} × scaled's",
}
# The grid's cells (configs/claims/attention_scale.py), by the swept values that tell them apart.
VARIANTS = {
    "scaled": {"model.attention_logit_scale": "sqrt_dk", "init.scheme": "xavier"},
    "unscaled": {"model.attention_logit_scale": "none", "init.scheme": "xavier"},
    "t5": {"init.scheme": "t5"},
}
COLORS = {"scaled": "C0", "unscaled": "C3", "t5": "C2"}
KINDS = ("encoder/self_attn", "decoder/self_attn", "decoder/cross_attn")
QUANTITIES = ("logit_std", "entropy", "entropy_ratio")


def _run_profile(run: base.Run) -> dict[str, dict[str, list[float]]]:
  """kind -> quantity -> per layer (stack order): the head mean of each batch, averaged over the analysis batches."""
  acc: dict[str, dict[int, list]] = {}
  for batch in run.analysis("signal"):
    for r in batch["records"]:
      if "attn_logit_std" not in r:
        continue
      if "attn_uniform_entropy" not in r:
        raise ValueError(
            f"{run.path}: signal.json has no attn_uniform_entropy (analyzed before the model recorded it); "
            "delete the run's analysis/ folder and rerun the claim"
        )
      entropy = float(np.mean(r["attn_entropy"]))
      row = (float(np.mean(r["attn_logit_std"])), entropy, entropy / float(np.mean(r["attn_uniform_entropy"])))
      acc.setdefault(f"{r['stack']}/{r['sublayer']}", {}).setdefault(r["layer"], []).append(row)
  out = {}
  for kind, layers in acc.items():
    rows = np.asarray([np.mean(layers[layer], 0) for layer in sorted(layers)])  # [layers, 3]
    out[kind] = {q: rows[:, i].tolist() for i, q in enumerate(QUANTITIES)}
  return out


def _variant(runs: list[base.Run]) -> dict:
  """Per kind and quantity the seed mean and the per-seed profiles; the variant's means over kinds and layers."""
  profiles = [_run_profile(r) for r in runs]
  kinds = [k for k in KINDS if k in profiles[0]]
  per_kind = {
      kind: {
          q: {"mean": np.mean([p[kind][q] for p in profiles], 0).tolist(), "per_seed": [p[kind][q] for p in profiles]}
          for q in QUANTITIES
      }
      for kind in kinds
  }
  seed_mean = lambda q: [float(np.mean([x for k in kinds for x in p[k][q]])) for p in profiles]
  return dict(
      seeds=[r.seed for r in runs],
      kinds=per_kind,
      seed_logit_std=seed_mean("logit_std"),
      seed_entropy_ratio=seed_mean("entropy_ratio"),
      mean_logit_std=float(np.mean(seed_mean("logit_std"))),
      mean_entropy_ratio=float(np.mean(seed_mean("entropy_ratio"))),
  )


def measure(results: base.Results) -> dict:
  out: dict = {"crashed": base.crashed(results.runs)}
  if out["crashed"]:
    return out
  variants = {}
  for name, params in VARIANTS.items():
    runs = results.select(params)
    if not runs:
      raise ValueError(
          f"no run of the sweep has {params} (variant {name}); is the grid configs/claims/attention_scale.py's?"
      )
    variants[name] = _variant(runs)
  model = results.runs[0].config()["model"]
  d_k = model["head_dim"] or model["d_model"] // model["num_heads"]
  out.update(
      d_k=d_k,
      predicted={"scaled": 1.0, "unscaled": math.sqrt(d_k), "t5": 1.0},
      variants=variants,
      model=at_init.model_size(results.runs[0]),
      analysis=at_init.analysis_settings(results.runs[0]),
  )
  return out


def verdict(m: dict) -> base.Verdict:
  bad = base.crashed_verdict(m)
  if bad:
    return bad
  v, pred = m["variants"], m["predicted"]
  std = {name: v[name]["mean_logit_std"] for name in VARIANTS}
  ratio = {name: v[name]["mean_entropy_ratio"] for name in VARIANTS}
  ok = {
      f"{name} logit std ≈ {pred[name]:.3g}": (1 / STD_FACTOR <= std[name] / pred[name] <= STD_FACTOR) for name in std
  }
  ok["scaled does not collapse"] = ratio["scaled"] >= MIN_ENTROPY_RATIO
  ok["t5 does not collapse"] = ratio["t5"] >= MIN_ENTROPY_RATIO
  ok["unscaled collapses"] = ratio["unscaled"] <= COLLAPSE_FRACTION * ratio["scaled"]
  reason = (
      f"mean logit std: unscaled {std['unscaled']:.3g} (√d_k = {pred['unscaled']:.3g}), scaled {std['scaled']:.3g}, "
      f"t5 {std['t5']:.3g} (predicted 1); mean entropy / uniform: unscaled {ratio['unscaled']:.3f}, scaled "
      f"{ratio['scaled']:.3f}, t5 {ratio['t5']:.3f}"
  )
  failed = [k for k, good in ok.items() if not good]
  if not failed:
    return base.Verdict(base.REPRODUCED, reason)
  return base.Verdict(base.NOT_REPRODUCED, reason + f"; failing: {failed}")


def _kind_label(kind: str) -> str:
  stack, sub = kind.split("/")
  return f"{stack} {sub.replace('_attn', '')}-attention"


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  kinds = list(m["variants"]["scaled"]["kinds"])
  fig, axes = figures.plt.subplots(
      2, len(kinds) + 1, figsize=(3.3 * (len(kinds) + 1), 6.4), squeeze=False, sharey="row"
  )
  root = math.sqrt(m["d_k"])
  for col, kind in enumerate(kinds):
    top, bottom = axes[0, col], axes[1, col]
    for name, arm in m["variants"].items():
      for ax, q in ((top, "logit_std"), (bottom, "entropy_ratio")):
        per_seed = arm["kinds"][kind][q]["per_seed"]
        x = np.arange(1, len(per_seed[0]) + 1)
        mean = at_init.seed_band(ax, x, per_seed, COLORS[name])
        ax.plot(x, mean, "o-", color=COLORS[name], ms=4, lw=1.2, label=name)
    top.set_title(_kind_label(kind), fontsize=9)
    bottom.set_xlabel("layer")
    for ax in (top, bottom):
      ax.xaxis.get_major_locator().set_params(integer=True)
  # The verdict's numbers: each variant's mean over kinds and layers, with its per-seed values and the thresholds.
  names = list(VARIANTS)
  summary_top, summary_bottom = axes[0, -1], axes[1, -1]
  for i, name in enumerate(names):
    arm = m["variants"][name]
    for ax, key in ((summary_top, "logit_std"), (summary_bottom, "entropy_ratio")):
      ax.plot([i] * len(arm[f"seed_{key}"]), arm[f"seed_{key}"], "_", color=COLORS[name], ms=12)
      ax.plot(i, arm[f"mean_{key}"], "o", color=COLORS[name], ms=7)
    pred = m["predicted"][name]
    summary_top.fill_between(
        [i - 0.3, i + 0.3], pred / STD_FACTOR, pred * STD_FACTOR, color=COLORS[name], alpha=0.15, lw=0
    )
  scaled = m["variants"]["scaled"]["mean_entropy_ratio"]
  summary_bottom.axhspan(MIN_ENTROPY_RATIO, 1.05, color="C0", alpha=0.08)
  summary_bottom.axhline(MIN_ENTROPY_RATIO, color="k", ls="--", lw=0.8, label=f"no collapse ≥ {MIN_ENTROPY_RATIO}")
  summary_bottom.axhline(
      COLLAPSE_FRACTION * scaled, color="C3", ls=":", lw=1, label=f"collapse ≤ {COLLAPSE_FRACTION} × scaled's"
  )
  for ax in (summary_top, summary_bottom):
    ax.set_xticks(range(len(names)), names)
    ax.set_xlim(-0.6, len(names) - 0.4)
  summary_top.set_title("mean over kinds and layers\n(dots; dashes: seeds)", fontsize=9)
  summary_bottom.legend(fontsize=7, loc="center right")
  for ax in axes[0]:
    ax.axhline(root, color="C3", ls="--", lw=0.8)
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_yscale("log", base=2)
  axes[0, 0].text(
      0.02,
      root * 1.08,
      rf"$\sqrt{{d_k}} = {root:.3g}$",
      color="C3",
      fontsize=8,
      transform=axes[0, 0].get_yaxis_transform(),
  )
  axes[0, 0].set_ylabel("logit std (mean over heads)\nbands: predicted ×/÷ 1.5 (right)")
  axes[1, 0].set_ylabel(r"entropy / uniform entropy $H/H_{\rm uniform}$")
  axes[1, 0].set_ylim(0, 1.05)
  axes[0, 0].legend(fontsize=7)
  figures.suptitle(
      fig,
      f"Attention at init: logit std and entropy per layer and variant; {m['model']}",
      f"{settings}; {m['analysis']}",
  )
  return [figures.save(fig, out_dir, "attention_scale.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  out = {}
  for name in VARIANTS:
    out[f"{name}: logit std"] = m["variants"][name]["mean_logit_std"]
    out[f"{name}: entropy ratio"] = m["variants"][name]["mean_entropy_ratio"]
  return out


CLAIM = base.Claim(
    name="attention_scale",
    number=3,
    statement=(
        "Without 1/√d_k attention logits have std √d_k and the attention entropy collapses at init; "
        "with the scale, or with T5's query-init compensation, it does not."
    ),
    source="docs/science.md §4; Vaswani et al. 2017 §3.2.1; Raffel et al. 2020 (Mesh TF init)",
    paper_scale="d_k = 64, 6+6 layers (Transformer base)",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
