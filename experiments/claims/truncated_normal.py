"""Claim 1 (Su 2021a §1; Su 2021b; Devlin et al. 2019; Glorot & Bengio 2010, eq. 12; docs/science.md §1–2): a normal
truncated at ±2σ (TensorFlow's and BERT's `truncated_normal`) realizes std 0.8796σ, so BERT's initializer_range 0.02
is really 0.0176; Xavier for a 768×768 matrix is √(2/1536) = 0.0361, about twice that.

The statements, quoted: Su 2021a §1 (translated): "TensorFlow's tf.random.truncated_normal hard-codes a = μ − 2σ,
b = μ + 2σ, so by the formula the actual mean of its samples is still μ, but their actual variance is γσ²",
γ = 1 − 4φ(2)/(2Φ(2) − 1) = 0.77374; Devlin et al. 2019, `initializer_range` = 0.02: "The stdev of the
truncated_normal_initializer for initializing all weight matrices"; Glorot & Bengio 2010, eq. 12: Var[W] = 2/(n_j +
n_{j+1}).

Measured on the model's own parameters at init (configs/claims/truncated_normal.py; params.json of each run): the
pooled std about 0 of every matrix of the `bert` scheme and of the d×d kernels of the `xavier` scheme (the other
kernels reported, not tested), with its draws N and kurtosis κ, and each BERT tensor's largest |x|. Each realized std
gets the 95% interval of a sample std of N iid draws, standard error σ√((κ−1)/(4N)) (the delta method).

Rules (each reads its 95% interval: it holds when the whole interval lies in the band, fails when none of it does):
  bert       pooled std / (0.8796·0.02) in [1 − 0.01, 1 + 0.01];
  truncated  every BERT tensor's max |x| ≤ 2·0.02 (a bound on the support: read exactly, with no interval);
  xavier     pooled std of the d×d Xavier kernels / √(2/(2d)) in [1 − 0.01, 1 + 0.01].
The 1% band lies far inside the 13.7% gap to "the realized std is the nominal 0.02" (1/0.8796 − 1). REPRODUCED if
all hold; NOT_REPRODUCED if one fails; INCONCLUSIVE if an interval straddles its band's edge (the reason gives the
draws that would decide it) or a run crashed. Why these intervals, and the rules' history: docs/design_log.md.
"""

import math
from typing import Optional

import numpy as np
import scipy.stats

from experiments import plots, stats, study
from init.math import truncated_normal_std_factor, xavier_std

BERT_RANGE = 0.02
REL_TOL = 0.01  # the band of both std rules: realized / closed form in [1 − REL_TOL, 1 + REL_TOL]
NOT_MATRICES = ("norm_scale", "norm_bias", "bias", "residual_scale")  # ones / zeros under every scheme
NOT_XAVIER = ("embedding", "position", *NOT_MATRICES)  # the xavier scheme draws tables N(0, 1/d) (init/schemes.py)
FACTOR = truncated_normal_std_factor()
Z = float(scipy.stats.norm.ppf(0.5 + stats.LEVEL / 2))  # 1.96: N ≥ thousands of draws, so the interval is normal
THRESHOLDS = {
    "bert": f"pooled std/({FACTOR:.4f}·{BERT_RANGE}) (95% interval over the draws) in [{1 - REL_TOL:g}, "
    f"{1 + REL_TOL:g}]",
    "truncated": f"max |x| ≤ 2·{BERT_RANGE} for every BERT tensor (a support bound: read exactly)",
    "xavier": f"pooled std of the d×d Xavier kernels/√(2/(2d)) (95% interval over the draws) in [{1 - REL_TOL:g}, "
    f"{1 + REL_TOL:g}]; the other kernels reported, not tested",
    "reading": "an interval straddling its band's edge is inconclusive: more draws (seeds, or a wider model) decide",
}


def _pooled(tensors: list[dict]) -> dict:
  """Root-mean-square about 0 of the tensors' draws pooled, their number N and pooled kurtosis κ, and the relative
  standard error √((κ−1)/(4N)) of that std (module docstring)."""
  n = np.asarray([p["n"] for p in tensors], np.float64)
  second = np.asarray([p["std"] ** 2 + p["mean"] ** 2 for p in tensors])
  kurt = float(np.sum(n * np.asarray([p["kurtosis"] for p in tensors])) / n.sum())
  return dict(
      pooled_std=math.sqrt(float(np.sum(n * second) / n.sum())),
      n=int(n.sum()),
      kurtosis=kurt,
      se_rel=math.sqrt(max(kurt - 1, 0.0) / (4 * n.sum())),
  )


def _bert(runs: list[study.Run]) -> dict:
  tensors = [p for r in runs for p in r.analysis("params") if p["role"] not in NOT_MATRICES]
  out = _pooled(tensors)
  out.update(
      predicted=FACTOR * BERT_RANGE,
      ratio=out["pooled_std"] / BERT_RANGE,
      rel_error=out["pooled_std"] / (FACTOR * BERT_RANGE) - 1,
      max_abs=max(p["max_abs"] for p in tensors),
      per_tensor=[dict(path=p["path"], n=p["n"], std=p["std"], max_abs=p["max_abs"]) for p in tensors],
  )
  return out


def _xavier(runs: list[study.Run]) -> dict:
  rows, square = [], []
  for r in runs:
    for p in r.analysis("params"):
      if p["role"] in NOT_XAVIER:
        continue
      target = xavier_std(p["fan_in"], p["fan_out"])
      rows.append(
          dict(
              path=p["path"],
              seed=r.seed,
              fan_in=p["fan_in"],
              fan_out=p["fan_out"],
              std=p["std"],
              target=target,
              rel_error=p["std"] / target - 1,
              se_rel=p["std_error"] / p["std"],
          )
      )
      if p["fan_in"] == p["fan_out"]:
        square.append(p)
  out = dict(kernels=rows, square_d=square[0]["fan_in"] if square else None)
  if square:
    pooled = _pooled(square)
    target = xavier_std(out["square_d"], out["square_d"])
    out.update(
        square_std=pooled["pooled_std"],
        square_target=target,
        square_rel_error=pooled["pooled_std"] / target - 1,
        square_n=pooled["n"],
        square_kurtosis=pooled["kurtosis"],
        square_se_rel=pooled["se_rel"],
    )
  return out


def measure(results: study.Results) -> dict:
  out: dict = {"crashed": study.crashed(results.runs)}
  if out["crashed"]:
    return out
  out["bert"] = _bert(results.select({"init.scheme": "bert"}))
  out["xavier"] = _xavier(results.select({"init.scheme": "xavier"}))
  out["truncation_factor"] = FACTOR
  return out


def std_interval(rel_error: float, se_rel: float) -> tuple[float, float, float]:
  """(realized/closed form, low, high): the 95% interval of a sample std of N draws, 1 + rel_error ± z·SE/σ."""
  return 1 + rel_error, 1 + rel_error - Z * se_rel, 1 + rel_error + Z * se_rel


def draws_to_decide(rel_error: float, kurtosis: float) -> Optional[int]:
  """The draws N whose 95% interval would clear the band's edge, were the point error to stay `rel_error`:
  z²(κ−1)/(4(REL_TOL − |error|)²); None at the edge itself."""
  gap = abs(REL_TOL - abs(rel_error))
  return math.ceil(Z**2 * (kurtosis - 1) / (4 * gap**2)) if gap > 0 else None


def intervals(m: dict) -> dict:
  """The std intervals the verdict reads: 'bert' and 'xavier' (None without a d×d Xavier kernel)."""
  b, x = m["bert"], m["xavier"]
  return {
      "bert": std_interval(b["rel_error"], b["se_rel"]),
      "xavier": std_interval(x["square_rel_error"], x["square_se_rel"]) if x.get("square_d") else None,
  }


def _error(interval: tuple[float, float, float]) -> str:
  """'error +0.001% [−0.017%, +0.018%]' of a ratio interval (value, low, high)."""
  v, lo, hi = (x - 1 for x in interval)
  return f"error {v:+.3%} [{lo:+.3%}, {hi:+.3%}]"


@study.crashed_first
def verdict(m: dict) -> study.Verdict:
  b, x = m["bert"], m["xavier"]
  if not x.get("square_d"):
    return study.Verdict(study.INCONCLUSIVE, "the xavier cells have no d×d kernel: the d×d rule has nothing to read")
  iv = intervals(m)
  band = dict(low=1 - REL_TOL, high=1 + REL_TOL)
  rules = {
      "bert": stats.reading(iv["bert"], **band),
      "truncated": b["max_abs"] <= 2 * BERT_RANGE * (1 + 1e-6),  # float32 rounding of the bound itself
      "xavier": stats.reading(iv["xavier"], **band),
  }
  d = x["square_d"]
  reason = (
      f"BERT 0.02 realizes {b['pooled_std']:.5f} = {b['ratio']:.4f}·0.02 over {b['n']:,} draws, against the closed "
      f"form {b['predicted']:.5f}: {_error(iv['bert'])} (band ±{REL_TOL:.0%}); max |x| = {b['max_abs']:.4f} (bound "
      f"{2 * BERT_RANGE}); {d}×{d} Xavier realizes {x['square_std']:.5f} over {x['square_n']:,} draws, against the "
      f"closed form {x['square_target']:.5f}: {_error(iv['xavier'])}"
  )
  others = [k for k in x["kernels"] if k["fan_in"] != k["fan_out"]]
  if others:
    worst = max(others, key=lambda k: abs(k["rel_error"]))
    reason += (
        f"; other Xavier kernels (reported, not tested): worst {worst['fan_in']}×{worst['fan_out']} "
        f"{worst['rel_error']:+.2%} (SE {worst['se_rel']:.2%})"
    )

  def undetermined(keys: list[str]) -> str:
    errors = {"bert": (b["rel_error"], b["kurtosis"], b["n"])}
    errors["xavier"] = (x["square_rel_error"], x["square_kurtosis"], x["square_n"])
    need = [
        f"{k}: N = {n:,} draws, ≈ {draws_to_decide(e, kurt) or math.inf:,} would decide"
        for k, (e, kurt, n) in errors.items()
        if k in keys
    ]
    return f"the interval straddles the band's edge (more draws: more seeds or a wider model): {need}"

  return study.decide(rules, reason, undetermined=undetermined)


def figure(m: dict, results: study.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, (ax0, ax1) = plots.plt.subplots(1, 2, figsize=(10, 4.2))
  b = m["bert"]
  n = np.asarray([t["n"] for t in b["per_tensor"]])
  ax0.scatter(n, [t["std"] / BERT_RANGE for t in b["per_tensor"]], s=12, color="C0", label="each tensor: std / 0.02")
  ax0.axhline(m["truncation_factor"], color="C0", lw=1, label=rf"truncated $\pm2\sigma$: {m['truncation_factor']:.4f}")
  lo, hi = m["truncation_factor"] * (1 - REL_TOL), m["truncation_factor"] * (1 + REL_TOL)
  ax0.axhspan(lo, hi, color="C0", alpha=0.12, label=f"band of the pooled std (±{REL_TOL:.0%})")
  pooled = stats.fmt(_scaled(intervals(m)["bert"], m["truncation_factor"]), 5)
  ax0.axhline(b["ratio"], color="k", ls="--", lw=1, label=f"pooled (95% interval): {pooled}")
  ax0.axhline(1.0, color="C3", lw=1, label=r"nominal $\sigma$ (no truncation loss)")
  ax0.set_xscale("log")
  ax0.xaxis.set_minor_formatter(plots.plt.NullFormatter())  # the decades only: no 3×10⁵ printed over 4×10⁵
  ax0.set_xlabel("entries per tensor")
  ax0.set_ylabel(r"realized std / $\sigma$")
  ax0.set_title("bert scheme: truncated_normal(0.02)", fontsize=9)
  ax0.legend(fontsize=7)
  x = m["xavier"]
  target = np.asarray([k["target"] for k in x["kernels"]])
  std = np.asarray([k["std"] for k in x["kernels"]])
  ax1.scatter(target, std, s=12, color="C2", label="each kernel (all seeds)")
  span = np.array([target.min() * 0.9, target.max() * 1.1])
  ax1.plot(span, span, color="k", lw=1, label=r"$\sqrt{2/(\mathrm{fan_{in}}+\mathrm{fan_{out}})}$")
  if x["square_d"]:
    ax1.axhline(
        x["square_target"],
        color="grey",
        ls=":",
        lw=1,
        label=f"{x['square_d']}×{x['square_d']} (tested): {x['square_target']:.4f}",
    )
  ax1.axhline(b["pooled_std"], color="C0", ls="--", lw=1, label=f"BERT 0.02 realized: {b['pooled_std']:.4f}")
  ax1.set_xscale("log")
  ax1.set_yscale("log")
  ax1.set_xlabel("Xavier closed form")
  ax1.set_ylabel("realized std")
  tested = f"{x['square_d']}×{x['square_d']} pooled {_error(intervals(m)['xavier'])}" if x["square_d"] else "none"
  ax1.set_title(f"xavier scheme: kernels against the closed form\ntested: {tested}", fontsize=9)
  ax1.legend(fontsize=7)
  headline = f"Realized std of the model's parameters at init: bert scheme pooled {b['pooled_std']:.5f}"
  if x["square_d"]:
    headline += f"; xavier {x['square_d']}×{x['square_d']} kernels {x['square_std']:.5f}"
  plots.headline_title(fig, headline, settings)
  return [plots.save(fig, out_dir, "truncated_normal.png")]


def _scaled(interval: tuple[float, float, float], scale: float) -> tuple[float, float, float]:
  return tuple(scale * v for v in interval)


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  iv, x = intervals(m), m["xavier"]
  out = {
      "trunc std / σ": stats.fmt(_scaled(iv["bert"], m["truncation_factor"]), 5),
      "BERT 0.02 realized": stats.fmt(_scaled(iv["bert"], m["bert"]["predicted"]), 5),
  }
  if x["square_d"]:
    out[f"Xavier d={x['square_d']} realized"] = stats.fmt(_scaled(iv["xavier"], x["square_target"]), 5)
  return out


CLAIM = study.Study(
    name="truncated_normal",
    number=1,
    statement=(
        "A normal truncated at ±2σ realizes std 0.8796σ; BERT's initializer_range 0.02 is really 0.0176; Xavier for "
        "d = 768 is 0.0361."
    ),
    source="Su 2021a §1 and Su 2021b (BERT's 0.02); Devlin et al. 2019; Glorot & Bengio 2010 eq. 12; "
    "docs/science.md §1–2",
    paper_scale="BERT-base tensors (d = 768)",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
