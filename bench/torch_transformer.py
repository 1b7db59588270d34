"""A PyTorch port of this project's encoder-decoder Transformer at its default settings, for bench/vs_pyhessian.py.

The same layers as `models.transformer.Transformer` with the defaults of `models.ModelConfig` (Post-LN, LayerNorm
with ε = 1e-6 and the one-pass variance E[x²] − E[x]² of Flax's LayerNorm, plain residuals, ReLU MLP with biases,
q·k/√d_k attention, sinusoidal positions, token embeddings scaled by √d and tied to the readout) and the same
parameter layout: one `nn.Parameter` per leaf of the Flax params, of the same shape, named by its path with "/"
replaced by "__" (`load_flax_params` copies a Flax tree in; `flat_names` lists them in `jax.tree.leaves` order).
The loss is `train.loss.make_loss_fn`'s: the mean token cross-entropy over non-padding targets (id 0 is padding).

`forward((inputs_BxS, targets_BxT))` takes the batch as PyHessian passes it (`model(inputs)` with `inputs` the
pair), and `token_cross_entropy(logits, targets)` is PyHessian's `criterion(outputs, targets)`.

Not a dependency of the project: torch is imported only by the benchmark (bench/requirements-pyhessian.txt).
"""

import math

import numpy as np
import torch
from torch import nn


def flat_names(num_encoder_layers: int, num_decoder_layers: int) -> list:
  """The Flax parameter paths ("/"-joined) in `jax.tree.leaves` order (dict keys sorted at every level)."""
  attn = [f"{p}/{k}" for p in ("key", "out", "query", "value") for k in ("bias", "kernel")]
  norm = lambda name: [f"{name}/bias", f"{name}/scale"]
  mlp = ["mlp/wi/bias", "mlp/wi/kernel", "mlp/wo/bias", "mlp/wo/kernel"]
  names = []
  for stack, num, sublayers in (
      ("decoder", num_decoder_layers, ("cross_attn", "mlp", "self_attn")),
      ("encoder", num_encoder_layers, ("mlp", "self_attn")),
  ):
    for i in range(num):
      for sub in sublayers:
        body = mlp if sub == "mlp" else [f"{sub}/{x}" for x in attn]
        names += [f"{stack}/layer_{i}/{x}" for x in body + norm(f"{sub}_norm")]
  return sorted(names) + ["token_embedding/embedding"]


def _layer_norm(x, scale, bias, eps):
  """Flax's LayerNorm: mean and E[x²] in one pass, var = max(E[x²] − E[x]², 0)."""
  mean = x.mean(-1, keepdim=True)
  var = torch.clamp((x * x).mean(-1, keepdim=True) - mean * mean, min=0.0)
  return (x - mean) * torch.rsqrt(var + eps) * scale + bias


def sinusoidal_positions(length: int, d: int, dtype=torch.float32) -> torch.Tensor:
  """`models.transformer.sinusoidal_positions` for positions 0..length−1, shape [length, d], in `dtype`: float32
  angles under JAX's default, float64 ones under `jax.enable_x64` (its NumPy float64 frequencies then promote)."""
  np_dtype = np.float64 if dtype == torch.float64 else np.float32
  half = d // 2
  inv_freq = np.exp(-np.log(10000.0) * np.arange(half) / max(half - 1, 1))
  angles = np.arange(length)[:, None].astype(np_dtype) * inv_freq.astype(np_dtype)
  pe = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
  return torch.from_numpy(np.pad(pe, ((0, 0), (0, d - 2 * half))).astype(np_dtype))


class Transformer(nn.Module):
  """The encoder-decoder of `models.transformer` at its defaults, parameters laid out as the Flax tree."""

  def __init__(self, *, vocab_size, num_encoder_layers, num_decoder_layers, d_model, num_heads, d_ff, eps=1e-6):
    super().__init__()
    self.vocab_size, self.d_model, self.num_heads, self.d_ff, self.eps = vocab_size, d_model, num_heads, d_ff, eps
    self.head_dim = d_model // num_heads
    self.layers = {"encoder": num_encoder_layers, "decoder": num_decoder_layers}
    self.names = flat_names(num_encoder_layers, num_decoder_layers)
    for name in self.names:
      self.register_parameter(name.replace("/", "__"), nn.Parameter(torch.zeros(self._shape(name))))

  def _shape(self, name):
    d, h, k, f = self.d_model, self.num_heads, self.head_dim, self.d_ff
    leaf, kind = name.split("/")[-2], name.split("/")[-1]
    if name == "token_embedding/embedding":
      return (self.vocab_size, d)
    if leaf in ("query", "key", "value"):
      return (d, h, k) if kind == "kernel" else (h, k)
    if leaf == "out":
      return (h, k, d) if kind == "kernel" else (d,)
    if leaf == "wi":
      return (d, f) if kind == "kernel" else (f,)
    if leaf == "wo":
      return (f, d) if kind == "kernel" else (d,)
    return (d,)  # a norm's scale or bias

  def p(self, name):
    return getattr(self, name.replace("/", "__"))

  def load_flax_params(self, flat: dict, dtype=torch.float32):
    """Copy {path: array} (the Flax params, paths "/"-joined) into the module as `dtype`; shapes must match."""
    missing = sorted(set(self.names) ^ set(flat))
    if missing:
      raise ValueError(f"the Flax params and the torch port differ in the leaves {missing[:5]}")
    for name in self.names:
      value = torch.from_numpy(np.array(flat[name], np.float32)).to(dtype)
      setattr(self, name.replace("/", "__"), nn.Parameter(value))
    return self

  def _attention(self, prefix, x_q_BxQxD, x_kv_BxKxD, mask_Bx1xQxK):
    proj = lambda x, name: torch.einsum("bld,dhk->blhk", x, self.p(f"{prefix}/{name}/kernel")) + self.p(
        f"{prefix}/{name}/bias"
    )
    q, k, v = proj(x_q_BxQxD, "query"), proj(x_kv_BxKxD, "key"), proj(x_kv_BxKxD, "value")
    logits = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.head_dim**-0.5
    masked = torch.full_like(logits, torch.finfo(logits.dtype).min)  # models/attention.py's masked logit
    probs = torch.softmax(torch.where(mask_Bx1xQxK, logits, masked), dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", probs, v)
    return torch.einsum("bqhk,hkd->bqd", out, self.p(f"{prefix}/out/kernel")) + self.p(f"{prefix}/out/bias")

  def _sublayer(self, prefix, kind, x, branch):
    """Post-LN: x ← LayerNorm(x + F(x)) (Vaswani et al. 2017)."""
    y = x + branch(x)
    return _layer_norm(y, self.p(f"{prefix}/{kind}_norm/scale"), self.p(f"{prefix}/{kind}_norm/bias"), self.eps)

  def _mlp(self, prefix, x):
    h = torch.relu(x @ self.p(f"{prefix}/mlp/wi/kernel") + self.p(f"{prefix}/mlp/wi/bias"))
    return h @ self.p(f"{prefix}/mlp/wo/kernel") + self.p(f"{prefix}/mlp/wo/bias")

  def _embed(self, tokens_BxL):
    x = self.p("token_embedding/embedding")[tokens_BxL] * math.sqrt(self.d_model)
    return x + sinusoidal_positions(tokens_BxL.shape[1], self.d_model, x.dtype)[None]

  def forward(self, batch):
    inputs_BxS, targets_BxT = batch
    valid_s, valid_t = inputs_BxS > 0, targets_BxT > 0
    enc_mask = (valid_s[:, :, None] & valid_s[:, None, :])[:, None]
    x = self._embed(inputs_BxS)
    for i in range(self.layers["encoder"]):
      pre = f"encoder/layer_{i}"
      x = self._sublayer(pre, "self_attn", x, lambda h: self._attention(f"{pre}/self_attn", h, h, enc_mask))
      x = self._sublayer(pre, "mlp", x, lambda h: self._mlp(pre, h))
    encoded = x
    t = targets_BxT.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    self_mask = (valid_t[:, :, None] & valid_t[:, None, :] & causal)[:, None]
    cross_mask = (valid_t[:, :, None] & valid_s[:, None, :])[:, None]
    decoder_in = torch.nn.functional.pad(targets_BxT, (1, 0))[:, :-1]  # shifted right, 0 as BOS
    y = self._embed(decoder_in)
    for i in range(self.layers["decoder"]):
      pre = f"decoder/layer_{i}"
      y = self._sublayer(pre, "self_attn", y, lambda h: self._attention(f"{pre}/self_attn", h, h, self_mask))
      y = self._sublayer(pre, "cross_attn", y, lambda h: self._attention(f"{pre}/cross_attn", h, encoded, cross_mask))
      y = self._sublayer(pre, "mlp", y, lambda h: self._mlp(pre, h))
    return y @ self.p("token_embedding/embedding").T  # tied readout (Flax's Embed.attend)


def build(
    flat: dict, *, vocab_size, num_encoder_layers, num_decoder_layers, d_model, num_heads, d_ff, dtype=torch.float32
) -> Transformer:
  """The port with the Flax params {path: array} copied in as `dtype` (float64: the reference of the port check)."""
  model = Transformer(
      vocab_size=vocab_size,
      num_encoder_layers=num_encoder_layers,
      num_decoder_layers=num_decoder_layers,
      d_model=d_model,
      num_heads=num_heads,
      d_ff=d_ff,
  )
  return model.load_flax_params(flat, dtype)


def token_cross_entropy(logits_BxTxV, targets_BxT):
  """Mean cross-entropy over non-padding targets (`train.loss.make_loss_fn`'s loss)."""
  losses = torch.nn.functional.cross_entropy(logits_BxTxV.transpose(1, 2), targets_BxT, reduction="none")
  weights = (targets_BxT > 0).to(losses.dtype)
  return (losses * weights).sum() / torch.clamp(weights.sum(), min=1.0)
