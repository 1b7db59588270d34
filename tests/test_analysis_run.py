"""Tests for analysis/run.py: outputs of `run_analysis` on a tiny model, its top eigenvalue against the dense
Hessian, and the config validation."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from analysis.hessian import dense_hessian
from analysis.run import default_analysis_config, run_analysis, validate_analysis_config
from models import ModelConfig, get_model
from train.loss import make_loss_fn

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
    cfg = default_analysis_config()
    cfg.update(dict(num_batches=2, batch_size=3, lanczos_steps=40, top_k=2, bottom_k=1, num_probes=2,
                    trace_probes=4, block_lanczos_steps=5, block_filter="layer_0/mlp_out|embedding"))
    return cfg


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    config = ModelConfig(vocab_size=VOCAB, arch="decoder", num_decoder_layers=1, d_model=4, num_heads=2, d_ff=4,
                         max_len=8)
    model = get_model(config)
    batches = _batches()
    variables = jax.jit(model.init)(jax.random.key(0), batches[0])
    out_dir = str(tmp_path_factory.mktemp("analysis"))
    lines = []
    summary = run_analysis(_config(), model=model, variables=variables, batches=batches, out_dir=out_dir,
                           label="init", print_fn=lines.append)
    return dict(summary=summary, dir=os.path.join(out_dir, "init"), lines=lines, model=model, variables=variables,
                batches=batches)


def _load(r, name):
    with open(os.path.join(r["dir"], name)) as f:
        return json.load(f)


def test_files_keys_and_plots(result):
    meta = _load(result, "metadata.json")
    assert meta["tokens_per_batch"] == [13, 13] and meta["total_tokens"] == 26 and meta["num_batches"] == 2
    assert meta["dtype"] == "float64" and meta["dropout"].startswith("off") and meta["operator"] == "hessian"
    assert "token-weighted" in meta["averaging"] and meta["model_config"]["dtype"] == "float64"
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
    for png in ("eigenvalues", "spectrum", "blocks", "grad_norms", "signal"):
        assert os.path.getsize(os.path.join(result["dir"], f"{png}.png")) > 1000
    assert any("top eigenvalues: step" in line and "ETA" in line for line in result["lines"])
    assert any("SLQ: matvec" in line for line in result["lines"])


def test_top_eigenvalue_matches_dense_within_bound(result):
    """The union Hessian (token-weighted = Hessian of the mean over the concatenated batch), densely, in float64."""
    model = result["model"].clone(config=ModelConfig(**{**result["model"].config.__dict__, "dtype": jnp.float64,
                                                        "param_dtype": jnp.float64}))
    with jax.enable_x64(True):
        params = jax.tree.map(lambda x: x.astype(jnp.float64), result["variables"]["params"])
        union = {"targets": jnp.concatenate([b["targets"] for b in result["batches"]])}
        eigs = np.linalg.eigvalsh(np.asarray(dense_hessian(make_loss_fn(model), params, union)))
        float64_model = model.apply({"params": params}, union).dtype == jnp.float64
    top = result["summary"]["eigenvalues"]["top"]
    slack = 1e-10 if float64_model else 1e-5 * abs(eigs[-1])  # models/ casts logits to float32 (see report)
    assert abs(top["values"][0] - eigs[-1]) <= top["bounds"][0] + slack
    bottom = result["summary"]["eigenvalues"]["bottom"]
    assert abs(bottom["values"][0] - eigs[0]) <= bottom["bounds"][0] + slack
    trace = result["summary"]["trace"]
    assert abs(trace["estimate"] - eigs.sum()) <= max(3 * trace["std_error"], 1e-6 * np.abs(eigs).sum())


@pytest.mark.parametrize("key,value,match", [
    ("dtype", "float16", r"analysis.dtype='float16' is not one of"),
    ("top_k", 50, r"analysis.top_k=50"),
    ("trace_method", "exact", r"analysis.trace_method='exact' is not one of"),
    ("trace_probes", 3, r"analysis.trace_probes=3 must be 0 \(skip\) or >= 4"),
    ("num_probes", 1, r"analysis.num_probes=1 must be an int >= 2"),
    ("block_filter", "(", r"analysis.block_filter='\(' is not a valid regular expression"),
    ("reorthogonalize", "cgs", r"analysis.reorthogonalize='cgs' is not one of \['full', 'partial', 'none'\]"),
])
def test_validation_names_the_key(key, value, match):
    cfg = _config()
    cfg[key] = value
    with pytest.raises(ValueError, match=match):
        validate_analysis_config(cfg)


def test_missing_batches_fail_before_compute(result):
    with pytest.raises(ValueError, match="analysis.batch_size=3"):
        cfg = _config()
        bad = [{"targets": jnp.ones((2, 5), jnp.int32)}] * 2
        run_analysis(cfg, model=result["model"], variables=result["variables"], batches=bad, out_dir="/tmp/unused")


def test_partial_reorthogonalization_config_reaches_lanczos(result, tmp_path):
    cfg = _config()
    cfg.update(dict(reorthogonalize="partial", spectrum=False, trace_probes=0, blocks=False, grad_norms=False,
                    signal=False))
    summary = run_analysis(cfg, model=result["model"], variables=result["variables"], batches=result["batches"],
                           out_dir=str(tmp_path), label="partial", print_fn=lambda _: None)
    with open(os.path.join(tmp_path, "partial", "eigenvalues.json")) as f:
        top = json.load(f)["top"]
    assert top["lanczos"]["reorthogonalize"] == "partial"
    assert top["lanczos"]["num_reorthogonalizations"] < top["lanczos"]["num_steps_taken"]
    full = result["summary"]["eigenvalues"]["top"]
    assert abs(summary["eigenvalues"]["top"]["values"][0] - full["values"][0]) <= (
        summary["eigenvalues"]["top"]["bounds"][0] + full["bounds"][0] + 1e-9)
