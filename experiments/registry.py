"""The claims: `CLAIM_NAMES` (in the report's order), `get_claim(name)` and the typed `config.claim` group.

Each claim lives in `experiments/claims/<name>.py` as `CLAIM = study.Study(...)` (measure, verdict, figure) and its
sweep in `configs/claims/<name>.py`; modules are imported when a claim is asked for.
"""

import dataclasses
import importlib

from configs.schema import Section, invalid
from experiments.study import Study

CLAIM_NAMES = (
    "truncated_normal",
    "activation_moments",
    "attention_scale",
    "identity_path",
    "grad_norms",
    "warmup",
    "hessian_spectrum",
    "tfixup",
    "bert_vs_xavier",
    "deep_no_warmup",
    "edge",
    "width",
    "depth",
    "edge_boundary",
)
SCALES = ("tiny", "cpu", "paper")


def get_claim(name: str) -> Study:
  """The claim registered as `name`; ValueError naming the key and the valid names."""
  if name not in CLAIM_NAMES:
    raise invalid("claim.name", name, f"one of {list(CLAIM_NAMES)}")
  claim = importlib.import_module(f"experiments.claims.{name}").CLAIM
  if claim.name != name or claim.number != CLAIM_NAMES.index(name) + 1:
    raise RuntimeError(
        f"experiments/claims/{name}.py defines claim {claim.name!r} number {claim.number}; "
        f"the registry expects {name!r} number {CLAIM_NAMES.index(name) + 1}"
    )
  return claim


@dataclasses.dataclass(frozen=True)
class ClaimConfig(Section):
  """The `config.claim` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "claim"
  name: str
  scale: str
  decide: bool
  predictors_from: str

  def __post_init__(self):
    if self.name and self.name not in CLAIM_NAMES:
      raise invalid("claim.name", self.name, f"one of {list(CLAIM_NAMES)}")
    if self.scale not in SCALES:
      raise invalid("claim.scale", self.scale, f"one of {list(SCALES)} (set by the config string, e.g. ':tiny')")
