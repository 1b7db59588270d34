"""The reproduction driver (experiments/reproduce.py) and its report: claims run through main.py, a failed
claim reported as inconclusive, REPRODUCTION.md and the README's table rebuilt from the results on disk."""

import json
import subprocess
import sys

import jax
import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_reproduce_runs_claims_through_main_and_writes_the_report(tmp_path):
  runs, out = tmp_path / "runs", tmp_path / "out"
  cmd = [sys.executable, "-m", "experiments.reproduce", f"--runs={runs}", f"--out={out}"]
  done = subprocess.run(
      [*cmd, "--scale=tiny", "--claims=truncated_normal"], cwd=REPO, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  assert "cell 2/2, seed 0: init.scheme=xavier" in done.stdout  # the child's progress lines are shown
  # A claim whose process fails (cpu scale without a data folder) is reported as inconclusive; the earlier claim is
  # kept (merged from its claim.json) and the driver exits 1.
  failed = subprocess.run(
      [*cmd, "--scale=cpu", "--claims=identity_path"], cwd=REPO, capture_output=True, text=True, timeout=300
  )
  assert failed.returncode == 1
  text = (out / "REPRODUCTION.md").read_text()
  assert "| 1 | [truncated_normal](#truncated_normal) | **reproduced** | tiny | synthetic (no data read) |" in text
  assert "| 4 | [identity_path](#identity_path) | **inconclusive** | cpu |" in text
  assert "config.data.dir='' is invalid" in text  # the end of the failed claim's log
  assert "![truncated_normal](reproduction/truncated_normal/truncated_normal.png)" in text
  assert (out / "reproduction" / "truncated_normal" / "truncated_normal.png").stat().st_size > 10_000
  assert "Provenance: commit" in text and f"jax {jax.__version__}" in text
  # The README's table is rebuilt between its markers from the same results.
  readme = tmp_path / "README.md"
  readme.write_text("intro\n<!-- claims:begin -->\nold table\n<!-- claims:end -->\nrest\n")
  from experiments import reproduce, reproduction

  reproduction.update_readme(str(readme), reproduce.collect(str(out)))
  new = readme.read_text()
  assert new.startswith("intro\n<!-- claims:begin -->\n| # | claim |") and new.endswith("<!-- claims:end -->\nrest\n")
  assert "old table" not in new and "[identity_path](reports/REPRODUCTION.md#identity_path) | **inconclusive**" in new
  # --report_only trains nothing and rewrites the same report from the results on disk.
  (out / "REPRODUCTION.md").unlink()
  again = subprocess.run([*cmd, "--report_only"], cwd=REPO, capture_output=True, text=True, timeout=120)
  assert again.returncode == 0 and (out / "REPRODUCTION.md").read_text() == text
  assert "cell " not in again.stdout
  # A '|' in a headline number's name is escaped, so the table keeps its columns.
  row = reproduction.readme_table([{"claim": "x", "number": 1, "verdict": "reproduced", "summary": {"max|c−1|": 0.5}}])
  assert row.splitlines()[-1].count(" | ") == 4 and "max\\|c−1\\|" in row
  # a verdict read by a rule stated after its runs were seen is said as a re-reading, in the README and the atlas
  reread = {
      "claim": "x",
      "number": 1,
      "verdict": "reproduced",
      "reason": "A re-reading of seeds 0–2 ...",
      "summary": {},
  }
  assert "| reproduced (re-reading; fresh seeds decide) |" in reproduction.readme_table([reread])
  assert "| **inconclusive** |" in reproduction.readme_table([{**reread, "verdict": "inconclusive", "reason": "fresh"}])
  with pytest.raises(ValueError, match="has no <!-- claims:begin -->"):
    reproduction.update_readme(str(tmp_path / "runs" / "truncated_normal" / "results.md"), [])


def test_claims_on_the_atlas_cells_read_the_atlas_runs(tmp_path, monkeypatch):
  """--atlas_runs: claims 8, 9, 10 (ON_ATLAS_CELLS, built on configs/claims/_atlas_cells.py) get the atlas's train/
  as their sweep.cells_dir; the other claims train in their own workdir."""
  import importlib  # pylint: disable=g-import-not-at-top

  from experiments import reproduce  # pylint: disable=g-import-not-at-top
  from experiments.registry import CLAIM_NAMES  # pylint: disable=g-import-not-at-top

  on_cells = {n for n in CLAIM_NAMES if hasattr(importlib.import_module(f"configs.claims.{n}"), "atlas_claim_config")}
  assert set(reproduce.ON_ATLAS_CELLS) == on_cells == {"tfixup", "bert_vs_xavier", "deep_no_warmup"}
  commands = []

  class Done:

    def __init__(self, cmd, **kw):
      commands.append(cmd)
      self.stdout = iter(())

    def wait(self):
      return 0

    def kill(self):
      raise AssertionError("the fake process ended at once")

  monkeypatch.setattr(reproduce.subprocess, "Popen", Done)
  reproduce.run_one("tfixup", "cpu", "", str(tmp_path), 10, cells_dir=str(tmp_path / "atlas" / "train"))
  reproduce.run_one("warmup", "cpu", "", str(tmp_path), 10)
  assert commands[0][-1] == f"--config.sweep.cells_dir={tmp_path / 'atlas' / 'train'}"
  assert not any("cells_dir" in arg for arg in commands[1])


@pytest.mark.slow
def test_redecide_applies_the_current_rule_to_a_records_measurements(tmp_path):
  """--redecide: claim 7's committed 2-seed record (measured before its rule read intervals) re-decided by today's
  rule, without runs: the verdict is the rule's on the stored numbers, the runs' provenance stays, and the report says
  which commit re-decided it. --redecide alone runs no claim (no --report_only needed: --claims defaults to all)."""
  import json  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top

  from experiments import reproduce
  from experiments.registry import get_claim  # pylint: disable=g-import-not-at-top

  src = REPO / "reports" / "reproduction" / "hessian_spectrum"
  dest = tmp_path / "reproduction" / "hessian_spectrum"
  shutil.copytree(src, dest)
  old = json.loads((dest / "claim.json").read_text())
  done = subprocess.run(
      [sys.executable, "-m", "experiments.reproduce", f"--out={tmp_path}", f"--runs={tmp_path / 'runs'}",
       "--redecide=hessian_spectrum"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-2000:]
  assert sorted(p.name for p in (tmp_path / "reproduction").iterdir()) == ["hessian_spectrum"]
  assert not (tmp_path / "runs").exists()
  new = json.loads((dest / "claim.json").read_text())
  expected = get_claim("hessian_spectrum").verdict(old["measured"])
  assert (new["verdict"], new["reason"]) == (expected.verdict, expected.reason)
  assert new["tables"] == get_claim("hessian_spectrum").tables(old["measured"])
  assert new["provenance"] == old["provenance"] and new["measured"] == old["measured"]
  assert "git_commit" in new["redecided_by"]
  assert "Re-decided from this record's measurements" in (tmp_path / "REPRODUCTION.md").read_text()
  assert reproduce.redecide(new)["verdict"] == new["verdict"]  # idempotent


def test_done_runs_records_land_as_they_come_and_a_later_session_restores_them(tmp_path, monkeypatch):
  """run_one with `records`: at each run's progress line the done runs' records (no checkpoints) are copied out;
  a later call on an empty workdir copies them back, so its sweep skips those runs; an unfinished run is neither."""
  import json  # pylint: disable=g-import-not-at-top

  from experiments import reproduce  # pylint: disable=g-import-not-at-top

  def run(root, cell, seed, status):
    d = root / "cells" / cell / f"seed_{seed}"
    (d / "checkpoints" / "10").mkdir(parents=True)
    (d / "status.json").write_text(json.dumps({"status": status}))
    for name in ("config.json", "metrics.jsonl", "data_stats.json"):
      (d / name).write_text(f"{cell} {seed} {name}")
    return d

  workdir, records = tmp_path / "runs" / "warmup", tmp_path / "out" / "runs"
  run(workdir, "a", 0, "finished")
  run(workdir, "b", 0, "diverged")
  run(workdir, "a", 1, "running")
  seen = []

  class Fake:

    def __init__(self, cmd, **kw):
      self.stdout = iter(
          [
              "I1126 sweep.py] cell 1/2, seed 0: a | already finished, skipped\n",  # no copy: a run starts below
              "I1126 sweep.py] cell 2/2, seed 0: b | claimed by vm:12:ab, skipped\n",
              "I1126 sweep.py] cell 2/2, seed 1: a | elapsed 0:01:00 | ETA 0:01:00 | ...\n",
          ]
      )

    def wait(self):
      seen.append(sorted(str(p.relative_to(records)) for p in records.rglob("*") if p.is_file()))
      return 0

    def kill(self):
      raise AssertionError("the fake process ended at once")

  monkeypatch.setattr(reproduce.subprocess, "Popen", Fake)
  saves, save = [], reproduce.save_records
  monkeypatch.setattr(reproduce, "save_records", lambda *a: saves.append(a) or save(*a))
  reproduce.run_one("warmup", "cpu", "", str(tmp_path / "runs"), 10, records=str(records))
  assert len(saves) == 1  # at the run that starts, not at the skipped ones
  done = [
      f"cells/{c}/seed_0/{n}" for c in "ab" for n in ("config.json", "data_stats.json", "metrics.jsonl", "status.json")
  ]
  assert seen == [sorted(done)]  # copied while the claim ran; no checkpoints, nothing of the unfinished run
  # The next session: a fresh workdir (and one with a stale attempt of a done run) gets the done runs back.
  fresh = tmp_path / "again"
  run(fresh / "warmup", "a", 0, "running")
  reproduce.run_one("warmup", "cpu", "", str(fresh), 10, records=str(records))
  restored = fresh / "warmup" / "cells"
  assert json.loads((restored / "a" / "seed_0" / "status.json").read_text()) == {"status": "finished"}
  assert (restored / "b" / "seed_0" / "metrics.jsonl").read_text() == "b 0 metrics.jsonl"
  assert not (restored / "a" / "seed_0" / "checkpoints").exists() and not (restored / "a" / "seed_1").exists()
  assert reproduce.restore_records(str(records), str(fresh / "warmup")) == 0  # nothing done is copied twice


def test_parallel_reaches_the_claims_sweep(tmp_path, monkeypatch):
  """`--parallel=k` runs the claim's main.py with `--config.sweep.parallel=k` (its runs k at once; a claim whose grid
  grows is decided by the child that gathers: tests/test_claim_edge.py); 1 (the default) leaves the command as it was.
  """
  from experiments import reproduce  # pylint: disable=g-import-not-at-top

  commands = []

  class Fake:

    def __init__(self, cmd, **kw):
      commands.append(cmd)
      self.stdout = iter([])

    def wait(self):
      return 0

    def kill(self):
      raise AssertionError("the fake process ended at once")

  monkeypatch.setattr(reproduce.subprocess, "Popen", Fake)
  reproduce.run_one("warmup", "cpu", "", str(tmp_path), 10, parallel=2)
  reproduce.run_one("warmup", "cpu", "", str(tmp_path), 10)
  assert [a for a in commands[0] if a.startswith("--config.sweep.parallel")] == ["--config.sweep.parallel=2"]
  assert not any(a.startswith("--config.sweep.parallel") for a in commands[1])


def test_saving_records_copies_only_what_changed(tmp_path, monkeypatch):
  """save_records at every run's start copies a done run once (a resumed sweep of 500 runs copied every record at
  each of them), and again when its status.json changed."""
  from experiments import reproduce  # pylint: disable=g-import-not-at-top

  for cell in ("a", "b"):
    d = tmp_path / "runs" / "cells" / cell / "seed_0"
    d.mkdir(parents=True)
    (d / "status.json").write_text('{"status": "finished"}')
    (d / "metrics.jsonl").write_text(cell)
  copied = []
  copy2 = reproduce.shutil.copy2

  def counted(a, b):
    copied.append(a.split("/cells/")[1].split("/")[0])  # the cell
    return copy2(a, b)

  monkeypatch.setattr(reproduce.shutil, "copy2", counted)
  dest = str(tmp_path / "records")
  assert reproduce.save_records(str(tmp_path / "runs"), dest) == 2 and sorted(set(copied)) == ["a", "b"]
  copied.clear()
  assert reproduce.save_records(str(tmp_path / "runs"), dest) == 2 and copied == []
  status = tmp_path / "runs" / "cells" / "b" / "seed_0" / "status.json"
  status.write_text('{"status": "diverged"}')  # re-run with another outcome
  reproduce.save_records(str(tmp_path / "runs"), dest)
  assert set(copied) == {"b"} and (tmp_path / "records" / "cells" / "b" / "seed_0" / "status.json").read_text() == (
      '{"status": "diverged"}'
  )


def test_a_claim_whose_process_fails_keeps_its_earlier_record(tmp_path, monkeypatch):
  """A claim's main.py that exits 2 before any run (here: no --data_dir) leaves no claim.json: the decided record in
  <out>/reproduction/<claim>/ and its figures stay as they were, and reproduce exits 1 naming the claim."""
  from experiments import reproduce  # pylint: disable=g-import-not-at-top

  dest = tmp_path / "out" / "reproduction" / "identity_path"
  dest.mkdir(parents=True)
  (dest / "claim.json").write_text(json.dumps({"claim": "identity_path", "verdict": "reproduced"}))
  (dest / "identity_path.png").write_bytes(b"png")
  monkeypatch.setattr(reproduce, "run_one", lambda *a, **k: (2, str(tmp_path / "main.log")))
  monkeypatch.setattr(reproduce.reproduction, "write_reproduction", lambda *a, **k: "r")
  monkeypatch.setattr(reproduce.reproduction, "write_atlas", lambda *a, **k: "a")
  argv = ["reproduce", "--claims=identity_path", f"--out={tmp_path / 'out'}", f"--runs={tmp_path / 'runs'}"]
  with pytest.raises(SystemExit) as stop:
    reproduce.FLAGS(argv)
    reproduce.main([])
  assert stop.value.code == 1
  assert json.loads((dest / "claim.json").read_text())["verdict"] == "reproduced"
  assert (dest / "identity_path.png").read_bytes() == b"png"
