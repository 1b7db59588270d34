"""Claim 5 (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture", Fig. 3 and Theorem 1):
at init the per-layer gradient norm grows toward the output for Post-LN and is flat for Pre-LN; the gradient of
the last layer's FFN weight W^{2,L} is O(d·√(ln d)) for Post-LN (independent of depth L) and O(d·√(ln d / L)) for
Pre-LN.

(a) Encoder-decoder, Xavier, ReLU, Post-LN vs Pre-LN: ‖∂L/∂W‖_F of each layer's FFN matrices W¹ (mlp_in) and W²
(mlp_out), mean over seeds × Multi30k batches (`analysis.gradients`). Growth across a stack = exp(slope·(L−1)) of a
least-squares line through log-norm vs layer index.
(b) N = M = L ∈ depths: ‖∂L/∂W^{2,L}‖ of the decoder's last layer (the layer feeding the output), slope of a line
through log-norm vs log L.

Thresholds: (a) Post-LN growth ≥ 1.5 for W¹ and W² in both stacks; Pre-LN growth within ×/÷1.5 (flat) for all four.
(b) Post-LN slope in [−0.2, 0.2] (≈ constant); Pre-LN slope in [−0.75, −0.25] (≈ −1/2).
"""

import numpy as np

from analysis import gradients as grad_lib
from analysis.reproduce import figures, inputs
from analysis.reproduce.result import NOT_REPRODUCED, REPRODUCED, Outcome
from train.loss import make_loss_fn

SCALES = {
    "tiny": dict(
        model=dict(num_encoder_layers=3, num_decoder_layers=3, d_model=64, num_heads=2, d_ff=128),
        depth_model=dict(d_model=32, num_heads=2, d_ff=64),
        depths=(2, 4, 8),
        batches=1,
        batch_size=8,
        length=16,
        seeds=(0,),
    ),
    "cpu": dict(
        model=dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, num_heads=8, d_ff=2048),
        depth_model=dict(d_model=256, num_heads=4, d_ff=1024),
        depths=(2, 4, 8, 16),
        batches=2,
        batch_size=32,
        length=32,
        seeds=(0, 1),
    ),
}
GROWTH = 1.5
POST_SLOPE = (-0.2, 0.2)
PRE_SLOPE = (-0.75, -0.25)
ROLES = ("mlp_in", "mlp_out")


def _profile(config, model_overrides, seeds, batches, vocab):
  """Mean grad norm per (stack, role) -> per-layer list, over seeds × batches."""
  records = []
  loss_fn = None
  for seed in seeds:
    model, variables = inputs.model_and_variables(
        config, model_overrides, dict(scheme="xavier"), vocab, seed, batches[0]
    )
    if loss_fn is None:  # one loss function per model config: every seed and batch shares its compilation
      loss_fn = make_loss_fn(model)
    for b in batches:
      records.append(grad_lib.per_layer_grad_norms(loss_fn, variables["params"], b, roles=ROLES))
  agg = grad_lib.aggregate_grad_norms(records)
  out = {}
  for r in agg:
    if r["sublayer"] == "mlp":
      out.setdefault(f"{r['stack']}/{r['role']}", {})[r["layer"]] = r["norm_mean"]
  return {k: [v[i] for i in sorted(v)] for k, v in out.items()}


def _growth(norms):
  x = np.arange(len(norms))
  slope = np.polyfit(x, np.log(norms), 1)[0]
  return float(np.exp(slope * (len(norms) - 1)))


def run(config, scale: str, seeds, workdir: str) -> Outcome:
  sc = SCALES[scale]
  batches, vocab, data_desc = inputs.batches(config, scale, workdir, sc["batches"], sc["batch_size"], sc["length"])
  profiles, growth = {}, {}
  for pos in ("post", "pre"):
    profiles[pos] = _profile(config, {**sc["model"], "norm_position": pos}, seeds, batches, vocab)
    growth[pos] = {k: _growth(v) for k, v in profiles[pos].items()}
  last, slopes = {}, {}
  for pos in ("post", "pre"):
    last[pos] = []
    for depth in sc["depths"]:
      mo = {**sc["depth_model"], "num_encoder_layers": depth, "num_decoder_layers": depth, "norm_position": pos}
      last[pos].append(_profile(config, mo, seeds, batches, vocab)["decoder/mlp_out"][-1])
    slopes[pos] = float(np.polyfit(np.log(sc["depths"]), np.log(last[pos]), 1)[0])
  checks = {
      "(a) Post-LN grows": all(g >= GROWTH for g in growth["post"].values()),
      "(a) Pre-LN flat": all(1 / GROWTH <= g <= GROWTH for g in growth["pre"].values()),
      "(b) Post-LN constant in L": POST_SLOPE[0] <= slopes["post"] <= POST_SLOPE[1],
      "(b) Pre-LN ~ L^-1/2": PRE_SLOPE[0] <= slopes["pre"] <= PRE_SLOPE[1],
  }

  fig, axes = figures.plt.subplots(1, 3, figsize=(13, 3.8))
  for ax, stack in zip(axes[:2], ("encoder", "decoder")):
    for pos, color in (("post", "C3"), ("pre", "C0")):
      for role, ls in zip(ROLES, ("--", "-")):
        y = profiles[pos][f"{stack}/{role}"]
        ax.plot(
            np.arange(1, len(y) + 1),
            y,
            ls=ls,
            marker="o",
            ms=3,
            color=color,
            label=f"{pos.capitalize()}-LN {'W¹' if role == 'mlp_in' else 'W²'}",
        )
    ax.set_yscale("log")
    ax.set_xlabel(f"{stack} layer")
    ax.set_ylabel("‖∂L/∂W‖_F at init")
    ax.legend(fontsize=7)
  for pos, color in (("post", "C3"), ("pre", "C0")):
    axes[2].plot(
        sc["depths"], last[pos], marker="o", color=color, label=f"{pos.capitalize()}-LN (slope {slopes[pos]:.2f})"
    )
  ref = np.array(sc["depths"], float)
  axes[2].plot(ref, last["pre"][0] * (ref / ref[0]) ** -0.5, "k:", lw=1, label="L^{-1/2}")
  axes[2].set_xscale("log", base=2)
  axes[2].set_yscale("log")
  axes[2].set_xlabel("layers L (encoder = decoder)")
  axes[2].set_ylabel("‖∂L/∂W^{2,L}‖ (decoder last FFN)")
  axes[2].legend(fontsize=7)
  fig_name = figures.save(fig, workdir, "grad_norms.png")

  failed = [k for k, ok in checks.items() if not ok]
  fmt = lambda d: ", ".join(f"{k} {v:.2f}" for k, v in d.items())
  reason = (
      f"growth first→last layer: Post-LN {fmt(growth['post'])}; Pre-LN {fmt(growth['pre'])}. "
      f"log-log slope of ‖∂L/∂W^(2,L)‖ vs L: Post-LN {slopes['post']:.3f}, Pre-LN {slopes['pre']:.3f}"
  )
  if failed:
    reason += f"; failing: {failed}"
  m, dm = sc["model"], sc["depth_model"]
  return Outcome(
      measured=dict(
          profiles=profiles,
          growth=growth,
          depths=list(sc["depths"]),
          last_ffn_norm=last,
          slopes=slopes,
          checks=checks,
          data=data_desc,
      ),
      summary={
          "Post-LN dec W² growth": growth["post"]["decoder/mlp_out"],
          "Pre-LN dec W² growth": growth["pre"]["decoder/mlp_out"],
          "Post-LN slope vs L": slopes["post"],
          "Pre-LN slope vs L": slopes["pre"],
      },
      thresholds={
          "(a) growth": f"Post-LN growth ≥ {GROWTH} for W¹, W² in both stacks; Pre-LN within ×/÷{GROWTH}",
          "(b) slope": f"Post-LN slope in {list(POST_SLOPE)}; Pre-LN slope in {list(PRE_SLOPE)}",
      },
      verdict=REPRODUCED if not failed else NOT_REPRODUCED,
      reason=reason,
      figures=[fig_name],
      scale_used=(
          f"(a) {m['num_encoder_layers']}+{m['num_decoder_layers']} layers, d = {m['d_model']}; (b) L ∈ "
          f"{list(sc['depths'])}, d = {dm['d_model']}; Xavier, ReLU; {data_desc}; {len(seeds)} seed(s)"
      ),
  )
