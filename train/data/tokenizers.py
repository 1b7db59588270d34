"""Tokenizers: a word-level one for the embedded task and a cached SentencePiece one for real text.

Reserved ids, as in Flax's wmt example (its tokenizer trains SentencePiece with pad_id=0, eos_id=1, unk_id=2,
bos_id=-1): 0 = padding, 1 = end of sequence, 2 = unknown. There is no BOS: the model shifts targets right
itself for teacher forcing.

Contract shared by both tokenizers:
  encode(text) -> list[int]   token ids WITHOUT the EOS (the pipeline appends it);
  decode(ids) -> str          stops at the first EOS, skips padding;
  vocab_size                  number of ids (embedding rows).

SentencePiece models are cached as `spm_<key>.model` files, the key hashing everything that determines the
model (corpus identity, vocab size, corpus cap), so a stale model is never reused. `cache_dirs` are tried in
order: an existing model is loaded from the first that has it, a new one is written to the first that is
writable. "Writable" reads the permission bits as well as os.access, because root passes os.access on a
directory marked read-only (r-x) such as the shared data folder, and we must not write there. A URI (a sweep's
`gs://.../tokenizer`) is read and written through `etils.epath`, the object uploaded whole.

Several processes (a multi-process JAX run): the model is loaded or trained, and cached, by process 0 alone; the
other processes wait for it and receive its bytes (`multihost_utils.broadcast_one_to_all`, a collective, so it is
also the barrier), so it is trained once and no filesystem needs to be shared between the hosts.
"""

import functools
import hashlib
import io
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence

import numpy as np
import sentencepiece as spm
from etils import epath

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
RESERVED = ("<pad>", "</s>", "<unk>")


def _cut(ids: Iterable[int]) -> list[int]:
  """Ids up to (excluding) the first EOS, without padding."""
  out = []
  for i in np.asarray(ids).reshape(-1).tolist():
    if i == EOS_ID:
      break
    if i != PAD_ID:
      out.append(int(i))
  return out


class WordTokenizer:
  """Whitespace word tokenizer over a closed vocabulary (the embedded task's lexicon)."""

  pad_id = PAD_ID
  eos_id = EOS_ID
  unk_id = UNK_ID

  def __init__(self, words: Sequence[str]):
    """Args: words: the vocabulary; ids 3.. in the given order after the reserved ids."""
    self._words = list(RESERVED) + list(words)
    self._ids = {w: i for i, w in enumerate(self._words)}
    if len(self._ids) != len(self._words):
      raise ValueError("WordTokenizer: the vocabulary has duplicate words or reserved symbols.")

  @property
  def vocab_size(self) -> int:
    return len(self._words)

  def encode(self, text: str) -> list[int]:
    return [self._ids.get(w, UNK_ID) for w in text.split()]

  def decode(self, ids: Iterable[int]) -> str:
    return " ".join(self._words[i] if i < len(self._words) else RESERVED[UNK_ID] for i in _cut(ids))


class SentencePieceTokenizer:
  """A SentencePiece model (unigram) with the reserved ids above."""

  pad_id = PAD_ID
  eos_id = EOS_ID
  unk_id = UNK_ID

  def __init__(self, model_proto: bytes):
    self._sp = spm.SentencePieceProcessor(model_proto=model_proto)
    if (self._sp.pad_id(), self._sp.eos_id(), self._sp.unk_id()) != (PAD_ID, EOS_ID, UNK_ID):
      raise ValueError("SentencePiece model does not use pad=0, eos=1, unk=2; delete the cached model.")

  @property
  def vocab_size(self) -> int:
    return self._sp.GetPieceSize()

  def encode(self, text: str) -> list[int]:
    return self._sp.EncodeAsIds(text)

  def decode(self, ids: Iterable[int]) -> str:
    return self._sp.DecodeIds(_cut(ids))


def is_writable_dir(path: str) -> bool:
  """True if `path` is a directory we may write to, honouring r-x permission bits even for root."""
  if not os.path.isdir(path) or not os.access(path, os.W_OK):
    return False
  return bool(os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def corpus_key(*parts) -> str:
  """A short stable hash of the things that determine a SentencePiece model."""
  h = hashlib.sha256()
  for part in parts:
    h.update(part if isinstance(part, bytes) else repr(part).encode())
    h.update(b"\0")
  return h.hexdigest()[:16]


def _capped(texts: Iterable[str], max_chars: int) -> Iterable[str]:
  """Yields texts until max_chars characters have been yielded (as flax wmt's max_corpus_chars)."""
  total = 0
  for text in texts:
    text = text.strip()
    if not text:
      continue
    yield text
    total += len(text)
    if total >= max_chars:
      return


def train_sentencepiece(texts: Iterable[str], *, vocab_size: int, max_corpus_chars: int) -> bytes:
  """Trains a unigram SentencePiece model in memory and returns its serialized proto.

  Args:
    texts: training sentences (e.g. both sides of a parallel corpus for a joint model).
    vocab_size: number of pieces including the 3 reserved ones.
    max_corpus_chars: stop reading `texts` after this many characters.

  Returns:
    The model proto bytes.
  """
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(_capped(texts, max_corpus_chars)),
      model_writer=model,
      vocab_size=vocab_size,
      model_type="unigram",
      character_coverage=1.0,
      pad_id=PAD_ID,
      eos_id=EOS_ID,
      unk_id=UNK_ID,
      bos_id=-1,
      # The corpus is already capped; let SentencePiece read all of it. Fewer pieces than asked (tiny corpora)
      # is allowed rather than an error, and the real size is reported by vocab_size.
      input_sentence_size=0,
      hard_vocab_limit=False,
      num_threads=os.cpu_count() or 1,
      minloglevel=2,
  )
  return model.getvalue()


def load_or_train(
    texts_fn, *, key: str, vocab_size: int, max_corpus_chars: int, cache_dirs: Sequence[str]
) -> tuple[SentencePieceTokenizer, str]:
  """Loads the cached model `spm_<key>.model` or trains and caches it (on process 0 only; see the module docstring).

  Args:
    texts_fn: zero-argument callable returning the training texts (only called when training).
    key: cache key from corpus_key(); must cover vocab_size and max_corpus_chars.
    vocab_size: SentencePiece vocab size.
    max_corpus_chars: corpus cap for training.
    cache_dirs: directories tried in order (see the module docstring).

  Returns:
    (tokenizer, path of the cached model file: on process 0's filesystem in a multi-process run).
  """
  make = functools.partial(_load_or_train_here, texts_fn, key, vocab_size, max_corpus_chars, cache_dirs)
  proto, path = _from_process_zero(make) if _several_processes() else make()
  return SentencePieceTokenizer(proto), path


def _several_processes() -> bool:
  import jax  # here, so the data layer imports no JAX; initialized JAX is asked, single processes touch no device

  return jax.distributed.is_initialized() and jax.process_count() > 1


def _from_process_zero(make) -> tuple[bytes, str]:
  """`make()` -> (proto, path) run on process 0; every process returns its result. Process 0 failing raises on every
  process instead of leaving the others waiting."""
  import jax
  from jax.experimental import multihost_utils

  payload, error = b"", None
  if jax.process_index() == 0:
    try:
      proto, path = make()
      payload = path.encode() + b"\0" + proto
    except Exception as e:  # noqa: BLE001  (re-raised below, after telling the others)
      error = e
  # Two collectives on every process: the length (-1: process 0 failed), then the bytes.
  size = int(multihost_utils.broadcast_one_to_all(np.int32(-1 if error else len(payload))))
  if error is not None:
    raise error
  if size < 0:
    raise RuntimeError("process 0 failed to load or train the SentencePiece model (its log has the error)")
  buffer = np.frombuffer(payload, np.uint8) if jax.process_index() == 0 else np.zeros(size, np.uint8)
  path, _, proto = np.asarray(multihost_utils.broadcast_one_to_all(buffer)).tobytes().partition(b"\0")
  return proto, path.decode()


def _load_or_train_here(texts_fn, key, vocab_size, max_corpus_chars, cache_dirs) -> tuple[bytes, str]:
  """(model proto, path) from the first cache dir that has the model, else trained and written to the first
  writable one."""
  filename = f"spm_{key}.model"
  for d in cache_dirs:
    path = os.path.join(d, filename)
    if "://" in d:  # a URI (a sweep's gs:// workdir): through epath; an object is written whole, no rename needed
      if epath.Path(path).exists():
        return epath.Path(path).read_bytes(), path
    elif os.path.isfile(path):
      with open(path, "rb") as f:
        return f.read(), path
  proto = train_sentencepiece(texts_fn(), vocab_size=vocab_size, max_corpus_chars=max_corpus_chars)
  for d in cache_dirs:
    if "://" in d:
      try:
        epath.Path(d).mkdir(parents=True, exist_ok=True)
        epath.Path(d, filename).write_bytes(proto)
        return proto, os.path.join(d, filename)
      except OSError:
        continue
    if not os.path.isdir(d):
      try:
        os.makedirs(d)
      except OSError:
        continue
    if not is_writable_dir(d):
      continue
    path = os.path.join(d, filename)
    try:  # Atomic write, so a concurrent process never reads half a model.
      fd, tmp = tempfile.mkstemp(dir=d, prefix=".spm_tmp_")
      with os.fdopen(fd, "wb") as f:
        f.write(proto)
      os.chmod(tmp, 0o644)  # mkstemp makes 0600; other users of a shared cache must read it.
      os.replace(tmp, path)
      return proto, path
    except OSError:
      continue
  raise OSError(f"No writable directory to cache the SentencePiece model among {list(cache_dirs)}.")
