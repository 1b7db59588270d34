"""Claim 3 (Vaswani et al. 2017 §3.2.1, eq. 1 and footnote 4; Raffel et al. 2020 with Mesh TensorFlow's init; Su
2021a; docs/science.md §4): without 1/√d_k attention logits have std √d_k and the softmax saturates (its entropy
collapses) at init; with the scale, or with T5's query-init compensation, it does not.

The statements, quoted: Vaswani et al. 2017 §3.2.1: "We suspect that for large values of d_k, the dot products grow
large in magnitude, pushing the softmax function into regions where it has extremely small gradients. To counteract
this effect, we scale the dot products by 1/√d_k"; footnote 4: q · k "has mean 0 and variance d_k". Su 2021a
(translated): "Google's T5 indeed does not divide by √d, yet it still converges normally, because it adjusted its
initialization strategy": W_q drawn with std (d·d_k)^{-1/2}, which gives logits of variance 1.

Measured (configs/claims/attention_scale.py; analysis.signal at init): three Pre-norm models, identical but for the
attention rule: `scaled`, `unscaled`, `t5`. Per seed (one draw of the weights and of the analysis batches, shared by
the variants, so they pair by seed), each variant's logit std over valid (query, key) pairs and its entropy ratio
H / H_uniform (1 = uniform, 0 = one-hot), each the mean over every attention kind, layer, head and analysis batch.

Rules (stated before any run; each reads the 95% Student-t interval over the seeds, experiments/stats.py):
  logit std     each variant's logit std / its prediction, √d_k (unscaled) or 1 (scaled, t5), in [1/1.5, 1.5]: the
                interval of the per-seed log ratio, exponentiated (a geometric mean);
  no collapse   scaled and t5: entropy ratio ≥ 0.7;
  collapse      unscaled: entropy ratio ≤ 0.5 × scaled's (the per-seed log of the ratio, paired by seed).
REPRODUCED if all hold; NOT_REPRODUCED if any fails; INCONCLUSIVE if one is undetermined (more seeds: the reason
gives n and t_{n−1}), a variant has fewer than 2 seeds (no interval), the variants ran different seeds, or a run
crashed. The rules' history: docs/design_log.md.
"""

import math
from typing import Optional

import numpy as np
import scipy.stats

from experiments import plots, stats, study
from experiments.claims.shared import at_init

STD_FACTOR, MIN_ENTROPY_RATIO, COLLAPSE_FRACTION = 1.5, 0.7, 0.5
THRESHOLDS = {
    "logit std": f"mean over layers and kinds / √d_k (unscaled) or / 1 (scaled, t5), 95% interval over the seeds "
    f"(geometric), in [1/{STD_FACTOR}, {STD_FACTOR}]",
    "no collapse": f"scaled and t5: mean entropy / uniform entropy, 95% interval over the seeds, ≥ {MIN_ENTROPY_RATIO}",
    "collapse": f"unscaled's entropy ratio / scaled's, paired by seed, 95% interval (geometric) ≤ {COLLAPSE_FRACTION}",
    "reading": "an interval straddling its threshold is inconclusive (more seeds decide); < 2 seeds: no interval",
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


def _run_profile(run: study.Run) -> dict[str, dict[str, list[float]]]:
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


def _variant(runs: list[study.Run]) -> dict:
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


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
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


def _log_interval(values) -> tuple[float, float, float]:
  """The 95% interval of the mean of log(values) over seeds, exponentiated: (geometric mean, low, high)."""
  return tuple(math.exp(v) for v in stats.mean_interval(np.log(values)))


def intervals(m: dict) -> Optional[dict]:
  """The intervals the verdict reads over the seeds: 'logit_std' (per variant, / its prediction), 'entropy_ratio'
  (per variant) and 'collapse' (unscaled's entropy ratio / scaled's, paired by seed); None with fewer than 2 seeds
  or with variants that ran different seeds."""
  v, pred = m["variants"], m["predicted"]
  seeds = {name: v[name]["seeds"] for name in VARIANTS}
  if len(seeds["scaled"]) < 2 or any(s != seeds["scaled"] for s in seeds.values()):
    return None
  return {
      "logit_std": {n: _log_interval(np.asarray(v[n]["seed_logit_std"]) / pred[n]) for n in VARIANTS},
      "entropy_ratio": {n: stats.mean_interval(v[n]["seed_entropy_ratio"]) for n in VARIANTS},
      "collapse": _log_interval(
          np.asarray(v["unscaled"]["seed_entropy_ratio"]) / np.asarray(v["scaled"]["seed_entropy_ratio"])
      ),
  }


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  v, pred = m["variants"], m["predicted"]
  iv = intervals(m)
  if iv is None:
    seeds = {name: v[name]["seeds"] for name in VARIANTS}
    return study.Verdict(
        study.INCONCLUSIVE,
        f"no interval over the seeds: the variants ran seeds {seeds} (≥ 2 shared seeds needed; more seeds decide)",
    )
  std, ratio = iv["logit_std"], iv["entropy_ratio"]
  rules = {
      f"{name} logit std ≈ {pred[name]:.3g}": stats.reading(std[name], low=1 / STD_FACTOR, high=STD_FACTOR)
      for name in VARIANTS
  }
  rules["scaled does not collapse"] = stats.reading(ratio["scaled"], low=MIN_ENTROPY_RATIO)
  rules["t5 does not collapse"] = stats.reading(ratio["t5"], low=MIN_ENTROPY_RATIO)
  rules["unscaled collapses"] = stats.reading(iv["collapse"], high=COLLAPSE_FRACTION)
  n = len(v["scaled"]["seeds"])
  reason = (
      f"95% intervals over {n} seeds: logit std / prediction: unscaled {stats.fmt(std['unscaled'])} (√d_k = "
      f"{pred['unscaled']:.3g}), scaled {stats.fmt(std['scaled'])}, t5 {stats.fmt(std['t5'])} (predicted 1); entropy "
      f"/ uniform entropy: unscaled {stats.fmt(ratio['unscaled'])}, scaled {stats.fmt(ratio['scaled'])}, t5 "
      f"{stats.fmt(ratio['t5'])}; unscaled's / scaled's {stats.fmt(iv['collapse'])}"
  )
  t = lambda: scipy.stats.t.ppf(0.5 + stats.LEVEL / 2, n - 1)
  return study.decide(
      rules,
      reason,
      undetermined=lambda keys: f"the interval straddles the threshold (more seeds: n = {n} gives t_{n - 1} = "
      f"{t():.3g}): {keys}",
  )


def _kind_label(kind: str) -> str:
  stack, sub = kind.split("/")
  return f"{stack} {sub.replace('_attn', '')}-attention"


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  kinds = list(m["variants"]["scaled"]["kinds"])
  fig, axes = plots.plt.subplots(2, len(kinds) + 1, figsize=(3.3 * (len(kinds) + 1), 6.4), squeeze=False, sharey="row")
  root = math.sqrt(m["d_k"])
  for col, kind in enumerate(kinds):
    top, bottom = axes[0, col], axes[1, col]
    for name, arm in m["variants"].items():
      for ax, q in ((top, "logit_std"), (bottom, "entropy_ratio")):
        per_seed = arm["kinds"][kind][q]["per_seed"]
        x = np.arange(1, len(per_seed[0]) + 1)
        mean = plots.seed_band(ax, x, per_seed, COLORS[name])
        ax.plot(x, mean, "o-", color=COLORS[name], ms=4, lw=1.2, label=name)
    top.set_title(_kind_label(kind), fontsize=9)
    bottom.set_xlabel("layer")
    for ax in (top, bottom):
      ax.xaxis.get_major_locator().set_params(integer=True)
  # The verdict's numbers: each variant's mean over kinds and layers, with its per-seed values and the thresholds.
  names = list(VARIANTS)
  summary_top, summary_bottom = axes[0, -1], axes[1, -1]
  iv = intervals(m)
  for i, name in enumerate(names):
    arm = m["variants"][name]
    for ax, key in ((summary_top, "logit_std"), (summary_bottom, "entropy_ratio")):
      ax.plot([i] * len(arm[f"seed_{key}"]), arm[f"seed_{key}"], "_", color=COLORS[name], ms=12)
      ax.plot(i, arm[f"mean_{key}"], "o", color=COLORS[name], ms=7)
      if iv is not None:  # the 95% interval the verdict reads (logit std: / its prediction, drawn ×)
        scale = m["predicted"][name] if key == "logit_std" else 1.0
        _, lo, hi = iv[key][name]
        ax.plot([i + 0.12] * 2, [lo * scale, hi * scale], "-", color=COLORS[name], lw=2.5)
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
  summary_top.set_title("mean over kinds and layers\n(dots; dashes: seeds; bar: 95% interval)", fontsize=9)
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
  plots.headline_title(
      fig,
      f"Attention at init: logit std and entropy per layer and variant; {m['model']}",
      f"{settings}; {m['analysis']}",
  )
  return [plots.save(fig, out_dir, "attention_scale.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  iv, out = intervals(m), {}
  for name in VARIANTS:
    arm, pred = m["variants"][name], m["predicted"][name]
    if iv is None:  # one seed: the values, no interval
      out[f"{name}: logit std"] = arm["mean_logit_std"]
      out[f"{name}: entropy ratio"] = arm["mean_entropy_ratio"]
    else:
      out[f"{name}: logit std"] = stats.fmt(tuple(pred * x for x in iv["logit_std"][name]))
      out[f"{name}: entropy ratio"] = stats.fmt(iv["entropy_ratio"][name])
  if iv is not None:
    out["unscaled's / scaled's entropy ratio"] = stats.fmt(iv["collapse"])
  return out


CLAIM = study.Study(
    name="attention_scale",
    number=3,
    statement=(
        "Without 1/√d_k attention logits have std √d_k and the attention entropy collapses at init; "
        "with the scale, or with T5's query-init compensation, it does not."
    ),
    source="Vaswani et al. 2017 §3.2.1, eq. 1 and footnote 4; Raffel et al. 2020 (Mesh TF init); Su 2021a; "
    "docs/science.md §4",
    paper_scale="d_k = 64, 6+6 layers (Transformer base)",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
