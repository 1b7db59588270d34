"""A sweep's workdir may be a URI (issue 27): the sweep layer, its claims and its report write and read every file
through `etils.epath`. A tiny sweep runs with its workdir on `gs://`, served by tests/test_workdir_paths.py's
`LocalBucket` (an epath backend keeping the objects in a local folder, without append), while every plain file
function (`open`, `os.open`, `os.stat`, `os.makedirs`, `os.replace`, ...) refuses a `gs:` path: a plain `open()` that
slipped back into the sweep layer fails here, where with a local workdir it would pass unnoticed."""

import builtins
import io
import json
import os

import pytest
from etils import epath

from experiments import plots as figure_kit
from experiments import report
from experiments import shard as shard_lib
from experiments import sweep as sweep_lib
from tests import tiny
from tests.test_workdir_paths import LocalBucket, NoCheckpoints, _no_local_mangling, bucket  # noqa: F401 (a fixture)
from train import loop
from train.data import tokenizers

WORKDIR = "gs://bucket/sweep"
SMALL = {
    "model.arch": "decoder",
    "train.num_steps": 2,
    "train.eval_every": 2,
    "train.checkpoint_every": 2,
    "data.embedded.num_train": 32,
    "data.embedded.num_eval": 8,
    "sweep.grid": "optim.learning_rate=0.001,0.002",
    "sweep.seeds": 1,
}
PLAIN = [
    (builtins, "open"),
    (io, "open"),
    (os, "open"),
    (os, "stat"),  # os.path.exists, isdir, getmtime
    (os, "makedirs"),
    (os, "mkdir"),
    (os, "listdir"),
    (os, "scandir"),
    (os, "replace"),
    (os, "rename"),
    (os, "remove"),
]


@pytest.fixture
def plain_io_refuses_uris(monkeypatch):
  """Every plain file function of PLAIN raises (and records) on a `gs:` path; returns the list of such calls."""
  calls = []

  def guard(name, fn):
    def guarded(path, *args, **kwargs):
      if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith("gs:"):
        calls.append(f"{name}({os.fspath(path)!r})")
        raise AssertionError(f"plain {name}() of {os.fspath(path)!r}: use etils.epath")
      return fn(path, *args, **kwargs)

    return guarded

  for module, name in PLAIN:
    monkeypatch.setattr(module, name, guard(name, getattr(module, name)))
  return calls


def _objects(tmp_path) -> set[str]:
  root = tmp_path / "bucket" / "bucket" / "sweep"
  return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


def test_a_sweep_on_gs_goes_through_epath(tmp_path, bucket, monkeypatch, plain_io_refuses_uris):  # noqa: F811
  monkeypatch.setattr(loop.checkpoint_lib, "Checkpointer", NoCheckpoints)
  config = tiny.sweep_config(**SMALL)
  records = sweep_lib.run_sweep(config, WORKDIR, emit=print, env={})
  assert [r["outcome"] for r in records] == ["finished", "finished"], [r["error"] for r in records]
  assert plain_io_refuses_uris == []
  cells = [r["workdir"] for r in records]
  assert cells == ["cells/optim.learning_rate=0.001/seed_0", "cells/optim.learning_rate=0.002/seed_0"]
  objects = _objects(tmp_path)
  assert {"results.jsonl", "results.md", "curves.png", "final_metric.png"} <= objects
  for cell in cells:
    assert {
        f"{cell}/{name}" for name in ("sweep_record.json", "metrics.jsonl", "status.json", "config.json")
    } <= objects
    assert f"{cell}/{shard_lib.CLAIM_FILE}" not in objects  # released
  stored = [json.loads(line) for line in epath.Path(WORKDIR, "results.jsonl").read_text().splitlines()]
  assert [r["final"]["train/loss"] for r in stored] == [r["final"]["train/loss"] for r in records]
  assert all(r["final"]["train/loss"] > 0 for r in records)
  assert "| 0.001 |" in epath.Path(WORKDIR, "results.md").read_text()
  assert figure_kit.saved_figure_key(f"{WORKDIR}/final_metric.png") is not None  # the PNG and its key read back
  # the HParams events need tensorboardX's own gs:// writer (google-cloud-storage): skipped, not a local folder
  assert not any(name.startswith("tensorboard_hparams") for name in objects)

  # A rerun finds every run finished through the bucket (its status.json and record), trains nothing, and writes the
  # same records.
  lines = []
  again = sweep_lib.run_sweep(config, WORKDIR, emit=lines.append, env={})
  assert sum("already finished, skipped" in line for line in lines) == 2
  assert [r["final"] for r in again] == [r["final"] for r in records]
  assert plain_io_refuses_uris == []
  _no_local_mangling(tmp_path)


def test_shards_on_gs_claim_their_runs_and_the_last_gathers(tmp_path, bucket, monkeypatch, plain_io_refuses_uris):  # noqa: F811
  """Shards 0/2 and 1/2 one after the other on a gs:// workdir: each claims (an exclusive create through epath) and
  trains its own run; the second finds every run done and gathers."""
  monkeypatch.setattr(loop.checkpoint_lib, "Checkpointer", NoCheckpoints)
  first = sweep_lib.run_sweep(tiny.sweep_config(**SMALL, **{"sweep.shard": "0/2"}), WORKDIR, emit=print, env={})
  assert [r["cell"] for r in first] == ["optim.learning_rate=0.001"]
  assert "results.jsonl" not in _objects(tmp_path)  # a shard writes no top-level file
  lines = []
  second = sweep_lib.run_sweep(tiny.sweep_config(**SMALL, **{"sweep.shard": "1/2"}), WORKDIR, emit=lines.append, env={})
  assert [r["outcome"] for r in second] == ["finished", "finished"]  # gathered: both runs
  assert any(line.startswith("Gathered 2 of 2 run(s)") for line in lines)
  assert {"results.jsonl", "results.md", "curves.png"} <= _objects(tmp_path)
  assert not any(name.endswith(shard_lib.CLAIM_FILE) for name in _objects(tmp_path))
  assert f"{WORKDIR}/cells/optim.learning_rate=0.002/seed_0/{shard_lib.CLAIM_FILE}" in bucket.seen
  assert plain_io_refuses_uris == []
  _no_local_mangling(tmp_path)


def test_claims_on_gs_fresh_holds_stale_taken_over(tmp_path, bucket, plain_io_refuses_uris):  # noqa: F811
  run = f"{WORKDIR}/cells/a/seed_0"
  assert shard_lib.claim(run, "a", timeout_s=60) is None
  assert shard_lib.claim(run, "b", timeout_s=60) == "a"  # an exclusive create: the object exists
  later = json.loads(epath.Path(run, shard_lib.CLAIM_FILE).read_text())["heartbeat"] + 61
  assert shard_lib.claim(run, "b", timeout_s=60, clock=lambda: later) is None  # stale: deleted and created again
  assert json.loads(epath.Path(run, shard_lib.CLAIM_FILE).read_text())["owner"] == "b"
  shard_lib.release(run, "a")  # not a's any more: left alone
  assert shard_lib.claim(run, "c", timeout_s=60) == "b"
  shard_lib.release(run, "b")
  assert list(epath.Path(run).iterdir()) == []
  assert shard_lib.claim(run, "c", timeout_s=60) is None
  assert plain_io_refuses_uris == []
  _no_local_mangling(tmp_path)


def test_no_exclusive_create_fails_the_claim_naming_cells_dir(tmp_path, bucket, monkeypatch):  # noqa: F811
  """tensorflow's gfile (epath's choice when tensorflow is installed) has no mode 'x': the claim says so and names
  the way out, instead of two shards both believing they hold the run."""
  plain_open = LocalBucket.open

  def no_exclusive(self, path, mode):
    if "x" in mode:
      raise ValueError(f"invalid mode {mode!r}")
    return plain_open(self, path, mode)

  monkeypatch.setattr(LocalBucket, "open", no_exclusive)
  with pytest.raises(RuntimeError, match=r"cannot create a file exclusively .*config\.sweep\.cells_dir"):
    shard_lib.claim(f"{WORKDIR}/cells/a/seed_0", "a", timeout_s=60)


@pytest.mark.parametrize(
    "path, start, want",
    [
        ("/w/cells/a/seed_0", "/w", "cells/a/seed_0"),
        ("/runs/cells/a/seed_0", "/w", "../runs/cells/a/seed_0"),
        ("gs://b/w/cells/a/seed_0", "gs://b/w", "cells/a/seed_0"),
        ("gs://b/runs/cells/a", "/local/w", "gs://b/runs/cells/a"),  # another filesystem: the whole URI
        ("/local/cells/a", "gs://b/w", "/local/cells/a"),
        ("s3://b/w/cells/a", "gs://b/w", "s3://b/w/cells/a"),
    ],
)
def test_a_records_workdir_is_relative_where_it_can_be_and_reads_back(path, start, want):
  assert report.relative(path, start) == want
  got = report.run_path(start, want)
  assert got == path or os.path.normpath(got) == path


def test_the_shared_tokenizer_is_cached_in_a_gs_folder(tmp_path, bucket, plain_io_refuses_uris):  # noqa: F811
  """A sweep's runs share `<workdir>/tokenizer/`: on gs:// the SentencePiece model is written there once and read
  back by the next run (its texts never asked for again)."""
  texts = ["the cat sat on the mat", "a dog ran in the park", "birds fly over the sea"] * 40
  calls = []

  def texts_fn():
    calls.append(1)
    return texts

  cache = f"{WORKDIR}/tokenizer"
  first, path = tokenizers.load_or_train(texts_fn, key="k", vocab_size=40, max_corpus_chars=100_000, cache_dirs=[cache])
  assert path == f"{cache}/spm_k.model" and "tokenizer/spm_k.model" in _objects(tmp_path)
  again, _ = tokenizers.load_or_train(texts_fn, key="k", vocab_size=40, max_corpus_chars=100_000, cache_dirs=[cache])
  assert calls == [1] and again.encode("the cat") == first.encode("the cat")
  assert plain_io_refuses_uris == []
  _no_local_mangling(tmp_path)


@pytest.mark.slow
def test_an_analysis_at_init_on_gs_writes_its_files_and_figures_through_epath(
    tmp_path, bucket, monkeypatch, plain_io_refuses_uris  # noqa: F811
):
  monkeypatch.setattr(loop.checkpoint_lib, "Checkpointer", NoCheckpoints)
  analysis = tiny.ANALYSIS
  config = tiny.sweep_config(
      **{**SMALL, "sweep.grid": "", "sweep.analysis_at_init": True, "train.num_steps": 1}, **analysis
  )
  (record,) = sweep_lib.run_sweep(config, WORKDIR, emit=print, env={})
  assert record["outcome"] == "finished", record["error"]
  step_0 = f"{record['workdir']}/analysis/step_0"
  objects = _objects(tmp_path)
  assert {f"{step_0}/metadata.json", f"{step_0}/eigenvalues.json", f"{step_0}/signal.json"} <= objects
  assert any(name.startswith(step_0) and name.endswith(".png") for name in objects)
  assert plain_io_refuses_uris == []
  _no_local_mangling(tmp_path)
