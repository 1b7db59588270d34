"""The known-good baseline (issue 24, item 8): configs/multi30k_baseline.py's trained model on Multi30k's test set,
the record of it (reports/baseline/result.json), and the report section rendered from that record alone.

    python main.py --config=configs/multi30k_baseline.py --config.data.dir=<Multi30k folder> \
        --workdir=runs/multi30k_baseline            # train (~10 epochs; resumes), then test BLEU -> the record

The config's `mode` is 'baseline' (main.py): the run trains as in 'train', then `write_record` evaluates its latest
checkpoint on the test split and writes `<workdir>/result.json`, which reports/baseline/result.json is a copy of
(experiments/reproduce.py reads it there), so a result has one way to run: main.py.

Contract:
  * `evaluate_test(config, workdir)`: the workdir's latest checkpoint on every pair of test_2016_flickr, through
    train.loop's own evaluation with `data.eval_split='test'` (greedy decoding, train/decode.py's metrics): loss,
    accuracy, perplexity, `bleu` (sacreBLEU, cased), `bleu_lc` (lowercased), exact match, and the pairs decoded.
  * `training_summary(workdir)`: what the run's own files say: steps, the last validation record, the wall time
    from config.json (written when training starts) to status.json's 'finished', steps/s over that time.
  * `pairs_trained(config, steps)`: the training pairs in the first `steps` batches of the run's (packed) stream;
    the epochs are that over the 29,000 pairs of the split.
  * `section(record)`: the Markdown lines of the "Known-good baseline" section, from the record alone (what the
    tutorials published is part of the record: `PUBLISHED`).
"""

import copy
import json
import os
import time
from typing import Any, Optional

TRAIN_PAIRS = 29_000  # Multi30k task 1 train (Elliott et al. 2016)
TEST_PAIRS = 1_000  # test_2016_flickr
MACHINE = "2 CPU cores (XLA:CPU)"
PUBLISHED = [
    {
        "source": 'Ben Trevett, pytorch-seq2seq, notebook 6 "Attention is All You Need"',
        "url": "https://github.com/bentrevett/pytorch-seq2seq",
        "test_bleu": "36.09 (35-36 across the notebook's versions)",
        "metric": "torchtext bleu_score on lowercased spaCy tokens (compare bleu_lc)",
        "recipe": "3+3 layers, d 256, 8 heads, d_ff 512, dropout 0.1, Adam 5e-4, batch 128, clip 1, 10 epochs, Post-LN",
    },
    {
        "source": 'PyTorch tutorial "Language Translation with nn.Transformer and torchtext"',
        "url": "https://pytorch.org/tutorials/beginner/translation_transformer.html",
        "test_bleu": None,
        "metric": "none reported",
        "recipe": "3+3 layers of nn.Transformer, batch 128, Adam (0.9, 0.98, 1e-9) at a constant lr",
    },
]


def evaluate_test(config: Any, workdir: str, *, pairs: Optional[int] = None) -> dict:
  """The latest checkpoint of `workdir` evaluated on the first `pairs` (default all) test pairs (module docstring)."""
  import jax  # noqa: PLC0415 (the record and the section need no JAX)

  import train.evaluation  # noqa: PLC0415
  import train.loop  # noqa: PLC0415
  from train import decode as decode_lib  # noqa: PLC0415
  from train import step as step_lib  # noqa: PLC0415

  pairs = TEST_PAIRS if pairs is None else pairs
  config = copy.deepcopy(config)
  config.data.eval_split = "test"
  config.data.num_eval_examples = pairs
  config.data.max_eval_loss_examples = pairs
  config.train.num_decode_examples = pairs
  exp = train.loop.setup(config, workdir)
  if exp.start_step == 0:
    raise FileNotFoundError(f"{workdir}/checkpoints has no checkpoint to evaluate")
  c = exp.config.train
  eval_step = jax.jit(step_lib.make_eval_step(exp.model, mlm_mask_rate=c.mlm_mask_rate))
  decode = decode_lib.make_greedy_decode(exp.model, c.decode_max_length or exp.data.max_target_length)
  start = time.time()
  metrics = train.evaluation.evaluate(exp, eval_step, decode, exp.state.eval_variables())  # schedule-free: at x
  decoded = len(exp.data.eval_examples()[:pairs])
  return {**metrics, "pairs": decoded, "step": exp.start_step, "eval_time_s": time.time() - start}


def training_summary(workdir: str) -> dict:
  """Steps, the last validation record and the wall time of the run in `workdir` (module docstring)."""
  with open(os.path.join(workdir, "status.json"), encoding="utf-8") as f:
    status = json.load(f)
  if status["status"] != "finished":
    raise ValueError(f"{workdir}: status {status['status']!r} at step {status['step']}, not 'finished'")
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    evals = [r for r in map(json.loads, f) if r["split"] == "eval"]
  wall = status["time"] - os.path.getmtime(os.path.join(workdir, "config.json"))
  last = evals[-1]
  return {
      "steps": status["step"],
      "wall_time_s": wall,
      "steps_per_sec": status["step"] / wall,
      "validation": {k: last[k] for k in ("step", "loss", "accuracy", "bleu", "bleu_lc") if k in last},
      "validation_curve": [{k: r[k] for k in ("step", "loss", "bleu") if k in r} for r in evals],
  }


def pairs_trained(config: Any, steps: int, workdir: str) -> int:
  """Training pairs in the first `steps` global batches of the run's data stream (packed rows hold several)."""
  from train.data import build  # noqa: PLC0415

  data = build(config.data, workdir=workdir)  # the run's tokenizer (cached next to the data or in the workdir)
  it, total = data.train_iter(), 0
  for _ in range(steps):
    batch = next(it)
    if "targets_segmentation" in batch:
      total += sum(len(set(row[row > 0].tolist())) for row in batch["targets_segmentation"])
    else:
      total += int((batch["targets"] > 0).any(axis=1).sum())
  return total


def _bleu(value: Optional[float]) -> str:
  return "—" if value is None else f"{value:.1f}"


def section(record: dict) -> list[str]:
  """The "Known-good baseline" section's Markdown lines, from `record` (reports/baseline/result.json) alone."""
  test, val = record["test"], record["validation"]
  minutes = record["wall_time_s"] / 60
  lines = [
      "## Known-good baseline",
      "",
      f"A small Transformer trained on Multi30k De→En the way widely used tutorials train it ({record['recipe']}), "
      "to show that this code base trains a translation model to the quality the tutorials report.",
      "",
      "| test_2016_flickr | value |",
      "|---|---|",
      f"| sacreBLEU (cased, 13a) | **{_bleu(test['bleu'])}** |",
      f"| BLEU lowercased (13a) | {_bleu(test['bleu_lc'])} |",
      f"| test loss (nats/token) | {test['loss']:.3f} |",
      f"| pairs decoded (greedy) | {test['pairs']} |",
      "",
      f"Final validation loss {val['loss']:.3f} at step {val['step']}; {record['steps']} steps, "
      f"{record['epochs']:.1f} epochs of the {record['train_split_pairs']:,} training pairs, "
      f"{minutes:.0f} min on {record['machine']} ({record['steps_per_sec']:.2f} steps/s, evaluations included).",
      "",
      "Published for the same recipe:",
  ]
  for p in record["published"]:
    bleu = f"test BLEU {p['test_bleu']}, {p['metric']}" if p["test_bleu"] else "no BLEU reported"
    lines.append(f"- {p['source']} ({p['url']}): {bleu}.")
  lines += [
      "",
      "Their BLEU is on lowercased spaCy tokens, so it compares with the lowercased row, approximately: spaCy splits"
      " clitics and hyphenated words, 13a does not, and their vocabulary maps rare words to <unk>.",
      "",
      "```",
      *record["commands"],
      "```",
      "",
      f"Code: commit {record['provenance']['git_commit']}"
      + (" with uncommitted changes in the tree" if record["provenance"]["git_dirty"] else "")
      + "; every number above is in reports/baseline/result.json.",
  ]
  return lines


def build_record(test: dict, summary: dict, pairs: int, commands: list[str], provenance: dict, recipe: str) -> dict:
  """reports/baseline/result.json's dict (module docstring)."""
  return {
      "recipe": recipe,
      "machine": MACHINE,
      "commands": commands,
      "steps": summary["steps"],
      "epochs": pairs / TRAIN_PAIRS,
      "train_pairs_seen": pairs,
      "train_split_pairs": TRAIN_PAIRS,
      "wall_time_s": summary["wall_time_s"],
      "steps_per_sec": summary["steps_per_sec"],
      "validation": summary["validation"],
      "validation_curve": summary["validation_curve"],
      "test": test,
      "published": PUBLISHED,
      "provenance": provenance,
  }


RECIPE = (
    "3+3 layers, d 256, 8 heads, d_ff 512, dropout 0.1, Pre-LN, Xavier, Adam 5e-4 constant, ~128 pairs a batch, clip 1"
)


def _portable_arg(arg: str) -> str:
  """'--flag=/abs/path/file' as '--flag=<file>' (the record states no machine path); other arguments as they are."""
  flag, eq, value = arg.partition("=")
  return f"{flag}=<{os.path.basename(value)}>" if eq and os.path.isabs(value) else arg


def write_record(config: Any, workdir: str, argv: list[str]) -> str:
  """Evaluates `workdir`'s latest checkpoint on the test split, writes the record (`build_record`) to
  `<workdir>/result.json` and returns its path; `argv` (main.py's arguments) is the command the record states."""
  from experiments import provenance as provenance_lib  # noqa: PLC0415

  test = evaluate_test(config, workdir)
  summary = training_summary(workdir)
  pairs = pairs_trained(config, summary["steps"], workdir)
  # A flag's absolute path (a scratch file, this machine's data folder) is this machine's: the record names the file.
  command = " ".join(["python main.py", *(_portable_arg(a) for a in argv)])
  record = build_record(test, summary, pairs, [command], provenance_lib.provenance(), RECIPE)
  path = os.path.join(workdir, "result.json")
  with open(path, "w", encoding="utf-8") as fh:
    json.dump(record, fh, indent=1)
    fh.write("\n")
  return path
