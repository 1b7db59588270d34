"""20 training steps through `train.loop.setup` + `train_and_evaluate` on one mesh layout; prints a JSON line.

Run by tests/test_fsdp.py with XLA_FLAGS=--xla_force_host_platform_device_count=4:

    python tests/scripts/fsdp_train.py WORKDIR LAYOUT [LAYOUT ...]

LAYOUT is `mesh.fsdp` (1: data parallel over the 4 devices; 4: 1 × 4; 2: 2 × 2), optionally with `:resume`: the run
is then cut back to its step-10 checkpoint (a copy of the workdir without checkpoint 20) and resumed to step 20.
Prints {"devices", LAYOUT's fsdp: {"mesh", "steps", "losses" (steps 1..20), "resumed_from", "resumed_losses"
(11..20, with `:resume`), "shards" (addressable shard shapes of a few parameters and of their Adam moments, after
setup, after training and after the restore)}}.
"""

import json
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import jax  # noqa: E402

from tests import tiny  # noqa: E402
from train import loop  # noqa: E402
from train.metrics import read_metrics  # noqa: E402

KERNEL = ("encoder", "layer_0", "mlp", "wi", "kernel")  # [D, F] = [64, 128], logical ("embed", "mlp")
EMBEDDING = ("token_embedding", "embedding")  # [V, D], logical ("vocab", "embed")
OUT = ("decoder", "layer_0", "self_attn", "out", "kernel")  # [H, K, D] = [4, 16, 64], ("heads", "kv", "embed")


def _get(tree, path):
  for k in path:
    tree = tree[k]
  return tree


def _adam_mu(opt_state):
  """The first Adam moment (a params-shaped tree) wherever the optimizer chain keeps it."""
  found = []

  def visit(node):
    if hasattr(node, "mu") and hasattr(node, "nu"):
      found.append(node.mu)
    elif isinstance(node, (tuple, list)):
      for child in node:
        visit(child)
    elif isinstance(node, dict):
      for child in node.values():
        visit(child)
    elif hasattr(node, "inner_state"):
      visit(node.inner_state)

  visit(opt_state)
  return found[0]


def shards(state) -> dict:
  mu = _adam_mu(state.opt_state)
  return {
      "/".join(p): {
          "param": list(_get(state.params, p).addressable_shards[0].data.shape),
          "mu": list(_get(mu, p).addressable_shards[0].data.shape),
          "shape": list(_get(state.params, p).shape),
      }
      for p in (KERNEL, EMBEDDING, OUT)
  }


def config(fsdp: int):
  return tiny.run_config(
      **{
          "model.num_encoder_layers": 1,
          "model.num_decoder_layers": 1,
          "mesh.fsdp": fsdp,
          "train.num_steps": 20,
          "train.log_every": 1,
          "train.eval_every": 1000,
          "train.checkpoint_every": 10,
          "train.num_decode_examples": 0,
          "data.embedded.num_train": 1000,
          "data.embedded.num_eval": 32,
          "data.max_eval_loss_examples": 32,
      }
  )


def losses(workdir) -> list[float]:
  return [r["loss"] for r in read_metrics(str(workdir), split="train")]


def run(workdir: pathlib.Path, fsdp: int, resume: bool) -> dict:
  exp = loop.setup(config(fsdp), str(workdir / "run"))
  out = {"mesh": dict(exp.mesh.shape), "shards": {"setup": shards(exp.state)}}
  final = loop.train_and_evaluate(exp)
  out["shards"]["trained"] = shards(final)
  records = read_metrics(str(workdir / "run"), split="train")
  out["steps"], out["losses"] = [r["step"] for r in records], [r["loss"] for r in records]
  if resume:
    shutil.copytree(workdir / "run", workdir / "cut")
    shutil.rmtree(workdir / "cut" / "checkpoints" / "20")
    again = loop.setup(config(fsdp), str(workdir / "cut"))
    out["resumed_from"] = again.start_step
    out["shards"]["restored"] = shards(again.state)
    loop.train_and_evaluate(again)
    out["resumed_losses"] = [r["loss"] for r in read_metrics(str(workdir / "cut"), split="train") if r["step"] > 10]
  return out


def main(workdir: str, layouts: list[str]) -> None:
  out = {"devices": len(jax.devices())}
  for layout in layouts:
    fsdp, _, resume = layout.partition(":")
    out[fsdp] = run(pathlib.Path(workdir) / f"fsdp{fsdp}", int(fsdp), resume == "resume")
  print(json.dumps(out))


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2:])
