"""Claim 1 (Su 2021b; Devlin et al. 2019; docs/science.md §1–2): a normal truncated at ±2σ (TensorFlow's and BERT's
`truncated_normal`) realizes std 0.8796σ, so BERT's initializer_range 0.02 is really 0.0176; Xavier for a 768×768
matrix is √(2/1536) = 0.0361, about twice that.

Measured on the model's own parameters at init (configs/claims/truncated_normal.py; params.json of each run):
  bert    every matrix (kernels, embeddings, head) of the `bert` scheme: their pooled root-mean-square
          √(Σ n_i (s_i² + m_i²) / Σ n_i) (the std about 0; the tensors' means m_i are ~0) and the largest |x| of each
          tensor;
  xavier  every kernel of the `xavier` scheme: its std against xavier_std(fan_in, fan_out) (Glorot & Bengio 2010,
          eq. 12, with the fans of the parameter's role), in particular the d×d ones at d = 768.
The standard error of a sample std of n draws with kurtosis κ is σ√((κ−1)/(4n)) (κ = 2.36 for the ±2σ
truncated normal, 1.8 for the uniform), recorded per tensor in params.json.

Thresholds (stated before any run):
  bert       |pooled std / (0.8796 · 0.02) − 1| ≤ tol, tol = max(0.01, 5 SE) over the pooled draws;
  truncated  every BERT tensor's max |x| ≤ 2 · 0.02 (the truncation bound);
  power      tol < half the gap to the alternative "the realized std is the nominal 0.02" (1/0.8796 − 1 = 13.7%),
             else INCONCLUSIVE (too few draws to tell the two apart);
  xavier     every Xavier kernel |std / xavier_std − 1| ≤ max(0.01, 5 SE of that tensor).
REPRODUCED if bert, truncated and xavier hold with power; NOT_REPRODUCED if one fails; INCONCLUSIVE if a run crashed
or the test has no power.
"""

import math

import numpy as np

from experiments.claims import base, figures
from init.math import truncated_normal_std_factor, xavier_std

BERT_RANGE = 0.02
REL_TOL, N_SE = 0.01, 5.0
NOT_MATRICES = ("norm_scale", "norm_bias", "bias", "residual_scale")  # ones / zeros under every scheme
NOT_XAVIER = ("embedding", "position", *NOT_MATRICES)  # the xavier scheme draws tables N(0, 1/d) (init/schemes.py)
FACTOR = truncated_normal_std_factor()
THRESHOLDS = {
    "bert": f"|pooled std/({FACTOR:.4f}·{BERT_RANGE}) − 1| ≤ max({REL_TOL}, {N_SE:g} SE)",
    "truncated": f"max |x| ≤ 2·{BERT_RANGE} for every BERT tensor",
    "power": f"the bert tolerance < half the gap to the nominal {BERT_RANGE} ({1 / FACTOR - 1:.1%}), else inconclusive",
    "xavier": f"every Xavier kernel: |std/xavier_std(fan_in, fan_out) − 1| ≤ max({REL_TOL}, {N_SE:g} SE)",
}


def _bert(runs: list[base.Run]) -> dict:
  tensors = [p for r in runs for p in r.analysis("params") if p["role"] not in NOT_MATRICES]
  n = np.asarray([p["n"] for p in tensors], np.float64)
  second = np.asarray([p["std"] ** 2 + p["mean"] ** 2 for p in tensors])
  pooled = math.sqrt(float(np.sum(n * second) / n.sum()))
  kurt = float(np.sum(n * np.asarray([p["kurtosis"] for p in tensors])) / n.sum())
  se_rel = math.sqrt((kurt - 1) / (4 * n.sum()))
  return dict(
      pooled_std=pooled,
      predicted=FACTOR * BERT_RANGE,
      ratio=pooled / BERT_RANGE,
      rel_error=pooled / (FACTOR * BERT_RANGE) - 1,
      tol=max(REL_TOL, N_SE * se_rel),
      se_rel=se_rel,
      kurtosis=kurt,
      n=int(n.sum()),
      max_abs=max(p["max_abs"] for p in tensors),
      per_tensor=[dict(path=p["path"], n=p["n"], std=p["std"], max_abs=p["max_abs"]) for p in tensors],
  )


def _xavier(runs: list[base.Run]) -> dict:
  rows = []
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
              tol=max(REL_TOL, N_SE * p["std_error"] / p["std"]),
          )
      )
  square = [x for x in rows if x["fan_in"] == x["fan_out"]]
  return dict(
      kernels=rows,
      worst_excess=max(abs(x["rel_error"]) - x["tol"] for x in rows),
      square_d=square[0]["fan_in"] if square else None,
      square_std=float(np.mean([x["std"] for x in square])) if square else None,
      square_target=square[0]["target"] if square else None,
  )


def measure(results: base.Results) -> dict:
  out: dict = {"crashed": base.crashed(results.runs)}
  if out["crashed"]:
    return out
  out["bert"] = _bert(results.select({"init.scheme": "bert"}))
  out["xavier"] = _xavier(results.select({"init.scheme": "xavier"}))
  out["truncation_factor"] = FACTOR
  return out


def verdict(m: dict) -> base.Verdict:
  bad = base.crashed_verdict(m)
  if bad:
    return bad
  b, x = m["bert"], m["xavier"]
  gap = 1 / m["truncation_factor"] - 1
  reason = (
      f"BERT 0.02 realizes {b['pooled_std']:.5f} = {b['ratio']:.4f}·0.02 over {b['n']:,} draws (closed form "
      f"{b['predicted']:.5f}; error {b['rel_error']:+.2%}, tolerance {b['tol']:.2%}); max |x| = {b['max_abs']:.4f} "
      f"(bound {2 * BERT_RANGE}); Xavier kernels' worst |error| − tolerance = {x['worst_excess']:+.2%}"
  )
  if x["square_d"]:
    reason += (
        f"; {x['square_d']}×{x['square_d']} Xavier realizes {x['square_std']:.5f} "
        f"(closed form {x['square_target']:.5f})"
    )
  # The truncation bound and the Xavier check do not depend on the pooled std's power: decided first.
  ok = {
      "truncated": b["max_abs"] <= 2 * BERT_RANGE * (1 + 1e-6),
      "xavier": x["worst_excess"] <= 0,
  }
  if all(ok.values()) and b["tol"] >= gap / 2:
    return base.Verdict(
        base.INCONCLUSIVE, reason + f"; the tolerance {b['tol']:.1%} cannot separate 0.8796σ from σ ({gap:.1%} apart)"
    )
  ok["bert"] = abs(b["rel_error"]) <= b["tol"]
  if all(ok.values()):
    return base.Verdict(base.REPRODUCED, reason)
  return base.Verdict(base.NOT_REPRODUCED, reason + f"; failing: {[k for k, v in ok.items() if not v]}")


def figure(m: dict, results: base.Results, out_dir: str, settings: str) -> list[str]:
  if m.get("crashed"):
    return []
  fig, (ax0, ax1) = figures.plt.subplots(1, 2, figsize=(10, 4.2))
  b = m["bert"]
  n = np.asarray([t["n"] for t in b["per_tensor"]])
  ax0.scatter(n, [t["std"] / BERT_RANGE for t in b["per_tensor"]], s=12, color="C0", label="each tensor: std / 0.02")
  ax0.axhline(m["truncation_factor"], color="C0", lw=1, label=rf"truncated $\pm2\sigma$: {m['truncation_factor']:.4f}")
  lo, hi = m["truncation_factor"] * (1 - b["tol"]), m["truncation_factor"] * (1 + b["tol"])
  ax0.axhspan(lo, hi, color="C0", alpha=0.12, label=f"tolerance of the pooled std ({b['tol']:.1%})")
  ax0.axhline(b["ratio"], color="k", ls="--", lw=1, label=f"pooled: {b['ratio']:.4f}")
  ax0.axhline(1.0, color="C3", lw=1, label=r"nominal $\sigma$ (no truncation loss)")
  ax0.set_xscale("log")
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
        label=f"{x['square_d']}×{x['square_d']}: {x['square_target']:.4f}",
    )
  ax1.axhline(b["pooled_std"], color="C0", ls="--", lw=1, label=f"BERT 0.02 realized: {b['pooled_std']:.4f}")
  ax1.set_xscale("log")
  ax1.set_yscale("log")
  ax1.set_xlabel("Xavier closed form")
  ax1.set_ylabel("realized std")
  ax1.set_title("xavier scheme: kernels against the closed form", fontsize=9)
  ax1.legend(fontsize=7)
  headline = f"Realized std of the model's parameters at init: bert scheme pooled {b['pooled_std']:.5f}"
  if x["square_d"]:
    headline += f"; xavier {x['square_d']}×{x['square_d']} kernels {x['square_std']:.5f}"
  figures.suptitle(fig, headline, settings)
  return [figures.save(fig, out_dir, "truncated_normal.png")]


def summary(m: dict) -> dict:
  if m.get("crashed"):
    return {}
  out = {"trunc std / σ": m["bert"]["ratio"], "BERT 0.02 realized": m["bert"]["pooled_std"]}
  if m["xavier"]["square_d"]:
    out[f"Xavier d={m['xavier']['square_d']} realized"] = m["xavier"]["square_std"]
  return out


CLAIM = base.Claim(
    name="truncated_normal",
    number=1,
    statement=(
        "A normal truncated at ±2σ realizes std 0.8796σ; BERT's initializer_range 0.02 is really 0.0176; Xavier for "
        "d = 768 is 0.0361."
    ),
    source="Su 2021b (BERT's 0.02); Devlin et al. 2019; Glorot & Bengio 2010 eq. 12; docs/science.md §1–2",
    paper_scale="BERT-base tensors (d = 768)",
    thresholds=THRESHOLDS,
    measure=measure,
    verdict=verdict,
    figure=figure,
    summary=summary,
)
