"""Multi30k: reading the real files (read-only shared copy), tokenizer cache placement and reuse, errors."""

import contextlib
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import train.data
from configs import default
from train.data import multi30k, tokenizers

SHARED = Path(__file__).parents[2] / "shared" / "data" / "multi30k"
needs_shared = pytest.mark.skipif(
    not (SHARED / "train.de.gz").exists(), reason=f"Multi30k not found at {SHARED} (the project's shared data folder)"
)


def config(data_dir, **overrides):
  c = default.get_config().data
  c.name = "multi30k"
  c.dir = str(data_dir)
  # Small SentencePiece job: 1000 pieces from the first 300k characters (~2,300 pairs) trains in ~1 s.
  c.vocab_size = 1000
  c.spm_max_corpus_chars = 300_000
  c.batch_size = 4
  for key, value in overrides.items():
    c[key] = value
  return c


def _write(folder: Path, name: str, lines):
  with gzip.open(folder / name, "wt", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))


def fake_multi30k(folder: Path, num_train=300, num_val=20) -> Path:
  """A tiny corpus in Multi30k's layout (German-ish and English-ish sentences from small word lists)."""
  rng = np.random.default_rng(0)
  de, en = (
      "ein hund eine katze läuft springt im park über die wiese".split(),
      "a dog cat runs jumps in the park over meadow".split(),
  )
  folder.mkdir(parents=True, exist_ok=True)
  for split, n in (("train", num_train), ("val", num_val), ("test_2016_flickr", num_val)):
    idx = rng.integers(0, 10, size=(n, 6))
    _write(folder, f"{split}.de.gz", [" ".join(de[i] for i in row) for row in idx])
    _write(folder, f"{split}.en.gz", [" ".join(en[i] for i in row) for row in idx])
  return folder


@needs_shared
def test_line_counts_and_direction():
  assert len(multi30k.read_split(str(SHARED), "train", "de", "en")) == 29000
  val = multi30k.read_split(str(SHARED), "validation", "de", "en")
  test = multi30k.read_split(str(SHARED), "test", "de", "en")
  assert len(val) == 1014 and len(test) == 1000
  with gzip.open(SHARED / "val.de.gz", "rt", encoding="utf-8") as f:
    first_de = f.readline().rstrip("\n")
  assert val[0][0] == first_de  # De -> En: the source is the German line.
  assert multi30k.read_split(str(SHARED), "validation", "en", "de")[0] == (val[0][1], val[0][0])


@contextlib.contextmanager
def read_only(folder: Path):
  """`folder` made read-only (chmod 0o555) for the duration, restored to 0o755 after.

  The tokenizer cache decides "not writable" from os.access and the permission bits (root passes os.access on an
  r-x folder, so the bits are what stops it there); skips only on a filesystem that ignores chmod.
  """
  os.chmod(folder, 0o555)
  try:
    if os.stat(folder).st_mode & 0o222:
      pytest.skip(f"chmod 0o555 left {folder} with write bits (a filesystem that ignores permissions)")
    yield folder
  finally:
    os.chmod(folder, 0o755)


def _listing(folder: Path) -> list[str]:
  return sorted(os.listdir(folder))  # hidden files too: a half-written `.spm_tmp_*` would show


def test_build_tokenizer_round_trip_and_cache_falls_back_to_workdir(multi30k_copy, tmp_path, monkeypatch):
  """The real corpus in a read-only folder of our own: the model is cached in the workdir, nothing is written next
  to the data (nor into the shared folder), and a second build loads the cached model without training."""
  shared_before = _listing(SHARED)
  before = _listing(multi30k_copy)
  workdir = tmp_path / "work"
  with read_only(multi30k_copy):
    data = train.data.build(config(multi30k_copy), workdir=str(workdir), process_index=0, process_count=1)
    assert _listing(multi30k_copy) == before  # Nothing written next to the read-only data.
  cached = list((workdir / "tokenizer").glob("spm_*.model"))
  assert len(cached) == 1
  tok = data.tokenizer
  assert tok.vocab_size == 1000
  exact, sentences = 0, [s for pair in data.eval_examples()[:50] for s in pair]
  for s in sentences:
    ids = tok.encode(s)
    assert tokenizers.EOS_ID not in ids and tokenizers.PAD_ID not in ids
    if tok.decode(ids) == s:
      exact += 1
    else:  # Only characters the 300k-character corpus never saw may be lost, as UNK.
      assert tokenizers.UNK_ID in ids, s
  assert exact >= 0.95 * len(sentences)
  batch = next(data.train_iter())
  assert batch["inputs"].shape == (4, 32) and batch["inputs"].max() < 1000
  # The second build reuses the cached model: same file, not rewritten, and no training (it would raise).
  mtime = cached[0].stat().st_mtime_ns

  def no_training(*args, **kwargs):
    raise AssertionError("the cached SentencePiece model was not reused")

  monkeypatch.setattr(tokenizers, "train_sentencepiece", no_training)
  with read_only(multi30k_copy):
    again = train.data.build(config(multi30k_copy), workdir=str(workdir), process_index=0, process_count=1)
  assert cached[0].stat().st_mtime_ns == mtime
  assert again.tokenizer.encode(sentences[0]) == tok.encode(sentences[0])
  assert _listing(multi30k_copy) == before and _listing(SHARED) == shared_before


def test_cache_next_to_writable_data_and_not_reused_when_stale(tmp_path):
  data_dir = fake_multi30k(tmp_path / "m30k")
  c = config(data_dir, vocab_size=40)
  tok, path = multi30k.tokenizer(c, str(tmp_path / "work"))
  assert Path(path).parent == data_dir and not (tmp_path / "work" / "tokenizer").exists()
  assert multi30k.tokenizer(c, str(tmp_path / "work"))[1] == path  # Reused.
  # Another vocab size or edited training data gives another cache key.
  assert multi30k.tokenizer(config(data_dir, vocab_size=45), str(tmp_path / "work"))[1] != path
  _write(data_dir, "train.en.gz", ["a dog runs"] * 300)
  assert multi30k.tokenizer(c, str(tmp_path / "work"))[1] != path
  assert tok.decode(tok.encode("a dog runs in the park")) == "a dog runs in the park"


@pytest.mark.parametrize("as_root", [False, True])
def test_read_only_data_dir_falls_back_to_workdir(tmp_path, monkeypatch, as_root):
  """chmod 0o555 on the data folder; `as_root` also makes os.access report it writable, as it does for root, so the
  permission-bit check is exercised whichever user runs the suite."""
  data_dir = fake_multi30k(tmp_path / "m30k")
  before = _listing(data_dir)
  if as_root:
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: True if mode & os.W_OK else real_access(path, mode))
  with read_only(data_dir):
    _, path = multi30k.tokenizer(config(data_dir, vocab_size=40), str(tmp_path / "work"))
  assert Path(path).parent == tmp_path / "work" / "tokenizer"
  assert _listing(data_dir) == before


def test_missing_directory(tmp_path):
  missing = tmp_path / "nope"
  with pytest.raises(FileNotFoundError, match=rf"config.data.dir='{missing}': no such directory"):
    train.data.build(config(missing), workdir=str(tmp_path), process_index=0, process_count=1)


def test_missing_split_file(tmp_path):
  data_dir = fake_multi30k(tmp_path / "m30k")
  (data_dir / "val.en.gz").unlink()
  with pytest.raises(FileNotFoundError, match=r"config.data.dir=.*split file .*val\.en\.gz.* is missing"):
    train.data.build(config(data_dir, vocab_size=40), workdir=str(tmp_path), process_index=0, process_count=1)


def test_mismatched_line_counts(tmp_path):
  data_dir = fake_multi30k(tmp_path / "m30k")
  _write(data_dir, "train.de.gz", ["ein hund"] * 299)
  with pytest.raises(ValueError, match=r"train\.de\.gz has 299 lines but .*train\.en\.gz has 300"):
    train.data.build(config(data_dir, vocab_size=40), workdir=str(tmp_path), process_index=0, process_count=1)


def test_fake_corpus_end_to_end_batches_decode_to_text(tmp_path):
  data_dir = fake_multi30k(tmp_path / "m30k")
  data = train.data.build(
      config(data_dir, vocab_size=40, source_lang="en", target_lang="de"),
      workdir=str(tmp_path),
      process_index=0,
      process_count=1,
  )
  pairs = multi30k.read_split(str(data_dir), "validation", "en", "de")
  batches = list(data.eval_batches())
  decoded = [
      (data.tokenizer.decode(s), data.tokenizer.decode(t))
      for b in batches
      for s, t in zip(b["inputs"], b["targets"])
      if t.any()
  ]
  assert decoded == pairs == data.eval_examples()[:20]
  shutil.rmtree(data_dir)


def test_lm_side_target_is_the_english_side_alone(tmp_path):
  # De -> En: the target side is English; a source limit that no German sentence fits drops nothing from the LM.
  data_dir = fake_multi30k(tmp_path / "m30k")
  data = train.data.build(
      config(data_dir, vocab_size=40, lm_side="target", max_source_length=2),
      workdir=str(tmp_path),
      process_index=0,
      process_count=1,
  )
  english = [en for _, en in multi30k.read_split(str(data_dir), "validation", "de", "en")]
  decoded = [data.tokenizer.decode(t) for b in data.eval_batches() for t in b["targets"] if t.any()]
  assert data.task == "lm" and decoded == english
  assert data.eval_examples()[:20] == [("", en) for en in english]
  assert set(next(data.train_iter())) == {"targets"}
