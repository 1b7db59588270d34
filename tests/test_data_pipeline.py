"""Pipeline behaviour on the embedded source: shapes, resume exactness, packing, sharding, eval, config errors."""

import collections
import json

import numpy as np
import pytest

import train.data
from configs import default
from train.data import pipeline, sources, tokenizers
from train.data.corpus import Corpus, one_side, translation_examples


def small_config(**overrides):
  c = default.get_config().data
  c.embedded.num_train = 1000
  c.embedded.num_eval = 50
  c.batch_size = 8
  c.eval_batch_size = 16
  for key, value in overrides.items():
    c[key] = value
  return c


@pytest.fixture(scope="module")
def data():
  return train.data.build(small_config(), workdir="/nonexistent", process_index=0, process_count=1)


def _take(it, n):
  return [next(it) for _ in range(n)]


def _rows(batch, key):
  """Non-padding token lists of each row."""
  return [tuple(int(t) for t in row if t != 0) for row in batch[key]]


def test_train_batch_shapes_ids_and_eos(data):
  batch = next(data.train_iter())
  assert set(batch) == {"inputs", "targets"}
  assert batch["inputs"].shape == (8, 32) and batch["targets"].shape == (8, 32)
  assert batch["inputs"].dtype == np.int32 and batch["targets"].dtype == np.int32
  for key in ("inputs", "targets"):
    for row in batch[key]:
      n = int(np.count_nonzero(row))
      # Tokens, then exactly one EOS, then padding only; no BOS and no UNK for in-vocabulary text.
      assert row[n - 1] == tokenizers.EOS_ID and np.all(row[n:] == 0) and np.all(row[: n - 1] >= 3)
  assert data.task == "translation" and data.tokenizer.vocab_size == 309
  assert data.max_source_length == data.max_target_length == 32


@pytest.mark.parametrize("pack", [False, True])
def test_resume_continues_on_exact_next_batch(pack):
  d = train.data.build(small_config(pack=pack), workdir="/nonexistent", process_index=0, process_count=1)
  it = d.train_iter()
  _take(it, 5)
  state = json.loads(json.dumps(it.get_state()))  # The state survives JSON.
  expected = _take(it, 3)
  resumed = d.train_iter()
  resumed.set_state(state)
  for a, b in zip(expected, _take(resumed, 3)):
    assert a.keys() == b.keys()
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


def test_epochs_are_reshuffled_and_complete():
  # 40 examples with distinct one-word texts, so every row names its example.
  words = [f"w{i}" for i in range(40)]
  tok = tokenizers.WordTokenizer(words)
  examples = translation_examples([(w, w) for w in words])
  lengths = {"inputs": 4, "targets": 4}
  ds = pipeline.train_dataset(
      examples,
      pipeline.tokenize_fn(tok, "translation", lengths, "drop"),
      lengths=lengths,
      policy="drop",
      batch_size=5,
      seed=7,
      pack=False,
      process_index=0,
      process_count=1,
  )
  it = iter(ds)
  epoch1 = [r[0] for b in _take(it, 8) for r in _rows(b, "targets")]
  epoch2 = [r[0] for b in _take(it, 8) for r in _rows(b, "targets")]
  assert sorted(epoch1) == sorted(epoch2) == list(range(3, 43))
  assert epoch1 != epoch2 and epoch1 != sorted(epoch1)


@pytest.mark.parametrize("pack", [False, True])
def test_global_batches_do_not_depend_on_the_process_count(pack):
  """Processes 0 and 1 of 2 hold disjoint halves of the global batch one process with twice the rows holds, step
  by step (also packed): a 2-host run trains on the batches a 1-host run does, and together they cover the split."""
  words = [f"w{i}" for i in range(60)]
  tok = tokenizers.WordTokenizer(words)
  examples = translation_examples([(w, w) for w in words])
  lengths = {"inputs": 4, "targets": 4}

  def stream(process_index, process_count):
    return iter(
        pipeline.train_dataset(
            examples,
            pipeline.tokenize_fn(tok, "translation", lengths, "drop"),
            lengths=lengths,
            policy="drop",
            batch_size=12 // process_count,
            seed=0,
            pack=pack,
            process_index=process_index,
            process_count=process_count,
        )
    )

  one, halves = stream(0, 1), [stream(i, 2) for i in range(2)]
  seen = set()
  for _ in range(5):  # one epoch of 60 examples is 5 global batches of 12 (unpacked)
    whole, parts = next(one), [next(h) for h in halves]
    for key in whole:
      np.testing.assert_array_equal(whole[key], np.concatenate([p[key] for p in parts]))
    words = [{t for r in _rows(p, "inputs") for t in r if t >= 3} for p in parts]  # ids 3.. are the 60 words
    assert len(parts[0]["inputs"]) == len(parts[1]["inputs"]) == 6
    assert words[0] and words[1]
    if not pack:  # (a packed batch may hold examples of two epochs, hence repeats)
      assert not words[0] & words[1]
    seen |= words[0] | words[1]
  if not pack:
    assert seen == set(range(3, 63))


def test_build_sharding_two_processes_eval_and_train():
  c = small_config()
  ds = [train.data.build(c, workdir="/nonexistent", process_index=i, process_count=2) for i in range(2)]
  assert ds[0].batch_size == 4 and ds[0].eval_batch_size == 8
  assert next(ds[0].train_iter())["inputs"].shape == (4, 32)
  full = train.data.build(c, workdir="/nonexistent", process_index=0, process_count=1)
  all_rows = [r for b in full.eval_batches() for r in _rows(b, "targets") if r]
  per_process = [[r for b in d.eval_batches() for r in _rows(b, "targets") if r] for d in ds]
  assert len(list(ds[0].eval_batches())) == len(list(ds[1].eval_batches())) == 4  # ceil(25 / 8).
  assert sorted(per_process[0] + per_process[1]) == sorted(all_rows) and len(all_rows) == 50
  assert not set(per_process[0]) & set(per_process[1])


def test_eval_pass_in_order_padded_and_deterministic(data):
  batches = list(data.eval_batches())
  assert len(batches) == 4  # ceil(50 / 16).
  again = list(data.eval_batches())
  for a, b in zip(batches, again):
    np.testing.assert_array_equal(a["targets"], b["targets"])
  assert all(b["inputs"].shape == (16, 32) for b in batches)
  # The last batch holds 50 - 48 = 2 real rows and 14 all-padding rows.
  assert np.count_nonzero(batches[-1]["targets"].any(axis=1)) == 2
  assert not batches[-1]["inputs"][2:].any() and not batches[-1]["targets"][2:].any()
  decoded = [
      (data.tokenizer.decode(s), data.tokenizer.decode(t))
      for b in batches
      for s, t in zip(b["inputs"], b["targets"])
      if t.any()
  ]
  examples = data.eval_examples()
  assert len(examples) == 50 and decoded == examples


def test_num_eval_examples_caps_eval_examples():
  d = train.data.build(small_config(num_eval_examples=7), workdir="/nonexistent", process_index=0, process_count=1)
  assert len(d.eval_examples()) == 7


@pytest.mark.parametrize("policy", ["drop", "truncate"])
def test_length_policy(policy):
  c = small_config(max_source_length=10, max_target_length=10, length_policy=policy)
  d = train.data.build(c, workdir="/nonexistent", process_index=0, process_count=1)
  batches = _take(d.train_iter(), 20)
  lengths = [np.count_nonzero(b[k], axis=1) for b in batches for k in ("inputs", "targets")]
  lengths = np.concatenate(lengths)
  assert lengths.max() <= 10
  for b in batches:
    for key in ("inputs", "targets"):
      for row in b[key]:
        assert row[np.count_nonzero(row) - 1] == tokenizers.EOS_ID  # Still ends in EOS after truncation.
  if policy == "truncate":
    assert np.mean(lengths == 10) > 0.3  # Sentences of >= 9 words were cut to 9 tokens + EOS.
  else:
    assert np.mean(lengths == 10) < 0.3


def test_packing_format_matches_flax_wmt_and_preserves_examples():
  c = small_config(pack=True)
  packed = _take(train.data.build(c, workdir="/x", process_index=0, process_count=1).train_iter(), 3)
  plain_it = train.data.build(small_config(), workdir="/x", process_index=0, process_count=1).train_iter()
  keys = {"inputs", "targets", "inputs_segmentation", "inputs_position", "targets_segmentation", "targets_position"}
  segments = []
  for b in packed:
    assert set(b) == keys and all(v.shape == (8, 32) and v.dtype == np.int32 for v in b.values())
    for r in range(8):
      row_segments = {}
      for f in ("inputs", "targets"):
        tokens, seg, pos = b[f][r], b[f + "_segmentation"][r], b[f + "_position"][r]
        np.testing.assert_array_equal(seg == 0, tokens == 0)  # Padding exactly where segment id is 0.
        np.testing.assert_array_equal(pos[seg == 0], 0)
        ids = sorted(set(seg[seg > 0].tolist()))
        assert ids == list(range(1, len(ids) + 1))  # Segment ids 1, 2, ... in the row.
        for s in ids:
          where = np.flatnonzero(seg == s)
          assert np.all(np.diff(where) == 1)  # Contiguous.
          np.testing.assert_array_equal(pos[where], np.arange(len(where)))  # Positions restart at 0.
          assert tokens[where[-1]] == tokenizers.EOS_ID and np.all(tokens[where[:-1]] > 2)
          row_segments.setdefault(s, {})[f] = tuple(tokens[where].tolist())
      # Inputs and targets of one example share a segment id.
      assert all(len(v) == 2 for v in row_segments.values())
      segments += [(v["inputs"], v["targets"]) for v in row_segments.values()]
  assert len(segments) > 3 * 8  # More than one example per row on average.
  # First-fit packing consumes the shuffled stream in order: the packed batches hold exactly its prefix.
  plain = []
  while len(plain) < len(segments):
    b = next(plain_it)
    plain += list(zip(_rows(b, "inputs"), _rows(b, "targets")))
  assert collections.Counter(segments) == collections.Counter(plain[: len(segments)])


@pytest.mark.parametrize("name", [*[k for k in sources.SOURCES if k != "tfds"], "tfds:some/name"])
def test_registry_resolves_every_name(name):
  loader, dataset = sources.get_source(name)
  assert loader is sources.SOURCES[name.split(":")[0]]
  assert dataset == (name[5:] if name.startswith("tfds:") else name)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("name", "wmt_nope", r"config.data.name='wmt_nope' is invalid; valid: 'embedded', 'multi30k', 'tfds:<name>'"),
        ("name", "tfds:", r"config.data.name='tfds:'"),
        ("batch_size", 7, r"config.data.batch_size=7 is invalid .*; valid: a multiple of process_count=2"),
        ("eval_batch_size", 9, r"config.data.eval_batch_size=9 is invalid .*; valid: a multiple of"),
        ("max_source_length", -3, r"config.data.max_source_length=-3 is invalid; valid: an integer >= 2"),
        ("max_target_length", 1, r"config.data.max_target_length=1 is invalid; valid: an integer >= 2"),
        ("length_policy", "clip", r"config.data.length_policy='clip' is invalid; valid: \['drop', 'truncate'\]"),
        (
            "eval_split",
            "dev",
            r"config.data.eval_split='dev' is invalid \(data.name='embedded'\); valid: \['validation', 'test'\]",
        ),
        ("train_split", "train[:5]", r"config.data.train_split='train\[:5\]'"),
        ("vocab_size", 0, r"config.data.vocab_size=0"),
        ("lm_side", "en", r"config.data.lm_side='en' is invalid; valid: \['', 'source', 'target'\]"),
    ],
)
def test_bad_config_values_raise_naming_key_value_and_choices(key, value, match):
  c = small_config()
  c[key] = value
  with pytest.raises(ValueError, match=match):
    train.data.build(c, workdir="/x", process_index=0, process_count=2)


def test_limits_that_drop_everything_fail_at_build():
  c = small_config(max_target_length=4)  # Embedded sentences have >= 5 words + EOS.
  with pytest.raises(ValueError, match=r"length_policy='drop' with lengths .*'targets': 4.* drops all"):
    train.data.build(c, workdir="/x", process_index=0, process_count=1)


def test_bad_process_index_and_multi30k_language():
  with pytest.raises(ValueError, match=r"process_index=2 must be in \[0, process_count=2\)"):
    train.data.build(small_config(), workdir="/x", process_index=2, process_count=2)
  c = small_config(name="multi30k", dir="/x", source_lang="fr")
  with pytest.raises(
      ValueError, match=r"config.data.source_lang='fr' is invalid \(data.name='multi30k'\); valid: \['de', 'en'\]"
  ):
    train.data.build(c, workdir="/x", process_index=0, process_count=1)


@pytest.mark.parametrize("side,key", [("source", "inputs"), ("target", "targets")])
def test_lm_side_gives_the_sides_sentences_as_lm_targets(side, key):
  # Limits above the longest sentence (30 words + EOS), so neither build drops anything and both walk the same
  # shuffled stream: row i of the LM batch is row i's `key` of the translation batch, and the eval split keeps
  # its order.
  pair = train.data.build(
      small_config(max_source_length=40, max_target_length=40), workdir="/x", process_count=1, process_index=0
  )
  lm = train.data.build(
      small_config(max_source_length=2, max_target_length=40, lm_side=side),
      workdir="/x",
      process_count=1,
      process_index=0,
  )
  assert (lm.task, lm.max_source_length, lm.max_target_length) == ("lm", 0, 40)
  it_pair, it_lm = pair.train_iter(), lm.train_iter()
  for _ in range(3):
    b_pair, b_lm = next(it_pair), next(it_lm)
    assert set(b_lm) == {"targets"}
    np.testing.assert_array_equal(b_lm["targets"], b_pair[key])
  column = 0 if side == "source" else 1
  assert lm.eval_examples() == [("", p[column]) for p in pair.eval_examples()]
  lm_eval = np.concatenate([b["targets"] for b in lm.eval_batches()])
  pair_eval = np.concatenate([b[key] for b in pair.eval_batches()])
  np.testing.assert_array_equal(lm_eval, pair_eval)


def test_lm_side_packs_one_side_only():
  lm = train.data.build(small_config(lm_side="target", pack=True), workdir="/x", process_count=1, process_index=0)
  batch = next(lm.train_iter())
  assert set(batch) == {"targets", "targets_segmentation", "targets_position"}
  seg = batch["targets_segmentation"]
  assert seg.max() >= 2  # several sentences share a row of 32 tokens
  ends = batch["targets"][(seg > 0) & (np.roll(seg, -1, axis=1) != seg)]
  assert np.all(ends == tokenizers.EOS_ID)  # every packed segment is one sentence ending in its EOS


def test_lm_side_refuses_a_corpus_without_sides():
  lm = Corpus(task="lm", tokenizer=None, train=translation_examples([]), eval=translation_examples([]))
  with pytest.raises(ValueError, match=r"config.data.lm_side='target' is invalid \(the source is a 'lm' corpus\)"):
    one_side(lm, "target")
