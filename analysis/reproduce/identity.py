"""Claim 4 (docs/science.md §6; Su 2021a §6, Su 2021b): at init Post-LN's identity path decays like 2^{-l/2} with
depth, Pre-LN's does not — measured against the prediction.

Derivation's setting (σ = 1 branches): one residual branch per layer with output variance equal to its input's,
independent of it. We build it from the model itself: an encoder whose attention output projections are zeroed (so
each layer's only branch is the MLP), MLP d→d→d with the normalized ReLU (E[relu(z)²]-corrected, docs/science.md §2) and
Xavier (= LeCun for square matrices) kernels, no biases. Measured per layer l: c_l = <x_l, x_0>/<x_0, x_0> over valid
positions (x_0 = the first MLP sublayer's input: in Post-LN the first norm, after the zeroed attention branch,
rescales the embeddings) and σ_l² = E[F_l²]/E[x_in²]. Post-LN predicts c_l = 2^{-l/2} and, with the measured σ_k²,
c_l = Π_{k≤l}(1 + σ_k²)^{-1/2}; Pre-LN predicts c_l = 1.

Thresholds: Post-LN |c_l − 2^{-l/2}| ≤ 0.15·2^{-l/2} + 0.01 for every layer (0.01: the sampling noise of
<F, x_0>/<x_0, x_0> at these sizes); Pre-LN |c_l − 1| ≤ 0.1 for every layer.
"""

import jax
import numpy as np

from analysis.reproduce import figures, inputs
from analysis.reproduce.result import NOT_REPRODUCED, REPRODUCED, Outcome

SCALES = {
    "tiny": dict(layers=6, d=128, batch_size=4, length=32, seeds=(0,)),
    "cpu": dict(layers=12, d=512, batch_size=32, length=32, seeds=(0, 1, 2)),
}
POST_REL, POST_ABS, PRE_ABS = 0.15, 0.01, 0.1


def _coefficients(config, norm_position, sc, seed, batch, vocab):
  mo = dict(
      arch="encoder",
      num_encoder_layers=sc["layers"],
      d_model=sc["d"],
      num_heads=4,
      d_ff=sc["d"],
      use_bias=False,
      norm_position=norm_position,
      activation="normalized_relu",
      tie_embeddings=True,
  )
  b = {"inputs": batch["inputs"]}  # what the encoder reads: this text, unmasked
  # init takes a batch as training is fed it, where an encoder's text is `targets` (init.params).
  model, variables = inputs.model_and_variables(
      config, mo, dict(scheme="xavier"), vocab, seed, {"targets": batch["inputs"]}
  )
  params = jax.tree.map(lambda x: x, variables["params"])
  for i in range(sc["layers"]):  # zero the attention branch: one unit-variance (MLP) branch per layer
    attn = params["encoder"][f"layer_{i}"]["self_attn"]
    attn["out"] = {**attn["out"], "kernel": jax.numpy.zeros_like(attn["out"]["kernel"])}
  _, state = model.apply({**variables, "params": params}, b, mutable=["intermediates"])
  inter = jax.device_get(state["intermediates"]["encoder"])
  m = (np.asarray(b["inputs"]) > 0)[..., None].astype(np.float64)
  x0 = np.asarray(inter["layer_0"]["mlp_residual_in"][0], np.float64)
  coeffs, sigma2 = [], []
  for i in range(sc["layers"]):
    layer = inter[f"layer_{i}"]
    x = np.asarray(layer["mlp_residual_out"][0], np.float64)
    f = np.asarray(layer["mlp_branch"][0], np.float64)
    x_in = np.asarray(layer["mlp_residual_in"][0], np.float64)
    coeffs.append(float(np.sum(x * x0 * m) / np.sum(x0 * x0 * m)))
    sigma2.append(float(np.sum(f * f * m) / np.sum(x_in * x_in * m)))
  return coeffs, sigma2


def run(config, scale: str, seeds, workdir: str) -> Outcome:
  sc = SCALES[scale]
  batches, vocab, data_desc = inputs.batches(config, scale, workdir, 1, sc["batch_size"], sc["length"])
  layers = np.arange(1, sc["layers"] + 1)
  measured = {}
  for pos in ("post", "pre"):
    runs = [_coefficients(config, pos, sc, s, batches[0], vocab) for s in seeds]
    c = np.mean([r[0] for r in runs], 0)
    s2 = np.mean([r[1] for r in runs], 0)
    measured[pos] = dict(
        coefficient=c.tolist(),
        per_seed=[r[0] for r in runs],
        branch_sigma2=s2.tolist(),
        predicted_general=np.cumprod(1 / np.sqrt(1 + s2)).tolist(),
    )
  pred_post = 2.0 ** (-layers / 2)
  measured["post"]["predicted"] = pred_post.tolist()
  measured["pre"]["predicted"] = [1.0] * len(layers)
  post_err = np.abs(np.array(measured["post"]["coefficient"]) - pred_post)
  post_ok = bool(np.all(post_err <= POST_REL * pred_post + POST_ABS))
  pre_err = np.abs(np.array(measured["pre"]["coefficient"]) - 1.0)
  pre_ok = bool(np.all(pre_err <= PRE_ABS))
  measured.update(
      post_max_rel_error=float(np.max(post_err / pred_post)),
      pre_max_abs_error=float(pre_err.max()),
      post_ok=post_ok,
      pre_ok=pre_ok,
      data=data_desc,
  )

  fig, ax = figures.plt.subplots(figsize=(6, 4))
  ax.plot(layers, measured["post"]["coefficient"], "o", color="C3", label="Post-LN measured")
  ax.plot(layers, pred_post, "-", color="C3", lw=1, label="2^{-l/2}")
  ax.plot(layers, measured["post"]["predicted_general"], ":", color="C3", lw=1, label="Π(1+σ_k²)^{-1/2} (measured σ)")
  ax.plot(layers, measured["pre"]["coefficient"], "s", color="C0", label="Pre-LN measured")
  ax.axhline(1.0, color="C0", lw=1)
  ax.set_yscale("log", base=2)
  ax.set_xlabel("layer l")
  ax.set_ylabel("<x_l, x_0> / <x_0, x_0>")
  ax.set_title(f"Identity path at init, d = {sc['d']}, σ = 1 branches", fontsize=9)
  ax.legend(fontsize=7)
  fig_name = figures.save(fig, workdir, "identity_path.png")

  c_post = measured["post"]["coefficient"]
  reason = (
      f"Post-LN c_l at l = 1, {len(layers)}: {c_post[0]:.4f}, {c_post[-1]:.5f} (predicted {pred_post[0]:.4f}, "
      f"{pred_post[-1]:.5f}; max relative error {measured['post_max_rel_error']:.3f}); Pre-LN max |c_l − 1| = "
      f"{measured['pre_max_abs_error']:.4f}"
  )
  if not (post_ok and pre_ok):
    reason += f"; failing: {[n for n, ok in (('post', post_ok), ('pre', pre_ok)) if not ok]}"
  return Outcome(
      measured=measured,
      summary={
          f"Post-LN c_{len(layers)}": c_post[-1],
          f"2^(-{len(layers)}/2)": float(pred_post[-1]),
          f"Pre-LN c_{len(layers)}": measured["pre"]["coefficient"][-1],
      },
      thresholds={
          "post": f"|c_l − 2^(-l/2)| ≤ {POST_REL}·2^(-l/2) + {POST_ABS} for every layer",
          "pre": f"|c_l − 1| ≤ {PRE_ABS} for every layer",
      },
      verdict=REPRODUCED if post_ok and pre_ok else NOT_REPRODUCED,
      reason=reason,
      figures=[fig_name],
      scale_used=f"encoder, {sc['layers']} layers, d = {sc['d']}, attention zeroed; {data_desc}; {len(seeds)} seed(s)",
  )
