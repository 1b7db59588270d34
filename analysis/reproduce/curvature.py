"""Claim 7 (Zhang & Mackey 2022, the slides' experiment; docs/science.md §9): at init, a 6-layer encoder-decoder
with Xavier init on Multi30k De→En pairs has a Hessian with larger top eigenvalues and a wider spectrum under Post-LN
than Pre-LN.

Per seed and placement: the Hessian of the token-mean loss over the union of the batches (`analysis.hessian.hvp_fn`,
forward-over-reverse), Lanczos with full reorthogonalization from a random start (`analysis.spectrum.
top_eigenvalues`): the top Ritz values with residual bounds, and the spectrum's extent [λ_min, λ_max] from the same
run's extreme Ritz values (Lanczos converges at both ends); the SLQ density (`spectral_density`) for the figure.

Thresholds (per seed), both decided with the Lanczos residual bounds of the Ritz values involved (`wider_beyond_bounds`,
`larger_beyond_bounds`): "larger" = λ_max(Post) − bound > λ_max(Pre) + bound (intervals separated); "wider" = the
width w = λ_max − λ_min, known to ± (bound of λ_max + bound of λ_min), is larger for Post-LN with the two intervals
separated: w(Post) − w(Pre) > (b_max + b_min)(Post) + (b_max + b_min)(Pre). Reproduced if both hold in every seed;
not reproduced if Post-LN's λ_max is not above Pre-LN's in any seed; otherwise inconclusive.
"""

import jax
import numpy as np

from analysis import hessian
from analysis.reproduce import figures, inputs
from analysis.reproduce.result import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Outcome
from analysis.spectrum import spectral_density, top_eigenvalues
from train.loss import make_loss_fn

SCALES = {
    "tiny": dict(
        model=dict(num_encoder_layers=2, num_decoder_layers=2, d_model=32, num_heads=2, d_ff=64),
        batches=1,
        batch_size=8,
        length=16,
        steps=20,
        probes=2,
        slq_steps=15,
        seeds=(0,),
    ),
    "cpu": dict(
        model=dict(num_encoder_layers=6, num_decoder_layers=6, d_model=128, num_heads=4, d_ff=512),
        batches=1,
        batch_size=32,
        length=32,
        steps=30,
        probes=2,
        slq_steps=20,
        seeds=(0, 1),
    ),
}
TOP_K = 3


def _analyze(config, mo, seed, batches, vocab, sc):
  model, variables = inputs.model_and_variables(config, mo, dict(scheme="xavier"), vocab, seed, batches[0])
  params = variables["params"]
  matvec = hessian.hvp_fn(make_loss_fn(model), params, batches)
  key = jax.random.key(1000 + seed)
  top = top_eigenvalues(matvec, params, TOP_K, num_steps=sc["steps"], key=key)
  k = int(top.lanczos.num_steps_taken)
  ritz = np.asarray(top.lanczos.ritz_values[:k], np.float64)
  bounds = np.asarray(top.lanczos.ritz_bounds[:k], np.float64)
  lo = int(np.argmin(ritz))
  dens = spectral_density(matvec, params, sc["slq_steps"], sc["probes"], jax.random.fold_in(key, 1))
  n = int(sum(np.size(x) for x in jax.tree.leaves(params)))
  return dict(
      top=np.asarray(top.values, np.float64).tolist(),
      top_bounds=np.asarray(top.bounds, np.float64).tolist(),
      separated=bool(top.separated),
      lambda_min=float(ritz[lo]),
      lambda_min_bound=float(bounds[lo]),
      width=float(np.asarray(top.values)[0] - ritz[lo]),
      num_params=n,
      density=dict(
          grid=np.asarray(dens.grid).tolist(), density=np.asarray(dens.density).tolist(), sigma=float(dens.sigma)
      ),
  )


def width_bound(r: dict) -> float:
  """Half-width of the interval around the width λ_max − λ_min: the residual bounds of both ends' Ritz values."""
  return r["top_bounds"][0] + r["lambda_min_bound"]


def larger_beyond_bounds(post: dict, pre: dict) -> bool:
  """λ_max(Post) larger than λ_max(Pre) with their residual-bound intervals separated."""
  return post["top"][0] - post["top_bounds"][0] > pre["top"][0] + pre["top_bounds"][0]


def wider_beyond_bounds(post: dict, pre: dict) -> bool:
  """Width (λ_max − λ_min) of Post-LN larger than Pre-LN's by more than the bounds of all four Ritz values."""
  return post["width"] - width_bound(post) > pre["width"] + width_bound(pre)


def run(config, scale: str, seeds, workdir: str) -> Outcome:
  sc = SCALES[scale]
  batches, vocab, data_desc = inputs.batches(config, scale, workdir, sc["batches"], sc["batch_size"], sc["length"])
  res = {
      pos: [_analyze(config, {**sc["model"], "norm_position": pos}, s, batches, vocab, sc) for s in seeds]
      for pos in ("post", "pre")
  }
  larger, wider, above = [], [], []
  for post, pre in zip(res["post"], res["pre"]):
    larger.append(larger_beyond_bounds(post, pre))
    wider.append(wider_beyond_bounds(post, pre))
    above.append(post["top"][0] > pre["top"][0])
  if all(larger) and all(wider):
    verdict = REPRODUCED
  elif not any(above):
    verdict = NOT_REPRODUCED
  else:
    verdict = INCONCLUSIVE
  per_seed = [
      f"seed {s}: λ_max {a['top'][0]:.4g} vs {b['top'][0]:.4g}, width {a['width']:.4g} ± {width_bound(a):.2g} vs "
      f"{b['width']:.4g} ± {width_bound(b):.2g}"
      for s, a, b in zip(seeds, res["post"], res["pre"])
  ]
  reason = (
      "Post-LN vs Pre-LN — " + "; ".join(per_seed) + f" (larger beyond bounds: {larger}, wider beyond bounds: {wider})"
  )

  fig, axes = figures.plt.subplots(1, 2, figsize=(11, 3.8))
  for pos, color in (("post", "C3"), ("pre", "C0")):
    d = res[pos][0]["density"]
    axes[0].plot(
        d["grid"], np.maximum(d["density"], 1e-8), color=color, label=f"{pos.capitalize()}-LN (seed {seeds[0]})"
    )
    for i, r in enumerate(res[pos]):
      x = np.arange(1, TOP_K + 1) + (0.1 if pos == "pre" else -0.1)
      axes[1].errorbar(
          x,
          r["top"],
          yerr=r["top_bounds"],
          fmt="o" if i == 0 else "s",
          color=color,
          capsize=3,
          label=f"{pos.capitalize()}-LN seed {seeds[i]}",
      )
  axes[0].set_yscale("log")
  axes[0].set_xlabel("eigenvalue")
  axes[0].set_ylabel("SLQ density")
  axes[1].set_xlabel("index i")
  axes[1].set_ylabel("top Ritz value ± bound")
  for ax in axes:
    ax.legend(fontsize=7)
  fig.suptitle("Hessian at init (Xavier)", fontsize=10)
  fig_name = figures.save(fig, workdir, "hessian_spectrum.png")
  m = sc["model"]
  mean = lambda pos, k: float(np.mean([r[k] if k != "top" else r["top"][0] for r in res[pos]]))
  return Outcome(
      measured=dict(post=res["post"], pre=res["pre"], larger=larger, wider=wider, data=data_desc),
      summary={
          "λ_max Post-LN": mean("post", "top"),
          "λ_max Pre-LN": mean("pre", "top"),
          "width Post-LN": mean("post", "width"),
          "width Pre-LN": mean("pre", "width"),
      },
      thresholds={
          "larger": "per seed λ_max(Post) − bound > λ_max(Pre) + bound (Lanczos residual bounds)",
          "wider": "per seed (λ_max − λ_min)(Post) − (b_max + b_min)(Post) > (λ_max − λ_min)(Pre) + "
          "(b_max + b_min)(Pre) (residual bounds of both ends' Ritz values)",
          "verdict": "reproduced: both in every seed; not reproduced: λ_max(Post) ≤ λ_max(Pre) in every "
          "seed; else inconclusive",
      },
      verdict=verdict,
      reason=reason,
      figures=[fig_name],
      scale_used=(
          f"{m['num_encoder_layers']}+{m['num_decoder_layers']} layers, d = {m['d_model']} "
          f"({res['post'][0]['num_params']:,} parameters); {data_desc}; Lanczos {sc['steps']} steps, SLQ "
          f"{sc['probes']} probes × {sc['slq_steps']} steps, float32; {len(seeds)} seed(s)"
      ),
  )
