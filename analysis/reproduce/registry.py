"""The claims registry: `CLAIMS` (name -> `Claim`) and `get_claim(name)`; `run_claim(config, workdir)` runs one.

Contract: every claim has a number (the issue's), a statement, its source (papers and docs/science.md sections), the
paper's scale, the sizes per scale ('tiny' for tests, 'cpu' for the real run: 2 CPU cores, ≤ ~10 minutes) and a
`run(config, scale, seeds, workdir) -> Outcome` whose verdict is decided by code with stated thresholds. `run_claim`
validates `config.reproduce` before any compute, runs the claim and writes `<workdir>/result.json` plus its PNG
figures.
"""

import dataclasses
import time
from typing import Any, Callable

from analysis.reproduce import attention, curvature, gradients, identity, moments, sampling, training_claims
from analysis.reproduce.result import finish

SCALES = ("tiny", "cpu")


@dataclasses.dataclass(frozen=True)
class Claim:
  name: str
  number: int
  statement: str
  source: str
  paper_scale: str
  module: Any  # has SCALES (per-scale sizes incl. default seeds) and run(config, scale, seeds, workdir)
  run_fn: Callable = None

  def run(self, config, scale, seeds, workdir):
    return (self.run_fn or self.module.run)(config, scale, seeds, workdir)

  def default_seeds(self, scale: str) -> tuple:
    return tuple(self.module.SCALES[scale]["seeds"])


def _c(name, number, statement, source, paper_scale, module, run_fn=None):
  return name, Claim(name, number, statement, source, paper_scale, module, run_fn)


CLAIMS = dict(
    [
        _c(
            "truncated_normal",
            1,
            "A normal truncated at ±2σ realizes std 0.8796σ; BERT's initializer_range 0.02 is "
            "really 0.0176; Xavier for d = 768 is 0.0361.",
            "docs/science.md §1–2; Su 2021b (BERT's 0.02); Devlin et al. 2019",
            "BERT-base tensors (d = 768)",
            sampling,
        ),
        _c(
            "activation_moments",
            2,
            "SELU's λ, α come out of the moment equations; the normalized ReLU/GELU keep the "
            "second moment ≈ 1 through 20 layers of an MLP (LeCun init) where plain ReLU/GELU drift.",
            "docs/science.md §2; Su 2021a §3; Klambauer et al. 2017",
            "any width (mean-field statement)",
            moments,
        ),
        _c(
            "attention_scale",
            3,
            "Without 1/√d_k attention logits have std √d_k and the attention entropy collapses at "
            "init; with the scale, or with T5's query-init compensation, it does not.",
            "docs/science.md §4; Vaswani et al. 2017 §3.2.1; Raffel et al. 2020 (Mesh TF init)",
            "d_k = 64, 6+6 layers (Transformer base)",
            attention,
        ),
        _c(
            "identity_path",
            4,
            "At init Post-LN's identity path decays like 2^{-l/2} with depth; Pre-LN's does not.",
            "docs/science.md §6; Su 2021a §6 and Su 2021b derivation",
            "derivation (σ = 1 branches), any width",
            identity,
        ),
        _c(
            "grad_norms",
            5,
            "Xiong et al. Fig. 3: at init per-layer gradient norms grow toward the output for Post-LN "
            "and are flat for Pre-LN; the last layer's FFN gradient norm is ~constant in depth L for Post-LN and "
            "decreases like L^{-1/2} for Pre-LN.",
            "Xiong et al. 2020, Fig. 3 and Theorem 1",
            "6+6 layers, d = 512, IWSLT14 De-En",
            gradients,
        ),
        _c(
            "warmup",
            6,
            "Xiong et al. Fig. 2: Post-LN without warmup trains worse or diverges where Post-LN with warmup "
            "and Pre-LN without warmup train.",
            "Xiong et al. 2020, Fig. 2; docs/science.md §8",
            "6+6 layers, d = 512, IWSLT14 De-En, ~100k steps",
            training_claims,
            training_claims.run_warmup,
        ),
        _c(
            "hessian_spectrum",
            7,
            "The slides' experiment: at init (6-layer encoder-decoder, Xavier, Multi30k pairs) "
            "Post-LN has larger top Hessian eigenvalues and a wider spectrum than Pre-LN.",
            "Zhang & Mackey 2022 (slides); docs/science.md §9",
            "6+6 layers, d = 512, 1000 Multi30k pairs",
            curvature,
        ),
        _c(
            "tfixup",
            8,
            "T-Fixup: without LayerNorm and without warmup a deep model trains where Post-LN without " "warmup fails.",
            "Huang et al. 2020; docs/science.md §7",
            "6+6 to 200+200 layers, d = 512, IWSLT/WMT",
            training_claims,
            training_claims.run_tfixup,
        ),
        _c(
            "bert_vs_xavier",
            9,
            "BERT's 0.02 vs Xavier in a Post-LN model: the smaller init keeps the identity path "
            "stronger at init and trains better without long warmup.",
            "Su 2021b; docs/science.md §6",
            "BERT-base (12 layers, d = 768), pre-training",
            training_claims,
            training_claims.run_bert_vs_xavier,
        ),
        _c(
            "deep_no_warmup",
            10,
            "ReZero / scheduled α / DeepNorm / Admin train without warmup at depth.",
            "Bachlechner et al. 2020; Su 2021a §6; Wang et al. 2022; Liu et al. 2020",
            "12–1000 layers, d ≥ 512, WMT / IWSLT",
            training_claims,
            training_claims.run_deep_no_warmup,
        ),
    ]
)


def get_claim(name: str) -> Claim:
  """The claim registered as `name`; raises ValueError listing the valid names."""
  if name not in CLAIMS:
    raise ValueError(f"reproduce.claim={name!r} is not one of {list(CLAIMS)}")
  return CLAIMS[name]


def validate_reproduce_config(rc) -> tuple[Claim, str, tuple]:
  """(claim, scale, seeds) from `config.reproduce`; ValueError naming the key, the value and the choices."""
  claim = get_claim(rc.claim)
  if rc.scale not in SCALES:
    raise ValueError(f"reproduce.scale={rc.scale!r} is not one of {list(SCALES)}")
  seeds = tuple(rc.seeds) if rc.seeds else claim.default_seeds(rc.scale)
  if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
    raise ValueError(f"reproduce.seeds={rc.seeds!r} must be a tuple of integers >= 0 (empty: the scale's default)")
  return claim, rc.scale, seeds


def run_claim(config, workdir: str) -> dict:
  """Runs the claim `config.reproduce.claim`; writes `<workdir>/result.json` and its figures; returns the result.

  Args:
    config: a config from `configs/reproduce/` (mode 'reproduce', with the `reproduce` subtree).
    workdir: output folder (created).

  Returns:
    The result dict (see `analysis.reproduce.result.finish`).
  """
  if "reproduce" not in config:
    raise ValueError("config has no `reproduce` subtree; use a config from configs/reproduce/")
  claim, scale, seeds = validate_reproduce_config(config.reproduce)
  start = time.perf_counter()
  outcome = claim.run(config, scale, seeds, workdir)
  return finish(claim, scale, outcome, workdir, time.perf_counter() - start)
