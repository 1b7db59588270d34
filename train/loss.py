"""The training objective: token cross-entropy over non-padding targets, and BERT-style MLM masking.

`make_loss_fn(model, *, variables=None, reduction="mean")` returns `loss_fn(params, batch) -> scalar` with dropout
off — the function the analysis layer differentiates (Hessians, gradient profiles). `reduction="sum"` returns the
summed token loss, so averages over several batches can be weighted by their non-padding token counts
(`num_tokens`).

For the `encoder` architecture the batch is {"inputs": masked tokens, "targets": original tokens at the masked
positions, 0 elsewhere}; `mlm_batch` builds it from an LM batch (Devlin et al. 2019, §3.1: 15% of tokens, of which
80% become [MASK], 10% a random token, 10% stay).
"""

from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax


def token_cross_entropy(logits_BxLxV: jax.Array, targets_BxL: jax.Array, label_smoothing: float = 0.0):
  """(sum of per-token losses, number of non-padding tokens); padding (id 0) has weight 0."""
  weights = (targets_BxL > 0).astype(jnp.float32)
  vocab = logits_BxLxV.shape[-1]
  labels = optax.smooth_labels(jax.nn.one_hot(targets_BxL, vocab), label_smoothing) if label_smoothing else None
  if labels is None:
    losses = optax.softmax_cross_entropy_with_integer_labels(logits_BxLxV, targets_BxL)
  else:
    losses = optax.softmax_cross_entropy(logits_BxLxV, labels)
  return jnp.sum(losses * weights), jnp.sum(weights)


def token_z_loss(logits_BxLxV: jax.Array, targets_BxL: jax.Array) -> jax.Array:
  """Sum over non-padding targets of log²Z, Z = Σ_v exp(logit_v): the z-loss term (Chowdhery et al. 2022, "PaLM",
  §5 "Loss function": 10⁻⁴·log²Z; Wortsman et al. 2023, "Small-scale proxies...", §3.2, eq. 2). It pulls log Z,
  which softmax leaves free, towards 0, and with it the output logits' drift; the training loss adds
  `train.z_loss`·(this / number of tokens). Evaluation and the analyses read the cross-entropy alone, as they do
  with label smoothing."""
  weights = (targets_BxL > 0).astype(jnp.float32)
  log_z = jax.nn.logsumexp(logits_BxLxV.astype(jnp.promote_types(logits_BxLxV.dtype, jnp.float32)), axis=-1)
  return jnp.sum(jnp.square(log_z) * weights)


def num_tokens(batch: dict) -> jax.Array:
  """Number of non-padding target tokens in a batch (the weight of its loss in a multi-batch average)."""
  return jnp.sum(batch["targets"] > 0)


@jax.tree_util.register_pytree_node_class
class LossFn:
  """`loss_fn(params, batch) -> scalar` of a model with dropout off, as a pytree.

  The non-parameter collections are its leaves and the model and reduction its static part (Linen modules hash by
  value), so a jitted program taking it as an argument (e.g. the analysis layer's linearized gradient) is compiled
  once per model and shapes, not once per call of `make_loss_fn`.
  """

  def __init__(self, model: Any, extra: dict, reduction: str):
    self.model, self.extra, self.reduction = model, extra, reduction

  def __call__(self, params, batch):
    logits = self.model.apply({"params": params, **self.extra}, batch, deterministic=True)
    total, count = token_cross_entropy(logits, batch["targets"])
    return total if self.reduction == "sum" else total / jnp.maximum(count, 1.0)

  def tree_flatten(self):
    return (self.extra,), (self.model, self.reduction)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(aux[0], children[0], aux[1])


def make_loss_fn(model: Any, *, variables: Optional[dict] = None, reduction: str = "mean") -> LossFn:
  """`loss_fn(params, batch) -> scalar`: token cross-entropy of `model` with dropout off (a `LossFn` pytree).

  Args:
    model: a Flax module from `models.get_model`.
    variables: non-parameter collections the model needs (e.g. the scheduled residual's `residual_alpha`).
    reduction: "mean" (over non-padding target tokens) or "sum".
  """
  if reduction not in ("mean", "sum"):
    raise ValueError(f"reduction={reduction!r} is not one of ['mean', 'sum']")
  extra = dict(variables or {})
  extra.pop("params", None)
  return LossFn(model, extra, reduction)


@jax.tree_util.register_pytree_node_class
class LogitsFn:
  """`logits_fn(params, batch) -> logits [B, L, V]` of a model with dropout off, as a pytree (see `LossFn`)."""

  def __init__(self, model: Any, extra: dict):
    self.model, self.extra = model, extra

  def __call__(self, params, batch):
    return self.model.apply({"params": params, **self.extra}, batch, deterministic=True)

  def tree_flatten(self):
    return (self.extra,), (self.model,)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(aux[0], children[0])


def make_logits_fn(model: Any, *, variables: Optional[dict] = None) -> LogitsFn:
  """`logits_fn(params, batch)`: the logits of `model` with dropout off (the Gauss–Newton operator's map)."""
  extra = dict(variables or {})
  extra.pop("params", None)
  return LogitsFn(model, extra)


def mlm_batch(
    tokens_BxL: jax.Array,
    key: jax.Array,
    *,
    vocab_size: int,
    mask_id: int,
    mask_rate: float = 0.15,
    num_reserved: int = 3,
) -> dict:
  """BERT's masked-LM batch from token ids (Devlin et al. 2019 §3.1 and appendix A.1).

  Args:
    tokens_BxL: int32 tokens, 0 = padding.
    key: PRNG key.
    vocab_size: size of the vocabulary (random replacements are drawn from [num_reserved, vocab_size)).
    mask_id: the id used as [MASK].
    mask_rate: fraction of non-padding tokens selected for prediction.
    num_reserved: ids below this (pad, eos, unk) are never drawn as random replacements.

  Returns:
    {"inputs": corrupted tokens, "targets": original tokens at selected positions, 0 elsewhere}.
  """
  k_select, k_kind, k_random = jax.random.split(key, 3)
  real = tokens_BxL > 0
  selected = real & (jax.random.uniform(k_select, tokens_BxL.shape) < mask_rate)
  kind = jax.random.uniform(k_kind, tokens_BxL.shape)
  random_tokens = jax.random.randint(k_random, tokens_BxL.shape, num_reserved, vocab_size)
  corrupted = jnp.where(kind < 0.8, mask_id, jnp.where(kind < 0.9, random_tokens, tokens_BxL))
  inputs = jnp.where(selected, corrupted, tokens_BxL).astype(jnp.int32)
  return {"inputs": inputs, "targets": jnp.where(selected, tokens_BxL, 0).astype(jnp.int32)}
