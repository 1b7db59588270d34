"""The training runner of claims 6, 8, 9, 10: one `train.loop` run per (variant, seed) on Multi30k, divergence
recorded as an outcome, and the per-variant summary the verdicts compare.

Contract: `run_variants(config, scale, seeds, workdir, variants)` trains every variant (a dict of dotted config
overrides, e.g. {"model.norm_position": "pre", "optim.warmup_steps": 0}) for every seed in a fresh
`<workdir>/runs/<variant>_seed<k>/` (its metrics.jsonl, status.json, checkpoint), catching `train.loop.Diverged`
(and any other exception, recorded with its message, so one broken run never ends the claim), and returns
{variant: summary} with per-seed final validation loss / BLEU, curves and divergence steps. The Multi30k
SentencePiece model is trained once into `<workdir>/tokenizer/` and copied into each run (the data folder is
read-only). Same data order (data.shuffle_seed) for every run; the seed changes init and dropout keys.
"""

import math
import os
import shutil
import time
import traceback

import ml_collections
import numpy as np
from absl import logging

import train.loop
from analysis.reproduce import figures, inputs
from train import data as data_lib
from train.metrics import read_metrics

SCALES = {
    "tiny": dict(
        model=dict(preset="tiny", num_encoder_layers=2, num_decoder_layers=2),
        num_steps=20,
        batch_size=16,
        eval_every=10,
        log_every=5,
        decode=8,
        eval_examples=64,
        seeds=(0,),
    ),
    "cpu": dict(
        model=dict(num_encoder_layers=6, num_decoder_layers=6, d_model=128, num_heads=4, d_ff=512),
        num_steps=300,
        batch_size=32,
        eval_every=100,
        log_every=10,
        decode=64,
        eval_examples=512,
        seeds=(0, 1),
    ),
}
LEARNING_RATE = 1e-3


def _set(cfg, dotted, value):
  *path, last = dotted.split(".")
  node = cfg
  for p in path:
    node = node[p]
  node[last] = value


def base_config(config, scale: str, num_steps: int) -> ml_collections.ConfigDict:
  """The training config shared by every variant of a claim at `scale` (Adam β2 0.98, lr 1e-3, no dropout)."""
  sc = SCALES[scale]
  cfg = ml_collections.ConfigDict(config.to_dict())
  cfg.mode = "train"
  cfg.model.update(sc["model"])
  cfg.data.dir = inputs.resolve_data_dir(cfg.data.dir)
  cfg.data.batch_size = sc["batch_size"]
  cfg.data.max_eval_loss_examples = sc["eval_examples"]
  cfg.optim.learning_rate = LEARNING_RATE
  t = cfg.train
  t.num_steps = num_steps
  t.eval_every = min(sc["eval_every"], num_steps)
  t.log_every = sc["log_every"]
  t.checkpoint_every = num_steps
  t.keep_checkpoints = 1
  t.num_decode_examples = sc["decode"]
  return cfg


def _run_one(cfg, run_dir, tokenizer_dir):
  if os.path.exists(run_dir):  # fresh every time: a rerun must not resume a finished or diverged run
    shutil.rmtree(run_dir)
  shutil.copytree(tokenizer_dir, os.path.join(run_dir, "tokenizer"))
  start = time.perf_counter()
  status, error = "finished", None
  try:
    train.loop.train_and_evaluate(train.loop.setup(cfg, run_dir))
  except train.loop.Diverged as e:
    status, error = "diverged", str(e)
  except Exception as e:  # noqa: BLE001  a broken run is recorded, never fatal for the claim
    status, error = "error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}"
  evals = read_metrics(run_dir, split="eval")
  train_records = [r for r in read_metrics(run_dir, split="train") if "loss" in r]
  diverged_step = next((r["step"] for r in train_records if r.get("diverged")), None)
  final = evals[-1] if evals and status == "finished" else {}
  return dict(
      status=status,
      error=error,
      diverged_step=diverged_step,
      seconds=time.perf_counter() - start,
      final_loss=final.get("loss", math.inf),
      final_bleu=final.get("bleu", 0.0),
      eval_curve=[(r["step"], r["loss"], r.get("bleu")) for r in evals],
      train_curve=[(r["step"], r["loss"]) for r in train_records],
  )


def run_variants(config, scale: str, seeds, workdir: str, variants: dict, num_steps: int = 0) -> dict:
  """Trains every variant × seed; returns {variant: summary} (see `summarize`).

  Args:
    config: the reproduction config (data, model and optim subtrees are the base).
    scale: 'tiny' or 'cpu' (sizes in SCALES).
    seeds: training seeds.
    workdir: the claim's folder.
    variants: name -> {dotted config key: value}.
    num_steps: optimizer steps per run (0: the scale's default).
  """
  num_steps = num_steps or SCALES[scale]["num_steps"]
  data_lib.build(inputs.data_config(config), workdir=workdir)  # trains and caches the tokenizer once
  tokenizer_dir = os.path.join(workdir, "tokenizer")
  out = {}
  for name, overrides in variants.items():
    runs = []
    for seed in seeds:
      cfg = base_config(config, scale, num_steps)
      cfg.train.seed = seed
      for k, v in overrides.items():
        _set(cfg, k, v)
      logging.info("reproduce: training %s seed %d", name, seed)
      runs.append(dict(seed=seed, **_run_one(cfg, os.path.join(workdir, "runs", f"{name}_seed{seed}"), tokenizer_dir)))
    out[name] = summarize(runs, overrides)
  return out


def summarize(runs: list, overrides: dict) -> dict:
  """Per-variant summary: mean/std of the final validation loss over seeds (inf if any seed failed), BLEU, failures."""
  losses = np.array([r["final_loss"] for r in runs], np.float64)
  failed = [r["seed"] for r in runs if r["status"] != "finished"]
  return dict(
      overrides=overrides,
      runs=runs,
      failed_seeds=failed,
      diverged_seeds=[r["seed"] for r in runs if r["status"] == "diverged"],
      errored_seeds=[r["seed"] for r in runs if r["status"] == "error"],
      mean_final_loss=float(losses.mean()) if not failed else math.inf,
      std_final_loss=float(losses.std()) if not failed else math.nan,
      mean_final_bleu=float(np.mean([r["final_bleu"] for r in runs])),
  )


def describe(scale: str, num_steps: int, seeds) -> str:
  sc = SCALES[scale]
  m = sc["model"]
  size = f"preset {m['preset']}" if "preset" in m else f"d = {m['d_model']}, {m['num_heads']} heads, d_ff {m['d_ff']}"
  return (
      f"{m['num_encoder_layers']}+{m['num_decoder_layers']} layers (unless the variant says), {size}; Multi30k "
      f"De→En, batch {sc['batch_size']}, {num_steps or sc['num_steps']} Adam steps at lr {LEARNING_RATE}, "
      f"{len(seeds)} seed(s)"
  )


def plot(groups: dict, workdir: str, name: str, title: str) -> str:
  """Train-loss and validation-loss curves of every variant and seed; diverged runs end with an ×."""
  fig, axes = figures.plt.subplots(1, 2, figsize=(11, 3.8))
  for i, (variant, summary) in enumerate(groups.items()):
    for j, r in enumerate(summary["runs"]):
      label = variant if j == 0 else None
      if r["train_curve"]:
        s, l = zip(*r["train_curve"])
        l = np.minimum(np.nan_to_num(np.asarray(l, float), nan=20.0, posinf=20.0), 20.0)
        axes[0].plot(s, l, color=f"C{i}", lw=1, label=label)
        if r["status"] != "finished":
          axes[0].plot(s[-1], l[-1], "x", color=f"C{i}", ms=8)
      if r["eval_curve"]:
        s, l, _ = zip(*r["eval_curve"])
        axes[1].plot(s, l, marker="o", ms=3, color=f"C{i}", label=label)
  axes[0].set_ylabel("train loss (clipped at 20)")
  axes[1].set_ylabel("validation loss")
  for ax in axes:
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
  fig.suptitle(title, fontsize=10)
  return figures.save(fig, workdir, name)
