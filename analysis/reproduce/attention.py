"""Claim 3 (docs/science.md §4): without 1/√d_k attention logits have std √d_k and the attention entropy collapses at
init; with the scale (Vaswani et al. 2017, eq. 1) or with T5's init compensation (W_q std (d·d_k)^{-1/2}, no scale;
Raffel et al. 2020) it does not.

Three models, identical except for the attention rule: `scaled` (Xavier, logits/√d_k), `unscaled` (Xavier, no
scale), `t5` (T5 scheme and T5's model: RMSNorm, no biases, no scale). All are Pre-norm, so every attention input
has unit second moment per token — the setting of the √d_k derivation — in every layer. Per layer and attention
kind the model records (`analysis.signal`) the logit std and the entropy per head over valid (query, key) pairs;
the entropy is divided by the uniform-attention entropy of the same queries (mean log #keys) to give a ratio in
[0, 1] (1 = uniform, 0 = one-hot).

Thresholds: each variant's mean logit std over layers within a factor 1.5 of its prediction (√d_k unscaled, 1
otherwise); `scaled` and `t5` mean entropy ratio ≥ 0.7; `unscaled` mean entropy ratio ≤ 0.5 × `scaled`'s (collapse).
"""

import math

import numpy as np

from analysis import signal
from analysis.reproduce import figures, inputs
from analysis.reproduce.result import NOT_REPRODUCED, REPRODUCED, Outcome

SCALES = {
    "tiny": dict(
        model=dict(num_encoder_layers=2, num_decoder_layers=2, d_model=128, num_heads=2, d_ff=256),
        batches=1,
        batch_size=8,
        length=16,
        seeds=(0,),
    ),
    "cpu": dict(
        model=dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, num_heads=8, d_ff=2048),
        batches=2,
        batch_size=32,
        length=32,
        seeds=(0, 1),
    ),
}
VARIANTS = {
    "scaled": (dict(norm_position="pre", attention_logit_scale="sqrt_dk"), dict(scheme="xavier")),
    "unscaled": (dict(norm_position="pre", attention_logit_scale="none"), dict(scheme="xavier")),
    "t5": (
        dict(
            norm_type="rmsnorm",
            norm_position="pre",
            use_bias=False,
            attention_logit_scale="none",
            tied_readout_scale="rsqrt_d",
            scale_embeddings=False,
        ),
        dict(scheme="t5"),
    ),
}
STD_FACTOR = 1.5
MIN_ENTROPY_RATIO = 0.7
COLLAPSE_FRACTION = 0.5
KINDS = (("encoder", "self_attn"), ("decoder", "self_attn"), ("decoder", "cross_attn"))


def uniform_entropy(batch: dict, stack: str, sublayer: str) -> float:
  """Mean over valid queries of log(#valid keys): the entropy of uniform attention under the model's masks."""
  src = np.asarray(batch["inputs"]) > 0
  tgt = np.asarray(batch["targets"]) > 0
  if stack == "encoder":
    n = src.sum(1)
    return float(np.sum(n * np.log(np.maximum(n, 1))) / max(n.sum(), 1))
  if sublayer == "cross_attn":
    n_q, n_k = tgt.sum(1), src.sum(1)
    return float(np.sum(n_q * np.log(np.maximum(n_k, 1))) / max(n_q.sum(), 1))
  keys = np.cumsum(tgt, axis=1)  # causal: query t sees the valid targets at positions ≤ t
  return float(np.sum(np.log(np.maximum(keys, 1)) * tgt) / max(tgt.sum(), 1))


def run(config, scale: str, seeds, workdir: str) -> Outcome:
  sc = SCALES[scale]
  batches, vocab, data_desc = inputs.batches(config, scale, workdir, sc["batches"], sc["batch_size"], sc["length"])
  d_k = sc["model"]["d_model"] // sc["model"]["num_heads"]
  per = {}  # variant -> (stack, sublayer) -> list over (seed, batch) of per-layer arrays
  for variant, (mo, io) in VARIANTS.items():
    rows = {k: dict(std=[], entropy=[], ratio=[]) for k in KINDS}
    for seed in seeds:
      for b in batches:
        model, variables = inputs.model_and_variables(config, {**sc["model"], **mo}, io, vocab, seed, b)
        records = signal.signal_profile(model, variables, b)
        for stack, sub in KINDS:
          sel = sorted((r for r in records if r["stack"] == stack and r["sublayer"] == sub), key=lambda r: r["layer"])
          ent = np.array([np.mean(r["attn_entropy"]) for r in sel])
          rows[(stack, sub)]["std"].append([np.mean(r["attn_logit_std"]) for r in sel])
          rows[(stack, sub)]["entropy"].append(ent.tolist())
          rows[(stack, sub)]["ratio"].append((ent / uniform_entropy(b, stack, sub)).tolist())
    per[variant] = {f"{s}/{k}": {m: np.mean(v, 0).tolist() for m, v in d.items()} for (s, k), d in rows.items()}
  predicted = {"scaled": 1.0, "unscaled": math.sqrt(d_k), "t5": 1.0}
  summary, checks = {}, {}
  for v in VARIANTS:
    std = float(np.mean([x for d in per[v].values() for x in d["std"]]))
    ratio = float(np.mean([x for d in per[v].values() for x in d["ratio"]]))
    per[v]["mean_logit_std"], per[v]["mean_entropy_ratio"] = std, ratio
    summary[f"{v}: logit std"] = std
    summary[f"{v}: entropy ratio"] = ratio
    checks[f"{v} logit std ≈ {predicted[v]:.3g}"] = 1 / STD_FACTOR <= std / predicted[v] <= STD_FACTOR
  checks["scaled does not collapse"] = per["scaled"]["mean_entropy_ratio"] >= MIN_ENTROPY_RATIO
  checks["t5 does not collapse"] = per["t5"]["mean_entropy_ratio"] >= MIN_ENTROPY_RATIO
  checks["unscaled collapses"] = (
      per["unscaled"]["mean_entropy_ratio"] <= COLLAPSE_FRACTION * per["scaled"]["mean_entropy_ratio"]
  )

  fig, axes = figures.plt.subplots(1, 2, figsize=(10, 3.8))
  for v in VARIANTS:
    for i, kind in enumerate(f"{s}/{k}" for s, k in KINDS):
      layers = np.arange(len(per[v][kind]["ratio"]))
      style = dict(
          marker="os^"[i], ms=4, ls="-", color={"scaled": "C0", "unscaled": "C3", "t5": "C2"}[v], label=f"{v} {kind}"
      )
      axes[0].plot(layers, per[v][kind]["ratio"], **style)
      axes[1].plot(layers, per[v][kind]["std"], **style)
  axes[0].set_ylabel("attention entropy / uniform entropy")
  axes[0].set_ylim(0, 1.05)
  axes[1].axhline(math.sqrt(d_k), color="k", ls="--", lw=0.8, label=f"√d_k = {math.sqrt(d_k):.0f}")
  axes[1].set_yscale("log")
  axes[1].set_ylabel("logit std (mean over heads)")
  for ax in axes:
    ax.set_xlabel("layer")
    ax.legend(fontsize=6, ncol=2)
  fig.suptitle(f"Attention at init, d_k = {d_k}", fontsize=10)
  fig_name = figures.save(fig, workdir, "attention_entropy.png")

  failed = [k for k, ok in checks.items() if not ok]
  reason = (
      f"logit std: unscaled {per['unscaled']['mean_logit_std']:.2f} (√d_k = {math.sqrt(d_k):.2f}), scaled "
      f"{per['scaled']['mean_logit_std']:.2f}, t5 {per['t5']['mean_logit_std']:.2f}; entropy ratio: unscaled "
      f"{per['unscaled']['mean_entropy_ratio']:.3f}, scaled {per['scaled']['mean_entropy_ratio']:.3f}, t5 "
      f"{per['t5']['mean_entropy_ratio']:.3f}"
  )
  if failed:
    reason += f"; failing: {failed}"
  m = sc["model"]
  return Outcome(
      measured=dict(per_variant=per, predicted_logit_std=predicted, checks=checks, d_k=d_k, data=data_desc),
      summary=summary,
      thresholds={
          "logit std": f"mean over layers within ×/÷{STD_FACTOR} of √d_k (unscaled) or 1 (scaled, t5)",
          "no collapse": f"scaled and t5: mean entropy/uniform ≥ {MIN_ENTROPY_RATIO}",
          "collapse": f"unscaled: mean entropy/uniform ≤ {COLLAPSE_FRACTION} × scaled's",
      },
      verdict=REPRODUCED if not failed else NOT_REPRODUCED,
      reason=reason,
      figures=[fig_name],
      scale_used=(
          f"{m['num_encoder_layers']}+{m['num_decoder_layers']} layers, d = {m['d_model']}, "
          f"{m['num_heads']} heads (d_k = {d_k}), Pre-norm; {data_desc}; {len(seeds)} seed(s)"
      ),
  )
