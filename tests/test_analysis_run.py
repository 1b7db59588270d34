"""Tests for analysis/run.py: outputs of `run_analysis` on a tiny model, its top eigenvalue against the dense
Hessian, and the config validation."""

import dataclasses
import json
import os

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import curvax
from analysis.analyses import ANALYSES, RETURNED, get_analysis
from analysis.config import PROGRESS_MIN_PARAMS, AnalysisConfig, progress_enabled
from analysis.hessian import ggn_vp_fn
from analysis.run import run_analysis
from configs import default
from models import ModelConfig, get_model
from tests import tiny
from train.loss import make_loss_fn, num_tokens
from train.step import mlm_masked

VOCAB = 7


def _batches():
  rng = np.random.default_rng(0)
  out = []
  for i in range(2):
    targets = rng.integers(3, VOCAB, (3, 5)).astype(np.int32)
    targets[i, -2:] = 0
    out.append({"targets": jnp.asarray(targets)})
  return out


def _config():
  cfg = default.get_config().analysis
  cfg.update(
      dict(
          num_batches=2,
          batch_size=3,
          lanczos_steps=40,
          top_k=2,
          bottom_k=1,
          num_probes=2,
          trace_probes=4,
          block_lanczos_steps=5,
          block_filter="layer_0/mlp_out|embedding",
      )
  )
  return cfg


@pytest.fixture(scope="module")
def result(tmp_path_factory):
  config = tiny.model_config(vocab_size=VOCAB, arch="decoder", d_model=4, d_ff=4, max_len=8)
  batches = _batches()
  model, variables = tiny.init(config, batches[0])
  out_dir = str(tmp_path_factory.mktemp("analysis"))
  lines = []
  summary = run_analysis(
      _config(), model=model, variables=variables, batches=batches, out_dir=out_dir, label="init", print_fn=lines.append
  )
  return dict(
      summary=summary, dir=os.path.join(out_dir, "init"), lines=lines, model=model, variables=variables, batches=batches
  )


def _load(r, name):
  with open(os.path.join(r["dir"], name)) as f:
    return json.load(f)


@pytest.mark.parametrize("name", list(ANALYSES))
def test_each_analysis_writes_times_and_returns_its_record_only_when_its_keys_turn_it_on(result, name):
  """The fixture's config turns on eigenvalues, spectrum, trace, blocks, grad_norms and signal, and leaves stability
  (no Adam constants, no edge predictors), params and mlp_moments off."""
  on = {"eigenvalues", "spectrum", "trace", "blocks", "grad_norms", "signal"}
  meta = _load(result, "metadata.json")
  written = os.path.exists(os.path.join(result["dir"], f"{name}.json"))
  assert written == (name in on) == (f"{name}_s" in meta["timings"])
  if name in RETURNED:
    assert (RETURNED[name] in result["summary"]) == written
    if written:
      assert result["summary"][RETURNED[name]] == _load(result, f"{name}.json")


def test_an_unknown_analysis_names_the_registered_ones():
  assert get_analysis("trace") is ANALYSES["trace"]
  with pytest.raises(ValueError, match=r"analysis 'hessian' is not registered; valid: \['eigenvalues', 'stability'"):
    get_analysis("hessian")


def test_files_keys_and_plots(result):
  meta = _load(result, "metadata.json")
  assert meta["tokens_per_batch"] == [13, 13] and meta["total_tokens"] == 26 and meta["num_batches"] == 2
  assert meta["dtype"] == "float64" and meta["dropout"].startswith("off") and meta["operator"] == "hessian"
  assert "token-weighted" in meta["averaging"] and meta["model_config"]["dtype"] == "float64"
  assert meta["step"] is None and meta["at_init"] is None and meta["batches"] == "given by the caller"
  assert "mlm_masking" not in meta
  eig = _load(result, "eigenvalues.json")
  assert len(eig["top"]["values"]) == 2 and len(eig["bottom"]["values"]) == 1
  assert len(eig["top"]["lanczos"]["alphas"]) == eig["top"]["lanczos"]["num_steps_taken"]
  spec = _load(result, "spectrum.json")
  assert np.asarray(spec["nodes"]).shape == (2, 40) and spec["sigma"] > 0
  np.testing.assert_allclose(np.sum(np.asarray(spec["weights"]), axis=1), 1.0, rtol=1e-10)
  assert set(_load(result, "trace.json")) == {"estimate", "std_error", "num_matvecs", "method"}
  blocks = _load(result, "blocks.json")
  assert [b["name"] for b in blocks] == ["decoder/layer_0/mlp_out", "embedding"]
  grads = _load(result, "grad_norms.json")
  assert len(grads["per_pair"]) == 2 and all(r["count"] == 2 for r in grads["aggregate"])
  signal = _load(result, "signal.json")
  assert len(signal) == 2 and {r["sublayer"] for r in signal[0]["records"]} == {"embedding", "self_attn", "mlp"}
  assert all(len(b["lanczos"]["ritz_values"]) == b["num_steps"] for b in blocks)
  for png in ("eigenvalues", "spectrum", "blocks", "block_spectra", "grad_norms", "signal"):
    assert os.path.getsize(os.path.join(result["dir"], f"{png}.png")) > 1000
  assert any("top eigenvalues: step" in line and "ETA" in line for line in result["lines"])
  assert any("SLQ matvecs: step" in line and "ETA" in line for line in result["lines"])
  assert any(line.startswith("block 1/2 ") and "ETA" in line for line in result["lines"])


@pytest.mark.slow
def test_top_eigenvalue_matches_dense_within_bound(result):
  """The union Hessian (token-weighted = Hessian of the mean over the concatenated batch), densely, in float64."""
  model = result["model"].clone(
      config=ModelConfig(**{**result["model"].config.__dict__, "dtype": jnp.float64, "param_dtype": jnp.float64})
  )
  with jax.enable_x64(True):
    params = jax.tree.map(lambda x: x.astype(jnp.float64), result["variables"]["params"])
    union = {"targets": jnp.concatenate([b["targets"] for b in result["batches"]])}
    eigs = np.linalg.eigvalsh(np.asarray(curvax.dense_hessian(make_loss_fn(model), params, union)))
    float64_model = model.apply({"params": params}, union).dtype == jnp.float64
  top = result["summary"]["eigenvalues"]["top"]
  slack = 1e-10 if float64_model else 1e-5 * abs(eigs[-1])  # models/ casts logits to float32 (see report)
  assert abs(top["values"][0] - eigs[-1]) <= top["bounds"][0] + slack
  bottom = result["summary"]["eigenvalues"]["bottom"]
  assert abs(bottom["values"][0] - eigs[0]) <= bottom["bounds"][0] + slack
  trace = result["summary"]["trace"]
  assert abs(trace["estimate"] - eigs.sum()) <= max(3 * trace["std_error"], 1e-6 * np.abs(eigs).sum())


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("dtype", "float16", r"config.analysis.dtype='float16' is invalid; valid: \['auto', 'float64', 'float32'\]"),
        ("top_k", 50, r"config.analysis.top_k=50 contradicts config.analysis.lanczos_steps="),
        ("trace_method", "exact", r"config.analysis.trace_method='exact' is invalid; valid:"),
        ("trace_method", "xtrace", r"trace_method='xtrace' is invalid; valid: \['hutchinson', 'hutch\+\+'\]"),
        (
            "trace_probes",
            3,
            r"config.analysis.trace_probes=3 contradicts config.analysis.trace_method='hutch\+\+'.*0 \(skip\) or >= 4",
        ),
        ("num_probes", 1, r"config.analysis.num_probes=1 is invalid; valid: an integer >= 2"),
        ("block_filter", "(", r"config.analysis.block_filter='\(' is invalid \(.*\); valid: a regular expression"),
        (
            "reorthogonalize",
            "cgs",
            r"config.analysis.reorthogonalize='cgs' is invalid; valid: \['full', 'partial', 'none'\]",
        ),
        ("progress", "yes", r"config.analysis.progress='yes' is invalid; valid: \['auto', 'on', 'off'\]"),
    ],
)
def test_validation_names_the_key(key, value, match):
  cfg = _config()
  cfg[key] = value
  with pytest.raises(ValueError, match=match):
    AnalysisConfig.from_config(cfg)


def test_progress_lines_by_default_only_from_5m_parameters():
  """'auto': progress lines (a host callback, which keeps a program out of JAX's persistent cache) from
  PROGRESS_MIN_PARAMS = 5M parameters on, the compilation cache below; 'on' / 'off' whatever the size."""
  assert PROGRESS_MIN_PARAMS == 5_000_000
  assert not progress_enabled("auto", 4_999_999) and progress_enabled("auto", 5_000_000)
  assert progress_enabled("on", 10) and not progress_enabled("off", 10**9)
  with pytest.raises(ValueError, match=r"config.analysis.progress='yes' is invalid; valid: \['auto', 'on', 'off'\]"):
    progress_enabled("yes", 10)


def test_missing_batches_fail_before_compute(result):
  with pytest.raises(ValueError, match="analysis.batch_size=3"):
    cfg = _config()
    bad = [{"targets": jnp.ones((2, 5), jnp.int32)}] * 2
    run_analysis(cfg, model=result["model"], variables=result["variables"], batches=bad, out_dir="/tmp/unused")


@pytest.mark.slow
def test_partial_reorthogonalization_config_reaches_lanczos(result, tmp_path):
  cfg = _config()
  cfg.update(
      dict(reorthogonalize="partial", spectrum=False, trace_probes=0, blocks=False, grad_norms=False, signal=False)
  )
  summary = run_analysis(
      cfg,
      model=result["model"],
      variables=result["variables"],
      batches=result["batches"],
      out_dir=str(tmp_path),
      label="partial",
      print_fn=lambda _: None,
  )
  with open(os.path.join(tmp_path, "partial", "eigenvalues.json")) as f:
    top = json.load(f)["top"]
  assert top["lanczos"]["reorthogonalize"] == "partial"
  assert top["lanczos"]["num_reorthogonalizations"] < top["lanczos"]["num_steps_taken"]
  full = result["summary"]["eigenvalues"]["top"]
  assert abs(summary["eigenvalues"]["top"]["values"][0] - full["values"][0]) <= (
      summary["eigenvalues"]["top"]["bounds"][0] + full["bounds"][0] + 1e-9
  )


@pytest.mark.slow
def test_encoder_is_analyzed_on_masked_batches_with_gauss_newton_and_init_seeds(tmp_path):
  """An encoder's batches get one fixed MLM masking (drawn from analysis.seed, recorded); the Gauss–Newton top
  eigenvalue equals the dense GGN's on those masked batches; extra init seeds reach the gradient profile."""
  config = tiny.model_config(vocab_size=VOCAB, arch="encoder", d_model=4, d_ff=4, max_len=8)
  model = get_model(config)
  batches = _batches()
  init_fn = jax.jit(lambda key: model.init(key, mlm_masked(config, batches[0], jax.random.key(9))))
  variables = init_fn(jax.random.key(0))
  cfg = _config()
  cfg.update(
      dict(
          operator="gauss_newton",
          lanczos_steps=30,
          spectrum=False,
          trace_probes=0,
          blocks=False,
          signal=False,
          grad_norm_seeds=2,
          seed=3,
      )
  )
  summary = run_analysis(
      cfg,
      model=model,
      variables=variables,
      batches=batches,
      out_dir=str(tmp_path),
      label="step_0",
      init_fn=init_fn,
      step=0,
      batch_source="two hand-made batches",
      mlm_mask_rate=0.5,
      print_fn=lambda _: None,
  )
  meta = _load({"dir": os.path.join(tmp_path, "step_0")}, "metadata.json")
  assert meta["step"] == 0 and meta["at_init"] is True and meta["batches"] == "two hand-made batches"
  assert "rate 0.5" in meta["mlm_masking"] and "analysis.seed=3" in meta["mlm_masking"]

  keys = jax.random.split(jax.random.fold_in(jax.random.key(3), 1), 2)
  masked = [mlm_masked(config, b, k, 0.5) for b, k in zip(batches, keys)]
  assert meta["tokens_per_batch"] == [int(num_tokens(b)) for b in masked]
  assert all(0 < n < 13 for n in meta["tokens_per_batch"])  # only the selected positions are predicted
  with jax.enable_x64(True):
    params = jax.tree.map(lambda x: x.astype(jnp.float64), variables["params"])
    model64 = model.clone(config=dataclasses.replace(model.config, dtype=jnp.float64, param_dtype=jnp.float64))
    logits_fn = lambda p, b: model64.apply({"params": p}, b, deterministic=True)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    ggn = ggn_vp_fn(logits_fn, params, masked)
    dense = jax.vmap(lambda e: jax.flatten_util.ravel_pytree(ggn(unravel(e)))[0])(jnp.eye(flat.size))
    top = float(np.linalg.eigvalsh(np.asarray(dense))[-1])
  got = summary["eigenvalues"]["top"]
  assert abs(got["values"][0] - top) <= got["bounds"][0] + 1e-8 * top and top > 0

  grads = _load({"dir": os.path.join(tmp_path, "step_0")}, "grad_norms.json")
  assert len(grads["per_pair"]) == 4 and all(r["count"] == 4 for r in grads["aggregate"])  # 2 seeds x 2 batches


def _translation_batches():
  """Sentence pairs: a source `inputs` unrelated to the `targets` text, both of length 5 (so that an encoder could
  be run, wrongly, from source to target)."""
  rng = np.random.default_rng(1)
  out = []
  for i in range(2):
    inputs = rng.integers(3, VOCAB, (3, 5)).astype(np.int32)
    targets = rng.integers(3, VOCAB, (3, 5)).astype(np.int32)
    inputs[i, -1:] = 0
    targets[i, -2:] = 0
    out.append({"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets)})
  return out


@pytest.fixture(scope="module")
def encoder_translation(tmp_path_factory):
  """run_analysis of a tiny encoder on translation batches (float64): top eigenvalue and gradient norms."""
  config = tiny.model_config(vocab_size=VOCAB, arch="encoder", d_model=4, d_ff=4, max_len=8, scale_embeddings=True)
  model = get_model(config)
  batches = _translation_batches()
  variables = jax.jit(model.init)(jax.random.key(0), batches[0])
  cfg = _config()
  cfg.update(dict(lanczos_steps=60, bottom_k=0, spectrum=False, trace_probes=0, blocks=False, signal=False, seed=5))
  out_dir = str(tmp_path_factory.mktemp("encoder_translation"))
  summary = run_analysis(
      cfg,
      model=model,
      variables=variables,
      batches=batches,
      out_dir=out_dir,
      mlm_mask_rate=0.4,
      print_fn=lambda _: None,
  )
  keys = jax.random.split(jax.random.fold_in(jax.random.key(5), 1), 2)  # analysis.seed=5, as documented
  masked = [mlm_masked(config, b, k, 0.4) for b, k in zip(batches, keys)]
  return dict(
      summary=summary,
      dir=os.path.join(out_dir, "init"),
      model=model,
      variables=variables,
      batches=batches,
      masked=masked,
  )


def _ce_sum(model64, params, inputs, targets):
  """(Σ token cross-entropy, tokens) of the encoder reading `inputs`, written out with optax (not train.loss)."""
  logits = model64.apply({"params": params}, {"inputs": inputs}, deterministic=True)
  w = (targets > 0).astype(jnp.float64)
  return jnp.sum(optax.softmax_cross_entropy_with_integer_labels(logits, targets) * w), jnp.sum(w)


def _float64(r):
  model = r["model"]
  model64 = model.clone(config=dataclasses.replace(model.config, dtype=jnp.float64, param_dtype=jnp.float64))
  return model64, jax.tree.map(lambda x: x.astype(jnp.float64), r["variables"]["params"])


@pytest.mark.slow
def test_encoder_on_translation_batches_metadata_records_mlm_masking(encoder_translation):
  """Batches that carry `inputs` are masked too (the train step masks every encoder batch), and metadata says so."""
  r = encoder_translation
  meta = _load(r, "metadata.json")
  assert "rate 0.4" in meta["mlm_masking"] and "analysis.seed=5" in meta["mlm_masking"]
  assert meta["tokens_per_batch"] == [int(jnp.sum(m["targets"] > 0)) for m in r["masked"]]
  assert meta["tokens_per_batch"] != [int(jnp.sum(b["targets"] > 0)) for b in r["batches"]]
  for b, m in zip(r["batches"], r["masked"]):
    # The encoder reads the corrupted target text, never the source: unselected positions are the targets' tokens.
    keep = np.asarray(m["targets"]) == 0
    np.testing.assert_array_equal(np.asarray(m["inputs"])[keep], np.asarray(b["targets"])[keep])
    assert set(m) == {"inputs", "targets"}


@pytest.mark.slow
def test_encoder_on_translation_batches_differentiates_the_mlm_loss(encoder_translation):
  """The gradient analysis/run.py records is the gradient of the MLM loss on the masked target text (written out
  independently), not of the source -> target cross-entropy the batches would give unmasked."""
  r = encoder_translation
  with jax.enable_x64(True):
    model64, params = _float64(r)
    names = [rec["path"] for rec in _load(r, "grad_norms.json")["per_pair"][0]["records"]]

    def norms(loss):
      g = jax.grad(loss)(params)
      flat = {
          "/".join(str(k.key) for k in path): float(jnp.linalg.norm(x))
          for path, x in jax.tree_util.tree_flatten_with_path(g)[0]
      }
      return np.array([flat[n] for n in names])

    for j, (b, m) in enumerate(zip(r["batches"], r["masked"])):
      got = np.array([rec["norm"] for rec in _load(r, "grad_norms.json")["per_pair"][j]["records"]])
      mlm = norms(lambda p, m=m: (lambda s, n: s / n)(*_ce_sum(model64, p, m["inputs"], m["targets"])))
      src = norms(lambda p, b=b: (lambda s, n: s / n)(*_ce_sum(model64, p, b["inputs"], b["targets"])))
      np.testing.assert_allclose(got, mlm, rtol=1e-8, atol=1e-12)
      assert np.max(np.abs(got - src) / np.maximum(src, 1e-12)) > 0.05


@pytest.mark.slow
def test_encoder_on_translation_batches_hessian_is_the_mlm_hessian(encoder_translation):
  """The top eigenvalue equals the dense Hessian's of the token-weighted MLM loss over the masked batches (within
  the Lanczos bound) and is not the source -> target loss's."""
  r = encoder_translation
  with jax.enable_x64(True):
    model64, params = _float64(r)

    def union_loss(p, pairs):
      sums = [_ce_sum(model64, p, i, t) for i, t in pairs]
      return sum(s for s, _ in sums) / sum(n for _, n in sums)

    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def top(pairs):
      h = jax.hessian(lambda x: union_loss(unravel(x), pairs))(flat)
      return float(np.linalg.eigvalsh(np.asarray(h))[-1])

    mlm = top([(m["inputs"], m["targets"]) for m in r["masked"]])
    src = top([(b["inputs"], b["targets"]) for b in r["batches"]])
  got = r["summary"]["eigenvalues"]["top"]
  assert abs(got["values"][0] - mlm) <= got["bounds"][0] + 1e-8 * abs(mlm)
  assert abs(src - mlm) > 10 * got["bounds"][0] + 1e-3 * abs(mlm)
