"""Forward signal propagation measured on the model's recorded intermediates (docs/science.md §6).

Contract: `signal_profile(model, variables, batch)` applies the model with the `intermediates` collection mutable
(dropout off) and `signal_records(intermediates, batch)` turns the recordings into JSON-able records, one per
(stack, layer, sublayer), with statistics over NON-PADDING positions only (encoder: `inputs > 0`; decoder:
`targets > 0`, the model's own validity masks):

  second_moment_in / _out   E[x²] of the residual stream entering / leaving the sublayer (mean over valid positions
                            and features). Post-LN keeps it ≈ 1; Pre-LN's grows ~linearly with depth (Xiong et al.
                            2020, §3; Su 2021a §6's x_l = x_0/2^{l/2} + ... for Post-LN).
  branch_second_moment      E[F²] of the branch output F(x) (before dropout / residual scaling).
  branch_ratio              E[F²] / E[x_in²]: how much a branch changes the stream (the quantity Admin's ω and
                            ReZero/SkipInit control; Liu et al. 2020 eq. 6; Bachlechner et al. 2020).
  x0_coefficient            <x_out, x_0> / <x_0, x_0>: least-squares coefficient of the stack input x_0 in x_out
                            (inner products summed over valid positions and features). Pre-LN keeps ≈ 1 (identity
                            path intact); Post-LN decays like 2^{-l/2}.
  x0_cosine                 <x_out, x_0> / (‖x_out‖ ‖x_0‖).
  attn_entropy, attn_max_prob, attn_logit_std, attn_max_logit   per head [H] over valid query/key pairs (the max
                            |logit| is the growth QK-norm bounds; Wortsman et al. 2023 §3.1).
  attn_uniform_entropy      per head [H]: the entropy of uniform attention under the same mask, attn_entropy's ceiling.

A record with sublayer "embedding" and layer None gives x_0's second moment per stack; from `signal_profile`
(which has the parameters) also what x_0 is made of, `token_fraction` and `cos_positions` (analysis/embeddings.py;
absent for a packed batch).
"""

import functools
from typing import Any

import jax
import numpy as np

from analysis import embeddings

SUBLAYERS = ("self_attn", "cross_attn", "mlp")


def _value(tree, name):
  x = tree[name]
  return np.asarray(x[0] if isinstance(x, tuple) else x, np.float64)


def _masks(batch, stacks):
  masks = {}
  if "encoder" in stacks:
    masks["encoder"] = np.asarray(batch["inputs"]) > 0
  if "decoder" in stacks:
    masks["decoder"] = np.asarray(batch["targets"]) > 0
  return masks


def _second_moment(x_BxLxD, m_BxL):
  return float(np.sum(x_BxLxD**2 * m_BxL[..., None]) / (max(m_BxL.sum(), 1) * x_BxLxD.shape[-1]))


def _inner(a, b, m_BxL):
  return float(np.sum(a * b * m_BxL[..., None]))


def signal_records(intermediates: dict, batch: dict) -> list:
  """JSON-able signal-propagation records from the `intermediates` collection (see the module docstring).

  Args:
    intermediates: `model.apply(..., mutable=["intermediates"])[1]["intermediates"]`.
    batch: the batch that produced them (for the padding masks).

  Returns:
    A list of records {stack, layer, sublayer, num_positions, second_moment_in, second_moment_out,
    branch_second_moment, branch_ratio, x0_coefficient, x0_cosine[, attn_entropy, attn_max_prob,
    attn_logit_std, attn_uniform_entropy]}.
  """
  records = []
  stacks = [s for s in ("encoder", "decoder") if s in intermediates]
  if not stacks:
    raise ValueError(
        f"intermediates has no 'encoder' or 'decoder' stack (keys {sorted(intermediates)}); "
        "apply the model with mutable=['intermediates']"
    )
  masks = _masks(batch, stacks)
  for stack in stacks:
    tree, m = intermediates[stack], masks[stack].astype(np.float64)
    x0 = _value(tree, "stream_0")
    x0_sq = _inner(x0, x0, m)
    records.append(
        dict(
            stack=stack,
            layer=None,
            sublayer="embedding",
            num_positions=int(m.sum()),
            second_moment_out=_second_moment(x0, m),
        )
    )
    layers = sorted((int(k.split("_")[1]) for k in tree if k.startswith("layer_")))
    for layer in layers:
      lt = tree[f"layer_{layer}"]
      for sub in SUBLAYERS:
        if f"{sub}_residual_in" not in lt:
          continue
        x_in, branch, x_out = (_value(lt, f"{sub}_{k}") for k in ("residual_in", "branch", "residual_out"))
        m_in = _second_moment(x_in, m)
        f_sq = _second_moment(branch, m)
        out_x0 = _inner(x_out, x0, m)
        out_sq = _inner(x_out, x_out, m)
        rec = dict(
            stack=stack,
            layer=layer,
            sublayer=sub,
            num_positions=int(m.sum()),
            second_moment_in=m_in,
            second_moment_out=_second_moment(x_out, m),
            branch_second_moment=f_sq,
            branch_ratio=f_sq / m_in if m_in > 0 else float("nan"),
            x0_coefficient=out_x0 / x0_sq if x0_sq > 0 else float("nan"),
            x0_cosine=out_x0 / np.sqrt(out_sq * x0_sq) if out_sq * x0_sq > 0 else float("nan"),
        )
        if sub in lt and isinstance(lt[sub], dict):  # attention statistics, per head
          for key, name in (
              ("entropy", "attn_entropy"),
              ("max_prob", "attn_max_prob"),
              ("logit_std", "attn_logit_std"),
              ("max_logit", "attn_max_logit"),
              ("uniform_entropy", "attn_uniform_entropy"),
          ):
            if key in lt[sub]:
              rec[name] = _value(lt[sub], key).tolist()
        records.append(rec)
  return records


@functools.partial(jax.jit, static_argnums=0)
def _intermediates(model, variables, batch):
  """The model's recorded intermediates; the model is static (Linen modules hash by value): compiled once per model."""
  return model.apply(variables, batch, deterministic=True, mutable=["intermediates"])[1]


def _host(tree: Any) -> Any:
  """`tree` as numpy on this host: whole arrays also where they are split over the devices of several processes
  (FSDP parameters, batch rows), gathered from every process (each process calls this: it is a collective)."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # noqa: PLC0415  (multi-process runs only)

  return multihost_utils.process_allgather(tree, tiled=True)


def signal_profile(model: Any, variables: dict, batch: dict) -> list:
  """Apply `model` (dropout off) recording intermediates and return `signal_records` for `batch`, each stack's
  embedding record with x_0's token fraction and cosine to the positions (`embeddings.input_stream`). Arrays split
  over several processes are gathered first (every process calls this and gets the same records)."""
  intermediates = _host(_intermediates(model, variables, batch)["intermediates"])
  batch = _host(batch)
  records = signal_records(intermediates, batch)
  stream = embeddings.input_stream(model, _host(variables), batch, intermediates)
  for r in records:
    if r["sublayer"] == "embedding" and r["stack"] in stream:
      r.update(token_fraction=stream[r["stack"]]["token_fraction"], cos_positions=stream[r["stack"]]["cos_positions"])
  return records
