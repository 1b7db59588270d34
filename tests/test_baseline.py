"""experiments/baseline.py: the section rendered from a hand-made record, the record's arithmetic, the training
summary read from a hand-made run folder, and the pairs counted in packed and unpacked batches against their EOS."""

import json
import os

import numpy as np
import pytest

from configs import default
from experiments import baseline
from train.data import build
from train.data.tokenizers import EOS_ID

RECORD = {
    "recipe": "3+3 layers, d 256",
    "machine": "2 CPU cores (XLA:CPU)",
    "commands": ["python main.py --config=configs/multi30k_baseline.py", "python -m experiments.baseline --x=1"],
    "steps": 2250,
    "epochs": 10.0241,
    "train_pairs_seen": 290_700,
    "train_split_pairs": 29_000,
    "wall_time_s": 2400.0,
    "steps_per_sec": 0.9375,
    "validation": {"step": 2250, "loss": 1.6543, "bleu": 38.2},
    "validation_curve": [],
    "test": {"bleu": 37.31, "bleu_lc": 39.04, "loss": 1.7012, "pairs": 1000},
    "published": baseline.PUBLISHED,
    "provenance": {"git_commit": "abc123", "git_dirty": True},
}


def test_section_renders_the_record_numbers_commands_and_the_tutorials():
  lines = baseline.section(RECORD)
  text = "\n".join(lines)
  assert lines[0] == "## Known-good baseline"
  assert "| sacreBLEU (cased, 13a) | **37.3** |" in lines
  assert "| BLEU lowercased (13a) | 39.0 |" in lines
  assert "| test loss (nats/token) | 1.701 |" in lines and "| pairs decoded (greedy) | 1000 |" in lines
  assert "Final validation loss 1.654 at step 2250; 2250 steps, 10.0 epochs of the 29,000 training pairs" in text
  assert "40 min on 2 CPU cores (XLA:CPU) (0.94 steps/s, evaluations included)" in text  # 2400 s
  assert "Ben Trevett, pytorch-seq2seq" in text and "test BLEU 36.09 (35-36" in text
  assert "PyTorch tutorial" in text and "no BLEU reported" in text
  assert lines.index("```") < lines.index(RECORD["commands"][0]) < lines.index(RECORD["commands"][1])
  assert "commit abc123 with uncommitted changes" in text
  clean = baseline.section({**RECORD, "provenance": {"git_commit": "abc123", "git_dirty": False}})
  assert "uncommitted" not in "\n".join(clean)
  assert baseline.section(json.loads(json.dumps(RECORD))) == lines  # the JSON round trip renders the same


def test_build_record_epochs_are_pairs_over_the_split(tmp_path):
  summary = {"steps": 10, "wall_time_s": 20.0, "steps_per_sec": 0.5, "validation": {}, "validation_curve": []}
  record = baseline.build_record({"bleu": 1.0}, summary, 29_000 * 3 // 2, ["a"], {"git_commit": "x"}, "r")
  assert record["epochs"] == 1.5 and record["train_pairs_seen"] == 43_500 and record["machine"] == baseline.MACHINE
  json.dumps(record)  # JSON-able


def _run_folder(path, status="finished"):
  path.mkdir()
  (path / "config.json").write_text("{}")
  os.utime(path / "config.json", (1000.0, 1000.0))
  (path / "status.json").write_text(json.dumps({"status": status, "step": 40, "time": 1080.0}))
  lines = [
      {"step": 20, "split": "train", "loss": 3.0},
      {"step": 20, "split": "eval", "loss": 2.5, "bleu": 10.0, "bleu_lc": 11.0, "accuracy": 0.4},
      {"step": 40, "split": "eval", "loss": 2.25, "bleu": 20.0, "bleu_lc": 21.0, "accuracy": 0.5},
  ]
  (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
  return str(path)


def test_training_summary_reads_the_run_folder(tmp_path):
  s = baseline.training_summary(_run_folder(tmp_path / "run"))
  assert (s["steps"], s["wall_time_s"], s["steps_per_sec"]) == (40, 80.0, 0.5)
  assert s["validation"] == {"step": 40, "loss": 2.25, "accuracy": 0.5, "bleu": 20.0, "bleu_lc": 21.0}
  assert [r["step"] for r in s["validation_curve"]] == [20, 40]
  with pytest.raises(ValueError, match="status 'running' at step 40, not 'finished'"):
    baseline.training_summary(_run_folder(tmp_path / "unfinished", status="running"))


@pytest.mark.parametrize("pack", [False, True])
def test_pairs_trained_counts_every_pair_once(pack, tmp_path):
  """Unpacked: a row is a pair (steps × batch). Packed: the pairs are the targets' EOS tokens, one per pair."""
  config = default.get_config()
  config.data.embedded.num_train = 300
  config.data.batch_size = 8
  config.data.pack = pack
  steps = 12
  got = baseline.pairs_trained(config, steps, str(tmp_path))
  it = build(config.data, workdir=str(tmp_path)).train_iter()
  eos = sum(int(np.sum(next(it)["targets"] == EOS_ID)) for _ in range(steps))
  assert got == eos
  if not pack:
    assert got == steps * 8
  else:
    assert got > steps * 8  # several pairs a row


def test_the_baseline_config_is_the_tutorials_recipe():
  """configs/multi30k_baseline.py: Trevett's notebook 6 sizes and optimizer, Pre-LN + Xavier, ~10 epochs."""
  from configs import multi30k_baseline  # noqa: PLC0415

  c = multi30k_baseline.get_config()
  m, o, d, t = c.model, c.optim, c.data, c.train
  assert (m.num_encoder_layers, m.num_decoder_layers, m.d_model, m.num_heads, m.d_ff) == (3, 3, 256, 8, 512)
  assert (m.dropout_rate, m.attention_dropout_rate, m.norm_position, c.init.scheme) == (0.1, 0.1, "pre", "xavier")
  assert (o.name, o.learning_rate, o.schedule, o.warmup_steps, o.grad_clip_norm) == ("adam", 5e-4, "constant", 0, 1.0)
  assert (d.name, d.dir, d.pack, d.max_source_length, d.max_target_length) == ("multi30k", "", True, 64, 64)
  assert t.label_smoothing == 0.0 and t.eval_every == multi30k_baseline.STEPS_PER_EPOCH
  assert t.num_steps * 129.2 / baseline.TRAIN_PAIRS == pytest.approx(10.0, abs=0.05)  # 129.2 pairs a batch


def test_a_records_tables_are_in_the_report_and_not_in_the_readme(tmp_path):
  """Study.tables: each table under the headline numbers of its section of REPRODUCTION.md ('|' escaped, None as
  '—'), none of them in the README's table, which keeps the summary."""
  from experiments import reproduction

  table = {"title": "Every predictor", "header": ["λ₀", "AUC"], "rows": [["a|b", 0.8312345], ["c", None]]}
  claim = {"claim": "edge", "number": 11, "verdict": "inconclusive", "summary": {"AUC": 0.83}, "tables": [table]}
  text = open(
      reproduction.write_reproduction([claim], str(tmp_path / "R.md"), figure_dir="f", command="c"), "rb"
  ).read()
  text = text.decode("utf-8")
  assert "Every predictor:\n\n| λ₀ | AUC |\n|---|---|\n| a\\|b | 0.8312 |\n| c | — |\n" in text
  assert text.index("| AUC | 0.83 |") < text.index("Every predictor:") < text.index("**Verdict: inconclusive.**")
  assert "Every predictor" not in reproduction.readme_table([claim])
  claim["tables"] = [dict(table, title="Does it?")]  # a title ending in a question keeps its mark alone
  text = open(
      reproduction.write_reproduction([claim], str(tmp_path / "R.md"), figure_dir="f", command="c"), "rb"
  ).read()
  assert "\nDoes it?\n\n| λ₀ | AUC |" in text.decode("utf-8")


def test_the_baseline_heads_the_report_and_the_readme(tmp_path):
  from experiments import reproduction

  claim = {"claim": "truncated_normal", "number": 1, "verdict": "reproduced", "summary": {}}
  text = open(
      reproduction.write_reproduction([claim], str(tmp_path / "R.md"), figure_dir="f", command="c", baseline=RECORD),
      encoding="utf-8",
  ).read()
  assert text.index("## Known-good baseline") < text.index("## The claims") < text.index("| 1 | [truncated_normal]")
  assert "\n".join(baseline.section(RECORD)) in text
  readme = tmp_path / "README.md"
  readme.write_text(
      "a\n<!-- baseline:begin -->\nold\n<!-- baseline:end -->\nb\n<!-- claims:begin -->\nx\n<!-- claims:end -->\n"
  )
  reproduction.update_readme(str(readme), [claim], RECORD)
  new = readme.read_text()
  line = reproduction.baseline_readme(RECORD)
  assert f"<!-- baseline:begin -->\n{line}\n<!-- baseline:end -->" in new and "old" not in new
  assert f"sacreBLEU **{RECORD['test']['bleu']:.1f}**" in line and RECORD["commands"][0] in line
  readme.write_text("<!-- claims:begin -->\nx\n<!-- claims:end -->\n")
  with pytest.raises(ValueError, match="baseline:begin"):
    reproduction.update_readme(str(readme), [claim], RECORD)


@pytest.mark.slow
def test_the_baseline_is_a_main_py_mode_that_trains_then_writes_the_record(monkeypatch, tmp_path):
  """`python main.py --config=configs/multi30k_baseline.py` is the one way to run it: its mode is 'baseline', which
  main.py accepts, and `write_record` writes the record, stating main.py's command with no machine path."""
  import ast  # noqa: PLC0415
  import pathlib  # noqa: PLC0415

  from configs import multi30k_baseline  # noqa: PLC0415

  main_py = ast.parse((pathlib.Path(__file__).resolve().parents[1] / "main.py").read_text(encoding="utf-8"))
  modes = next(ast.literal_eval(n.value) for n in main_py.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "MODES")  # fmt: skip
  assert multi30k_baseline.get_config().mode == "baseline" and "baseline" in modes  # main.py's import sets flags
  run = _run_folder(tmp_path / "run")
  monkeypatch.setattr(baseline, "evaluate_test", lambda config, workdir: {"bleu": 36.0, "pairs": 1000})
  monkeypatch.setattr(baseline, "pairs_trained", lambda config, steps, workdir: 29_000 * 10)
  argv = ["--config=configs/multi30k_baseline.py", f"--config.data.dir={tmp_path}", f"--workdir={run}"]
  path = baseline.write_record(None, run, argv)
  with open(path, encoding="utf-8") as f:
    record = json.load(f)
  assert path == os.path.join(run, "result.json") and record["test"] == {"bleu": 36.0, "pairs": 1000}
  assert record["epochs"] == 10.0 and record["steps"] == 40
  cmd = f"python main.py --config=configs/multi30k_baseline.py --config.data.dir=<{tmp_path.name}> --workdir=<run>"
  assert record["commands"] == [cmd]
