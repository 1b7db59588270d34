"""TFDS sources end to end on tiny datasets prepared here as ArrayRecord, without TensorFlow."""

import json

import numpy as np
import pytest
import tensorflow_datasets as tfds

import train.data
from configs import default

DE = "ein hund eine katze läuft springt im park über die wiese".split()
EN = "a dog cat runs jumps in the park over meadow".split()


def _sentence(words, i, n=5):
  rng = np.random.default_rng(i)
  return " ".join(words[j] for j in rng.integers(0, 10, size=n))


class DataTestTinyTranslation(tfds.core.GeneratorBasedBuilder):
  """A wmt-like dataset: a Translation feature {'de', 'en'}."""

  VERSION = tfds.core.Version("1.0.0")

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.Translation(languages=["de", "en"]))

  def _split_generators(self, dl_manager):
    return {"train": self._generate_examples(0, 200), "validation": self._generate_examples(1000, 30)}

  def _generate_examples(self, start, n):
    for i in range(start, start + n):
      yield i, {"de": _sentence(DE, i), "en": _sentence(EN, i)}


class DataTestTinyText(tfds.core.GeneratorBasedBuilder):
  """An lm1b-like dataset: a single 'text' feature."""

  VERSION = tfds.core.Version("1.1.0")

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))

  def _split_generators(self, dl_manager):
    return {"train": self._generate_examples(0, 200), "test": self._generate_examples(1000, 10)}

  def _generate_examples(self, start, n):
    for i in range(start, start + n):
      yield i, {"text": _sentence(EN, i, n=3 + i % 5)}


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp("tfds")
  for cls in (DataTestTinyTranslation, DataTestTinyText):
    cls(data_dir=str(data_dir), file_format="array_record").download_and_prepare()
  return data_dir


def config(data_dir, name, **overrides):
  c = default.get_config().data
  c.name = f"tfds:{name}"
  c.tfds_data_dir = str(data_dir)
  c.vocab_size = 40
  c.batch_size = 4
  c.eval_batch_size = 8
  for key, value in overrides.items():
    c[key] = value
  return c


def test_files_are_array_record_and_no_tensorflow(tfds_dir):
  files = sorted(p.name for p in (tfds_dir / "data_test_tiny_translation" / "1.0.0").iterdir())
  assert "data_test_tiny_translation-train.array_record-00000-of-00001" in files
  assert {"dataset_info.json", "features.json"} <= set(files)
  with pytest.raises(ImportError):
    import tensorflow  # noqa: F401  (the project must work without it)


def test_translation_end_to_end(tfds_dir, tmp_path):
  data = train.data.build(
      config(tfds_dir, "data_test_tiny_translation"), workdir=str(tmp_path), process_index=0, process_count=1
  )
  assert data.task == "translation"
  assert list((tmp_path / "tokenizer").glob("spm_*.model"))
  source = tfds.data_source("data_test_tiny_translation", split="validation", data_dir=str(tfds_dir))
  expected = [(r["de"].decode(), r["en"].decode()) for r in source]
  assert sorted(expected) == sorted((_sentence(DE, i), _sentence(EN, i)) for i in range(1000, 1030))
  # Eval batches decode, in data_source order, to exactly the validation texts (De -> En by default).
  batches = list(data.eval_batches())
  assert len(batches) == 4 and batches[0]["inputs"].shape == (8, 32)  # ceil(30 / 8).
  decoded = [
      (data.tokenizer.decode(s), data.tokenizer.decode(t))
      for b in batches
      for s, t in zip(b["inputs"], b["targets"])
      if t.any()
  ]
  assert decoded == expected == data.eval_examples()[:30]
  batch = next(data.train_iter())
  train_texts = {(_sentence(DE, i), _sentence(EN, i)) for i in range(200)}
  for s, t in zip(batch["inputs"], batch["targets"]):
    assert (data.tokenizer.decode(s), data.tokenizer.decode(t)) in train_texts


def test_text_dataset_gives_lm_batches_and_resumes(tfds_dir, tmp_path):
  c = config(tfds_dir, "data_test_tiny_text", eval_split="test", max_target_length=16)
  data = train.data.build(c, workdir=str(tmp_path), process_index=0, process_count=1)
  assert data.task == "lm" and data.max_source_length == 0
  it = data.train_iter()
  batch = next(it)
  assert set(batch) == {"targets"} and batch["targets"].shape == (4, 16)
  texts = {_sentence(EN, i, n=3 + i % 5) for i in range(200)}
  assert all(data.tokenizer.decode(t) in texts for t in batch["targets"])
  state = json.loads(json.dumps(it.get_state()))
  expected = [next(it) for _ in range(2)]
  resumed = data.train_iter()
  resumed.set_state(state)
  for a in expected:
    np.testing.assert_array_equal(a["targets"], next(resumed)["targets"])
  assert [t for _, t in data.eval_examples()] == [
      r["text"].decode() for r in tfds.data_source("data_test_tiny_text", split="test", data_dir=str(tfds_dir))
  ]


def test_packed_lm_batches(tfds_dir, tmp_path):
  c = config(tfds_dir, "data_test_tiny_text", eval_split="test", max_target_length=16, pack=True)
  batch = next(train.data.build(c, workdir=str(tmp_path), process_index=0, process_count=1).train_iter())
  assert set(batch) == {"targets", "targets_segmentation", "targets_position"}
  assert batch["targets_segmentation"].max() >= 2  # Several short sentences per 16-token row.


def test_unprepared_dataset_says_how_to_prepare(tmp_path):
  with pytest.raises(
      FileNotFoundError,
      match=r"config.data.name='tfds:lm1b' is not prepared in "
      r"config.data.tfds_data_dir=.*tfds build lm1b .*--file_format=array_record",
  ):
    train.data.build(config(tmp_path, "lm1b"), workdir=str(tmp_path), process_index=0, process_count=1)
  assert not (tmp_path / "lm1b").exists() or not any((tmp_path / "lm1b").rglob("*.array_record*"))


def test_bad_split_and_bad_languages(tfds_dir, tmp_path):
  with pytest.raises(
      ValueError,
      match=r"config.data.eval_split='dev': tfds:data_test_tiny_translation has " r"splits \['train', 'validation'\]",
  ):
    train.data.build(
        config(tfds_dir, "data_test_tiny_translation", eval_split="dev"),
        workdir=str(tmp_path),
        process_index=0,
        process_count=1,
    )
  with pytest.raises(ValueError, match=r"neither config.data.source_lang/target_lang='fr'/'en'"):
    train.data.build(
        config(tfds_dir, "data_test_tiny_translation", source_lang="fr"),
        workdir=str(tmp_path),
        process_index=0,
        process_count=1,
    )
