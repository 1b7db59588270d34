"""What the at-init claims (3 attention_scale, 5 grad_norms, 7 hessian_spectrum) share: the analysis settings of a
run and its model in words (for figure titles).

Contract: `analysis_settings(run)` reads only the run's `analysis/step_0/metadata.json` (written by analysis.run) and
says which batches, how many tokens and which dtype the analysis used; `model_size(run)` the run's resolved model.
"""

from experiments import study


def analysis_settings(run: study.Run) -> str:
  """'analysis on 2 batch(es) × 32 sequences (1,563 non-padding tokens per batch), float64' of one run."""
  meta = run.analysis("metadata")
  rows = meta["batch_shapes"][0]["targets"][0]
  tokens = meta["total_tokens"] / max(meta["num_batches"], 1)
  return (
      f"analysis on {meta['num_batches']} batch(es) × {rows} sequences ({tokens:,.0f} non-padding tokens per batch), "
      f"{meta['dtype']}"
  )


def model_size(run: study.Run) -> str:
  """'6+6 layers, d=512, 8 heads (d_k=64), d_ff=2048' from the run's resolved model config."""
  m = run.config()["model"]
  d_k = m["head_dim"] or m["d_model"] // m["num_heads"]
  layers = {
      "encoder_decoder": f"{m['num_encoder_layers']}+{m['num_decoder_layers']} layers",
      "encoder": f"{m['num_encoder_layers']}-layer encoder",
      "decoder": f"{m['num_decoder_layers']}-layer decoder",
  }[m["arch"]]
  return f"{layers}, d={m['d_model']}, {m['num_heads']} heads (d_k={d_k}), d_ff={m['d_ff']}"
