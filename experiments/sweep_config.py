"""The `config.sweep` section, typed and checked once (`SweepConfig`), and the checkpoints a sweep's runs keep.

Contract: `SweepConfig.from_config(config.sweep)` raises, before any compute, in the config boundary's format
(`config.sweep.<key>=<value> is invalid; valid: ...`) on a bad key; `sweep.products`, the grid as data, is typed to
tuples here (each product's (key, values) pairs, `ARM` its label and `SEEDS` its own number of seeds) and read into
cells by experiments/grid.py. `check_analysis_steps` checks that `sweep.analysis_steps` are checkpoints a run keeps.
"""

import dataclasses
import re
from typing import Any

from configs.schema import Section, invalid
from experiments import shard as shard_lib

STAGES = ("run", "prepare", "gather")  # sweep.stage (configs/default.py)


@dataclasses.dataclass(frozen=True)
class SweepConfig(Section):
  """The `config.sweep` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "sweep"
  grid: str
  products: Any
  seeds: int
  first_seed: int
  analysis_at_init: bool
  analysis_steps: Any
  metric: str
  cells_dir: str
  compilation_cache: str
  shard: str
  num_shards: int
  stage: str
  parallel: int
  claim_timeout_s: float

  def __post_init__(self):
    if self.seeds < 1:
      raise invalid("sweep.seeds", self.seeds, "an integer >= 1")
    if self.first_seed < 0:
      raise invalid("sweep.first_seed", self.first_seed, "an integer >= 0")
    if self.shard != "auto":
      shard_lib.parse_shard(self.shard)
    if self.num_shards < 0:
      raise invalid(
          "sweep.num_shards", self.num_shards, "an integer >= 1 (a Kubernetes indexed Job's completions), or 0"
      )
    if self.parallel < 1:
      raise invalid("sweep.parallel", self.parallel, "an integer >= 1 (runs at once on this machine)")
    if self.stage not in STAGES:
      raise invalid("sweep.stage", self.stage, list(STAGES))
    if not self.claim_timeout_s > 0:
      raise invalid(
          "sweep.claim_timeout_s", self.claim_timeout_s, "seconds > 0 (a run's heartbeat every quarter of it)"
      )
    object.__setattr__(self, "products", product_pairs(self.products))
    steps = self.analysis_steps
    if not (
        isinstance(steps, (tuple, list))
        and all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in steps)
        and list(steps) == sorted(set(steps))
    ):
      raise invalid("sweep.analysis_steps", steps, "a tuple of increasing checkpoint steps > 0, e.g. (100, 300)")
    object.__setattr__(self, "analysis_steps", tuple(steps))
    if not re.fullmatch(r"[A-Za-z0-9_]+/[A-Za-z0-9_/]+", self.metric):
      raise invalid("sweep.metric", self.metric, "'<split>/<name>' of metrics.jsonl, e.g. 'eval/loss', 'train/loss'")


PRODUCTS_SYNTAX = (
    "a tuple of products, each a tuple of (key, values) pairs, values a tuple or one value, and an optional "
    "('arm', label) pair and ('seeds', n) pair (its own number of seeds), e.g. ((('arm', 'Pre-LN'), ('model.norm_position', 'pre'), ('optim.warmup_steps', (0, 400))),)"
)
ARM = "arm"  # the pseudo-key of a product's label in `sweep.products`
SEEDS = "seeds"  # the pseudo-key of a product's own number of seeds (`sweep.products` and `sweep.grid`)


def product_pairs(products: Any) -> tuple:
  """`sweep.products` as tuples (FrozenConfigDict's lists become tuples): each product a tuple of (key, values)
  pairs, values a tuple; raises the config boundary's error on another shape."""
  pairs = lambda p: isinstance(p, (tuple, list)) and all(
      isinstance(kv, (tuple, list)) and len(kv) == 2 and isinstance(kv[0], str) for kv in p
  )
  if not isinstance(products, (tuple, list)) or not all(pairs(p) for p in products):
    raise invalid("sweep.products", products, PRODUCTS_SYNTAX)
  values = lambda k, v: v if k == ARM else tuple(v) if isinstance(v, (tuple, list)) else (v,)
  return tuple(tuple((k, values(k, v)) for k, v in p) for p in products)


def saved_steps(num_steps: int, checkpoint_every: int, keep: int) -> list[int]:
  """The checkpoint steps a finished run keeps: multiples of `checkpoint_every` and `num_steps`, the `keep` latest."""
  saved = sorted({*range(checkpoint_every, num_steps + 1, checkpoint_every), num_steps})
  return saved[-keep:]


def check_analysis_steps(steps: tuple, train: Any, where: str) -> None:
  """Raises before any compute if a step of `sweep.analysis_steps` will not be a kept checkpoint of the run."""
  kept = saved_steps(train.num_steps, train.checkpoint_every, train.keep_checkpoints)
  missing = [k for k in steps if k not in kept]
  if missing:
    raise invalid(
        "sweep.analysis_steps",
        steps,
        f"steps among the checkpoints a run keeps ({kept}: multiples of train.checkpoint_every and train.num_steps, "
        "the train.keep_checkpoints latest)",
        f"{where}: {missing} will not be kept",
    )
