"""Transformer stacks shared by all architectures: encoder-decoder, decoder-only LM and BERT-style encoder.

Dimension legend (used in names such as `x_BxLxD`): B batch, L sequence (Q queries, K keys when they differ; S source,
T target), D d_model, H heads, K head_dim (in attention), F d_ff, V vocabulary.

Every residual sublayer (self-attention, cross-attention, MLP) is one `_sublayer` call: the norm placement that
`models.placement` gives the sublayer (docs/science.md §6) around a `models.residual.Residual` merge:
- `post` (Vaswani et al. 2017; BERT): x ← Norm(x ⊕ F(x))
- `pre` (Xiong et al. 2020; GPT-2): x ← x ⊕ F(Norm(x)), plus a final Norm at the end of each stack
- `sandwich` (Ding et al. 2021, "CogView" §2.4; Peri-LN, Kim et al. 2025): x ← x ⊕ Norm(F(Norm(x))), plus a final Norm
- `reordered` (OLMo 2, OLMo Team 2025): x ← x ⊕ Norm(F(x)), plus a final Norm: Peri-LN without its input norm
- `none`: x ← x ⊕ F(x)
where ⊕ is the residual rule (plain, ReZero, SkipInit, scheduled α, DeepNorm, Admin, LayerScale, CompleteP). Mix-LN and
HybridNorm pick one of these per layer / sublayer; layer-norm scaling multiplies the input norm by 1/√l.

Batches follow Flax's wmt/lm1b examples: {"inputs": int32[B, S], "targets": int32[B, T]} (encoder-decoder),
{"targets": int32[B, T]} (decoder), {"inputs": int32[B, S]} (encoder); 0 is padding; optional packing keys
`{inputs,targets}_{segmentation,position}`. The decoder input is `targets` shifted right (0 as BOS).

When the `intermediates` collection is mutable, each sublayer records `residual_in`, `branch` and `residual_out`
and each stack records `stream_0` (its input x_0), so analyses measure signal propagation (Su 2021a §6, Su 2021b;
docs/science.md §6) from the model itself; attention layers add per-head logit std, entropy and max probability.
"""

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from models.activations import get_activation
from models.attention import MultiHeadAttention, softcap
from models.config import ModelConfig
from models.dense import Dense
from models.mlp import MLP
from models.norms import make_norm
from models.parameterization import default_kernel_init, hidden_multiplier, readout_multiplier
from models.placement import has_final_norm, input_norm_scale, sublayer_placement
from models.residual import Residual, deepnorm_constants, depth_multiplier, layerscale_init
from models.roles import declare


def sinusoidal_positions(positions_BxL: jax.Array, d: int) -> jax.Array:
  """Sinusoidal position encodings (Vaswani et al. 2017, §3.5) for integer positions, shape [B, L, D]."""
  half = d // 2
  inv_freq = np.exp(-np.log(10000.0) * np.arange(half) / max(half - 1, 1))
  angles_BxLxH = positions_BxL[..., None].astype(jnp.float32) * inv_freq
  pe = jnp.concatenate([jnp.sin(angles_BxLxH), jnp.cos(angles_BxLxH)], axis=-1)
  return jnp.pad(pe, ((0, 0), (0, 0), (0, d - 2 * half)))


def shift_right(targets_BxT: jax.Array, segmentation_BxT: Optional[jax.Array] = None) -> jax.Array:
  """Decoder inputs: targets shifted right by one with 0 as BOS; packed segments restart with BOS."""
  shifted = jnp.pad(targets_BxT, ((0, 0), (1, 0)))[:, :-1]
  if segmentation_BxT is not None:
    prev = jnp.pad(segmentation_BxT, ((0, 0), (1, 0)))[:, :-1]
    shifted = shifted * (segmentation_BxT == prev)
  return shifted


def _head_norm_type(config) -> str:
  """The norm of BERT's embedding and MLM-head norms, which a model has whatever its placement: the model's norm type,
  LayerNorm when that is 'none' (BERT's own)."""
  return "layernorm" if config.norm_type == "none" else config.norm_type


class Layer(nn.Module):
  """One encoder layer (self-attention, MLP) or decoder layer (causal self-attention, cross-attention, MLP)."""

  config: Any
  stack: str
  index: int = 0  # the layer's position in its stack, 0-based (Mix-LN's split, layer-norm scaling)

  def _sublayer(self, kind, x, branch_fn, deterministic):
    c = self.config
    alpha = 1.0
    if c.residual == "deepnorm":
      alpha = deepnorm_constants(c.arch, c.num_encoder_layers, c.num_decoder_layers)[self.stack][0]
    elif c.residual == "completep":
      alpha = depth_multiplier(c, self.stack)
    merge = Residual(
        kind=c.residual,
        sublayer=kind,
        deepnorm_alpha=alpha,
        skipinit_alpha=c.skipinit_alpha,
        alpha_init=c.alpha_init,
        layerscale_init=layerscale_init(c, self.stack) if c.residual == "layerscale" else 0.1,
        param_dtype=c.param_dtype,
        name=f"{kind}_residual",
    )
    drop = lambda h: nn.Dropout(c.dropout_rate)(h, deterministic=deterministic) if c.dropout_rate > 0 else h
    placement = sublayer_placement(c, self.stack, self.index, kind)
    # Sun et al. 2025, Eq. 8: the input norm's output × 1/√l at layer l (models.placement); 1 without the rule.
    scale = input_norm_scale(c, self.index)
    input_norm = lambda h: make_norm(c, f"{kind}_norm", kind)(h) * jnp.asarray(scale, h.dtype)
    if placement == "pre":
      branch = branch_fn(input_norm(x))
      out = merge(x, drop(branch))
    elif placement == "sandwich":
      branch = make_norm(c, f"{kind}_post_norm", kind)(branch_fn(input_norm(x)))
      out = merge(x, drop(branch))
    elif placement == "reordered":  # OLMo 2 (OLMo Team 2025): the norm on the branch output only
      branch = make_norm(c, f"{kind}_post_norm", kind)(branch_fn(x))
      out = merge(x, drop(branch))
    elif placement == "post":
      branch = branch_fn(x)
      out = make_norm(c, f"{kind}_norm", kind)(merge(x, drop(branch)))
    else:
      branch = branch_fn(x)
      out = merge(x, drop(branch))
    if self.is_mutable_collection("intermediates"):
      self.sow("intermediates", f"{kind}_residual_in", x)
      self.sow("intermediates", f"{kind}_branch", branch)
      self.sow("intermediates", f"{kind}_residual_out", out)
    return out

  @nn.compact
  def __call__(
      self, x_BxLxD, self_mask, *, positions_BxL=None, encoded_BxSxD=None, cross_mask=None, deterministic=True
  ):
    c = self.config
    attn = lambda name: MultiHeadAttention(c, name, name=name)
    rope = positions_BxL if c.position == "rope" else None  # RoPE on self-attention only (models.attention)
    x = self._sublayer(
        "self_attn",
        x_BxLxD,
        lambda h: attn("self_attn")(h, h, self_mask, rope_positions=rope, deterministic=deterministic),
        deterministic,
    )
    if encoded_BxSxD is not None:
      x = self._sublayer(
          "cross_attn",
          x,
          lambda h: attn("cross_attn")(h, encoded_BxSxD, cross_mask, deterministic=deterministic),
          deterministic,
      )
    return self._sublayer("mlp", x, lambda h: MLP(c, name="mlp")(h, deterministic=deterministic), deterministic)


class Stack(nn.Module):
  """Positions (+ embedding norm) + layers (+ final norm for pre/sandwich placements) of one stack; input is embedded
  tokens."""

  config: Any
  stack: str

  @nn.compact
  def __call__(self, x_BxLxD, positions_BxL, self_mask, *, encoded_BxSxD=None, cross_mask=None, deterministic=True):
    c = self.config
    if c.position == "learned":
      x_BxLxD = x_BxLxD + nn.Embed(
          c.max_len,
          c.d_model,
          embedding_init=declare(
              nn.initializers.normal(1.0), ("position", "embed"), role="position", sublayer="position"
          ),
          dtype=c.dtype,
          param_dtype=c.param_dtype,
          name="pos_embedding",
      )(positions_BxL)
    elif c.position == "sinusoidal":  # 'rope' adds nothing here: it rotates queries and keys (models.rope)
      x_BxLxD = x_BxLxD + sinusoidal_positions(positions_BxL, c.d_model).astype(x_BxLxD.dtype)
    if c.embedding_norm:
      # BERT's input representation (Devlin et al. 2019 §3; google-research/bert `embedding_postprocessor`):
      # LayerNorm(token + position embeddings), then dropout.
      x_BxLxD = make_norm(c, "embedding_norm", "embedding_norm", _head_norm_type(c))(x_BxLxD)
    if c.dropout_rate > 0:
      x_BxLxD = nn.Dropout(c.dropout_rate)(x_BxLxD, deterministic=deterministic)
    if self.is_mutable_collection("intermediates"):
      self.sow("intermediates", "stream_0", x_BxLxD)
    for i in range(c.num_layers(self.stack)):
      x_BxLxD = Layer(c, self.stack, i, name=f"layer_{i}")(
          x_BxLxD,
          self_mask,
          positions_BxL=positions_BxL,
          encoded_BxSxD=encoded_BxSxD,
          cross_mask=cross_mask,
          deterministic=deterministic,
      )
    if has_final_norm(c, self.stack):
      x_BxLxD = make_norm(c, "final_norm", "final_norm")(x_BxLxD)
    return x_BxLxD


def _positions(tokens_BxL, positions_BxL):
  if positions_BxL is not None:
    return positions_BxL
  return jnp.broadcast_to(jnp.arange(tokens_BxL.shape[1]), tokens_BxL.shape)


def _self_mask(valid_BxL, segmentation_BxL, causal):
  mask = nn.make_attention_mask(valid_BxL, valid_BxL)
  if causal:
    mask = nn.combine_masks(mask, nn.make_causal_mask(valid_BxL))
  if segmentation_BxL is not None:
    mask = nn.combine_masks(mask, nn.make_attention_mask(segmentation_BxL, segmentation_BxL, jnp.equal))
  return mask


class Transformer(nn.Module):
  """The model for every architecture; `__call__(batch)` returns logits [B, L, V] in float32 (float64 if
  the model computes in float64).

  Attributes:
    config: a frozen `ModelConfig`.
  """

  config: ModelConfig

  def setup(self):
    c = self.config
    self.token_embedding = nn.Embed(
        c.vocab_size,
        c.d_model,
        embedding_init=declare(nn.initializers.normal(1.0), ("vocab", "embed"), role="embedding", sublayer="embedding"),
        dtype=c.dtype,
        param_dtype=c.param_dtype,
    )
    if "encoder" in c.stacks:
      self.encoder = Stack(c, "encoder")
    if "decoder" in c.stacks:
      self.decoder = Stack(c, "decoder")
    if not c.tie_embeddings:
      self.head = Dense(
          c.vocab_size,
          use_bias=c.use_bias,
          multiplier=readout_multiplier(c, tied=False),
          kernel_init=default_kernel_init(c),
          axes=("embed", "vocab"),
          role="head",
          sublayer="head",
          dtype=c.dtype,
          param_dtype=c.param_dtype,
      )
    if c.arch == "encoder":
      self.mlm_transform = Dense(
          c.d_model,
          use_bias=c.use_bias,
          multiplier=hidden_multiplier(c, c.d_model),
          kernel_init=default_kernel_init(c),
          axes=("embed", "hidden"),
          role="head",
          sublayer="mlm_transform",
          dtype=c.dtype,
          param_dtype=c.param_dtype,
      )
      self.mlm_norm = make_norm(c, "mlm_norm", "mlm_head", _head_norm_type(c))
      self.mlm_bias = self.param(
          "mlm_output_bias",
          declare(nn.initializers.zeros, ("vocab",), role="bias", sublayer="mlm_head"),
          (c.vocab_size,),
          c.param_dtype,
      )

  @nn.nowrap
  def init(self, *args, **kwargs) -> dict:
    """`nn.Module.init` with the partitioning metadata stripped (`nn.unbox`): plain arrays, so init schemes, roles,
    Hessians and checkpoints see a plain pytree. `models.logical_axes` reads the metadata."""
    return nn.unbox(super().init(*args, **kwargs))

  def _embed(self, tokens_BxL):
    x = self.token_embedding(tokens_BxL)
    return x * jnp.asarray(np.sqrt(self.config.d_model), x.dtype) if self.config.scale_embeddings else x

  def _logits(self, x_BxLxD):
    c = self.config
    if c.arch == "encoder":
      # BERT's MLM head (docs/science.md §10): Dense + activation + LayerNorm, tied embedding, output bias.
      x_BxLxD = self.mlm_norm(get_activation(c.activation)(self.mlm_transform(x_BxLxD)))
    if c.tie_embeddings:
      logits = self.token_embedding.attend(x_BxLxD) * readout_multiplier(c, tied=True)
    else:
      logits = self.head(x_BxLxD)
    if c.arch == "encoder":
      logits = logits + self.mlm_bias.astype(logits.dtype)
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    return softcap(logits, c.final_logit_softcap)  # Gemma Team 2024, §2: c·tanh(z/c); 0 = off

  def encode(self, inputs_BxS, *, inputs_segmentation=None, inputs_position=None, deterministic=True):
    """Encoder output [B, S, D] for source tokens."""
    mask = _self_mask(inputs_BxS > 0, inputs_segmentation, causal=False)
    return self.encoder(
        self._embed(inputs_BxS), _positions(inputs_BxS, inputs_position), mask, deterministic=deterministic
    )

  def decode(
      self,
      decoder_tokens_BxT,
      decoder_valid_BxT,
      *,
      encoded_BxSxD=None,
      inputs_BxS=None,
      targets_segmentation=None,
      targets_position=None,
      inputs_segmentation=None,
      deterministic=True,
  ):
    """Logits [B, T, V] from decoder input tokens (already shifted) and their validity mask."""
    self_mask = _self_mask(decoder_valid_BxT, targets_segmentation, causal=True)
    cross_mask = None
    if encoded_BxSxD is not None:
      cross_mask = nn.make_attention_mask(decoder_valid_BxT, inputs_BxS > 0)
      if targets_segmentation is not None:
        cross_mask = nn.combine_masks(
            cross_mask, nn.make_attention_mask(targets_segmentation, inputs_segmentation, jnp.equal)
        )
    y = self.decoder(
        self._embed(decoder_tokens_BxT),
        _positions(decoder_tokens_BxT, targets_position),
        self_mask,
        encoded_BxSxD=encoded_BxSxD,
        cross_mask=cross_mask,
        deterministic=deterministic,
    )
    return self._logits(y)

  def __call__(self, batch: dict, *, deterministic: bool = True) -> jax.Array:
    c = self.config
    if c.arch == "encoder":
      return self._logits(
          self.encode(
              batch["inputs"],
              inputs_segmentation=batch.get("inputs_segmentation"),
              inputs_position=batch.get("inputs_position"),
              deterministic=deterministic,
          )
      )
    targets = batch["targets"]
    seg = batch.get("targets_segmentation")
    encoded = None
    if c.arch == "encoder_decoder":
      encoded = self.encode(
          batch["inputs"],
          inputs_segmentation=batch.get("inputs_segmentation"),
          inputs_position=batch.get("inputs_position"),
          deterministic=deterministic,
      )
    return self.decode(
        shift_right(targets, seg),
        targets > 0,
        encoded_BxSxD=encoded,
        inputs_BxS=batch.get("inputs"),
        targets_segmentation=seg,
        targets_position=batch.get("targets_position"),
        inputs_segmentation=batch.get("inputs_segmentation"),
        deterministic=deterministic,
    )
