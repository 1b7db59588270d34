"""Trains every given experiment config at the tiny preset for 20 steps under FSDP on 2 devices, resumes it from
its step-10 checkpoint, and prints a JSON line per config. Run by tests/test_config_training.py with
XLA_FLAGS=--xla_force_host_platform_device_count=2:

    python tests/scripts/config_train.py WORKDIR CONFIG.py [CONFIG.py ...]

Per config (its rules as written, sizes from `model.preset='tiny'`, the synthetic 'embedded' data, `mesh.fsdp=2`; a
decaying schedule's horizon set past its warmup; 1 layer per stack instead of the preset's 2 when no rule of the config
reads a layer's index or the depth, `tests.depth_rules.reads_depth`: half the program to trace and compile, the same
rules applied):
{"config", "layers" (per stack), "mesh", "losses" (steps 1..20), "resumed_from", "resumed_losses" (11..20 after
cutting the run back to its step-10 checkpoint), "same_params" (the resumed run's final parameters, optimizer state
and variables equal the uninterrupted run's bit for bit), "sharded" (the [V, D] token embedding's D is split over the
2 devices)} or, when the run raised, {"config", "error"}.
"""

import dataclasses
import importlib.util
import json
import os
import pathlib
import shutil
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from tests.depth_rules import reads_depth  # noqa: E402
from train import config as config_lib  # noqa: E402
from train import loop  # noqa: E402
from train.metrics import read_metrics  # noqa: E402
from train.schedules import DECAYING_SCHEDULES  # noqa: E402

SIZE_KEYS = ("num_encoder_layers", "num_decoder_layers", "d_model", "num_heads", "d_ff", "head_dim")


def tiny(path: str):
  """The config of `path` with the tiny preset's sizes, 20 steps, checkpoints at 10 and 20, FSDP over 2 devices."""
  spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  config.model.preset = "tiny"
  for key in SIZE_KEYS:
    config.model[key] = None
  if config.data.name != "embedded":  # the user's data folder: the synthetic task here, as tests/test_configs.py does
    config.data.name = "embedded"
  d = config.data
  d.embedded.num_train, d.embedded.num_eval, d.max_eval_loss_examples = 400, 16, 16
  d.batch_size = d.eval_batch_size = 8
  t = config.train
  t.num_steps, t.log_every, t.eval_every, t.checkpoint_every, t.keep_checkpoints = 20, 1, 1000, 10, 3
  t.num_decode_examples, t.eval_at_init, t.grad_norms_every, t.curvature_every = 0, False, 0, 0
  config.analysis.at_init = False
  if config.optim.schedule in DECAYING_SCHEDULES and not config.optim.decay_steps:  # a horizon past its warmup
    config.optim.decay_steps = config.optim.warmup_steps + t.num_steps
  config.mesh.fsdp = 2
  if not config_reads_depth(config):  # a depth-free rule is the same rule at 1 layer per stack
    config.model.num_encoder_layers = config.model.num_decoder_layers = 1
  return config


def config_reads_depth(config) -> bool:
  """`tests.depth_rules.reads_depth` of the config's typed model (any vocabulary: no rule reads it across depths) and
  init sections."""
  resolved = config_lib.resolve(config, process_count=1)
  return reads_depth(dataclasses.replace(resolved.model, vocab_size=64), resolved.init)


def run(workdir: pathlib.Path, path: str) -> dict:
  exp = loop.setup(tiny(path), str(workdir / "run"))
  embedding = exp.state.params["token_embedding"]["embedding"]
  mc = exp.model.config
  out = {"layers": {s: mc.num_layers(s) for s in mc.stacks}, "mesh": dict(exp.mesh.shape)}
  out["sharded"] = embedding.addressable_shards[0].data.shape[1] * 2 == embedding.shape[1]
  final = loop.train_and_evaluate(exp)
  out["losses"] = [r["loss"] for r in read_metrics(str(workdir / "run"), split="train")]
  shutil.copytree(workdir / "run", workdir / "cut")
  shutil.rmtree(workdir / "cut" / "checkpoints" / "20")
  again = loop.setup(tiny(path), str(workdir / "cut"))
  out["resumed_from"] = again.start_step
  resumed = loop.train_and_evaluate(again)
  out["resumed_losses"] = [r["loss"] for r in read_metrics(str(workdir / "cut"), split="train") if r["step"] > 10]
  leaves = lambda s: jax.tree.leaves((s.params, s.opt_state, s.variables))
  out["same_params"] = all(
      np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(leaves(final), leaves(resumed), strict=True)
  )
  return out


def main(workdir: str, paths: list[str]) -> None:
  # One persistent compilation cache for the configs of this process: a resumed run compiles nothing again.
  jax.config.update("jax_compilation_cache_dir", os.path.join(workdir, "jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  for i, path in enumerate(paths):
    try:
      record = run(pathlib.Path(workdir) / str(i), path)
    except Exception:  # noqa: BLE001 (reported per config, the other configs still run)
      record = {"error": traceback.format_exc()[-3000:]}
    print(json.dumps({"config": os.path.basename(path), **record}), flush=True)


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2:])
