"""The config boundary of a training run: `resolve(config)` derives the 'auto' keys and validates every subtree once.

Contract: `resolve(config)` takes the experiment ConfigDict (configs/default.py and what an experiment config or the
command line overrode) and returns a frozen `Config`, before any data is read or any array is created:
  * derived keys filled: `model.attention_logit_scale='auto'` from `model.parameterization`
    (`models.config.derived_attention_logit_scale`), `init.scheme='auto'` from the parameterization and residual
    rule (`init.derived_scheme`); the resolved values are what `config.json` records (`Config.to_dict`);
  * every training subtree typed once into a frozen dataclass (`models.config.Section`: unknown, missing and
    ill-typed keys rejected by one function, `typed_values`) whose `__post_init__` checks its values: `model`
    (`models.ModelConfig`), `init` (`init.InitConfig`, plus the scheme's model requirements), `optim`
    (`train.optim_config.OptimConfig`), `data` (`train.data.config.DataConfig`), `train` (`TrainConfig`) and
    `distributed` (`train.distributed.DistributedConfig`) and `mesh` (`train.step.MeshConfig`); `metrics`
    (`train.trackers.MetricsConfig`: where the scalars go; optional, as a run's config.json may predate it, and not
    compared on a rerun: a resumed run may add a tracker); the layers above pass the `Section` classes of their own
    groups (main.py: `experiments.GROUPS`: `analysis`, `sweep`, `claim`), typed by the same one function, `_typed`;
  * keys of different subtrees that must agree checked together: µP learning-rate multipliers exist only for the
    optimizers of `train.optim_config.MUP_OPTIMIZERS`; QK-clip (`optim.qk_clip`) needs logits that scale with W_q, W_k
    (no QK-norm).
Every error names the key (two keys for a contradiction), the bad value and the valid choices
(`configs.schema.invalid` / `contradiction`). `resolve` is idempotent: `main.py` resolves the command line's config,
`train.loop.setup`, `experiments.run_sweep` and `experiments.run.run_claim` resolve whatever they are given (a
`Config` passes through, trusted). Code below this boundary takes the typed subtrees and does not check them again;
each public entry point that takes a subtree (`init_params`, `make_optimizer`, `data.build`, `run_analysis`) also
accepts its ConfigDict, typed at its door by the one coercion `configs.schema.as_section`.
"""

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Optional

import ml_collections
from absl import logging
from etils import epath

import init as init_lib
import models
from configs.schema import AUTO, Section, contradiction, invalid
from models.placement import qkv_norms
from train import distributed, optim_config, trackers
from train import step as step_lib
from train.data import config as data_config


@dataclasses.dataclass(frozen=True)
class TrainConfig(Section):
  """The `config.train` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "train"
  num_steps: int
  log_every: int
  eval_every: int
  checkpoint_every: int
  keep_checkpoints: int
  seed: int
  label_smoothing: float
  z_loss: float
  mlm_mask_rate: float
  num_decode_examples: int
  decode_max_length: int
  grad_norms_every: int
  curvature_every: int
  eval_at_init: bool

  def __post_init__(self):
    for key in ("log_every", "eval_every", "checkpoint_every", "keep_checkpoints"):
      _int(self, key, 1)
    for key in ("num_steps", "seed", "num_decode_examples", "decode_max_length", "grad_norms_every", "curvature_every"):
      _int(self, key, 0)
    if not isinstance(self.eval_at_init, bool):
      raise invalid("train.eval_at_init", self.eval_at_init, "True or False")
    if not 0.0 <= self.label_smoothing < 1.0:
      raise invalid("train.label_smoothing", self.label_smoothing, "a number in [0, 1)")
    if not (0.0 <= self.z_loss < float("inf")):
      raise invalid("train.z_loss", self.z_loss, "a finite number >= 0 (1e-4 in PaLM and Wortsman et al. 2023)")
    if not 0.0 < self.mlm_mask_rate < 1.0:
      raise invalid("train.mlm_mask_rate", self.mlm_mask_rate, "a number in (0, 1)")


# Every key of `config.train` (declared with its default and comment in configs/default.py).
TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig))


def _int(cfg, key: str, minimum: int) -> None:
  value = cfg[key]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise invalid(f"train.{key}", value, f"an integer >= {minimum}")


@dataclasses.dataclass(frozen=True)
class Config:
  """A resolved experiment config: each subtree of the training layer typed and checked, the 'auto' keys derived.

  `model` is the `models.ModelConfig` without a vocabulary (`vocab_size=None`: the data's tokenizer sets it).
  Groups owned by the layers above `train/` (e.g. `analysis`) are in `groups`, typed by the builders the caller
  passes to `resolve` (untyped groups stay read-only ConfigDicts), and read as attributes like the others.
  `to_dict()` is the resolved key tree (`config.json`): `resolve(ConfigDict(config.to_dict()))` gives it back.
  `source` is the ConfigDict it was resolved from (a copy).
  """

  mode: str
  model: models.ModelConfig
  init: init_lib.InitConfig
  optim: optim_config.OptimConfig
  data: data_config.DataConfig
  train: TrainConfig
  distributed: distributed.DistributedConfig
  mesh: step_lib.MeshConfig
  groups: Mapping[str, Any]
  tree: Mapping[str, Any]
  # The ConfigDict this was resolved from, as given (its 'auto' keys not derived, its keys' types kept): a sweep
  # builds its cells' configs from it (experiments/grid.py), each resolved in turn.
  source: Any = dataclasses.field(default=None, compare=False, repr=False)

  def __getattr__(self, name: str) -> Any:
    groups = self.__dict__.get("groups", {})
    if name in groups:
      return groups[name]
    raise AttributeError(f"the config has no group {name!r}; it has {sorted(['mode', *_GROUPS, *groups])}")

  def __contains__(self, name: str) -> bool:
    return name in ("mode", *_GROUPS) or name in self.groups

  def to_dict(self) -> dict[str, Any]:
    return ml_collections.ConfigDict(self.tree).to_dict()  # a deep copy


# The training layer's sections, in the order `resolve` types them (an error in an earlier one is reported first);
# `metrics` is optional (a run's config.json may predate it).
SECTIONS = {
    "model": models.ModelConfig,
    "init": init_lib.InitConfig,
    "train": TrainConfig,
    "optim": optim_config.OptimConfig,
    "data": data_config.DataConfig,
    "distributed": distributed.DistributedConfig,
    "mesh": step_lib.MeshConfig,
}
_GROUPS = tuple(SECTIONS)
OPTIONAL_SECTIONS = {"metrics": trackers.MetricsConfig}


def resolve(
    config: Any,
    *,
    process_count: Optional[int] = None,
    groups: Mapping[str, type] = {},  # noqa: B006 (read only)
) -> Config:
  """The resolved, validated `Config` of `config` (see the module docstring); raises ValueError before any compute.

  Args:
    config: the experiment ConfigDict (configs/default.py plus overrides), or a `Config` (checked against
      `process_count` and returned, its groups of `groups` typed if they are not yet).
    process_count: the number of JAX processes the global batches split over, when known (main.py resolves before
      `jax.distributed` starts and passes None; `train.loop.setup` passes `jax.process_count()`).
    groups: the `Section` classes of the groups of the layers above `train/`, e.g. `{"analysis": AnalysisConfig}`
      (`experiments.GROUPS`).
  """
  groups = {**OPTIONAL_SECTIONS, **groups}
  if isinstance(config, Config):
    data_config.check_processes(config.data, process_count or 1)
    untyped = {
        n: config.groups[n] for n, cls in groups.items() if n in config.groups and not isinstance(config.groups[n], cls)
    }
    if not untyped:
      return config  # typed already: trusted
    return dataclasses.replace(config, groups={**config.groups, **_typed(untyped, groups)})
  tree = ml_collections.ConfigDict(config.to_dict())  # a plain, unlocked copy: placeholders become values
  for group in _GROUPS:
    if group not in tree:
      raise invalid(group, None, "a config subtree (start from configs/default.py)", "missing")
  if not isinstance(tree.get("mode", None), str):
    raise invalid("mode", tree.get("mode", None), "a string (start from configs/default.py)")
  typed = _typed({name: tree[name] for name in _GROUPS}, SECTIONS)
  mc, init_cfg, optim_cfg = typed["model"], typed["init"], typed["optim"]
  tree.model.attention_logit_scale = mc.attention_logit_scale  # derived from model.parameterization
  if init_cfg.scheme == AUTO:
    init_cfg = typed["init"] = dataclasses.replace(init_cfg, scheme=init_lib.derived_scheme(mc))
    tree.init.scheme = init_cfg.scheme
  init_lib.check_init_config(init_cfg, mc)
  optim_config.check_horizon(optim_cfg, typed["train"].num_steps)
  tree.optim.warmup_steps = optim_cfg.warmup_steps  # derived under optim.untuned_warmup (Ma & Yarats 2021)
  _check_optim_against_model(optim_cfg, mc)
  # Divisibility of the global batches by the process count: checked here when the caller knows the count (no
  # device is touched before `jax.distributed` starts), and again by `train.data.build`.
  data_config.check_processes(typed["data"], process_count or 1)
  others = {}
  for name in tree.keys():
    if name in ("mode", *_GROUPS):
      continue
    value = tree[name]
    if name in groups:
      others.update(_typed({name: value}, groups))
    else:
      others[name] = ml_collections.FrozenConfigDict(value) if isinstance(value, ml_collections.ConfigDict) else value
  return Config(mode=tree.mode, **typed, groups=others, tree=tree.to_dict(), source=copy.deepcopy(config))


def _typed(subtrees: Mapping[str, Any], sections: Mapping[str, type]) -> dict[str, Any]:
  """{name: `sections[name]` built from its subtree}: the one place a subtree of the config becomes typed."""
  return {name: sections[name].from_config(subtree) for name, subtree in subtrees.items()}


def _check_optim_against_model(optim_cfg: optim_config.OptimConfig, mc: models.ModelConfig) -> None:
  """Keys of `optim` and `model` that must agree (module docstring); raises `contradiction` naming both."""
  if mc.parameterization == "mup" and optim_cfg.name not in optim_config.MUP_OPTIMIZERS:
    raise contradiction(
        "model.parameterization",
        "mup",
        "optim.name",
        optim_cfg.name,
        f"µP's learning-rate multipliers are implemented for {list(optim_config.MUP_OPTIMIZERS)} (the Adam column of"
        " Yang et al. 2022, Tensor Programs V, Table 3); other optimizers need their own column",
    )
  if mc.residual == "completep" and mc.depth_alpha != 1.0 and optim_cfg.name not in optim_config.MUP_OPTIMIZERS:
    raise contradiction(
        "model.residual",
        "completep",
        "optim.name",
        optim_cfg.name,
        f"the depth learning-rate rule η·(L/L_base)^(α-1) is the AdamW column of Dey et al. 2025, Table 1; valid: "
        f"{list(optim_config.MUP_OPTIMIZERS)} (or model.depth_alpha=1, which changes no learning rate)",
    )
  if optim_cfg.qk_clip and qkv_norms(mc)[0]:  # Kimi Team 2025: QK-clip acts on W_q, W_k scale
    key = "model.qk_norm" if mc.qk_norm else "model.norm_position"
    raise contradiction(
        "optim.qk_clip",
        optim_cfg.qk_clip,
        key,
        mc.qk_norm if mc.qk_norm else mc.norm_position,
        "QK-norm makes the logits independent of W_q and W_k's scale, which QK-clip rescales; valid: qk_clip 0",
    )
  if optim_cfg.qk_clip and mc.attn_logit_softcap:  # S_max is read after the cap; rescaling W_q, W_k is not linear there
    raise contradiction(
        "optim.qk_clip",
        optim_cfg.qk_clip,
        "model.attn_logit_softcap",
        mc.attn_logit_softcap,
        "a capped logit c·tanh(z/c) does not scale with W_q and W_k, which QK-clip rescales; valid: one of them 0",
    )
  if optim_cfg.qk_clip and mc.num_kv_heads not in (None, mc.num_heads):  # Kimi Team 2025 clip per head's own W_k
    raise contradiction(
        "optim.qk_clip",
        optim_cfg.qk_clip,
        "model.num_kv_heads",
        mc.num_kv_heads,
        "grouped keys are shared by the heads of a group, so one head's clip would rescale the others' logits; "
        "valid: num_kv_heads = num_heads (or None), or qk_clip 0",
    )


TRAINED = ("model.", "init.", "optim.", "data.", "train.", "mesh.")  # the groups (and `mode`) a rerun may not change
UNTRAINED = ("data.tokenizer_dir", "train.eval_at_init")  # keys of those groups that change nothing trained


def leaves(tree: Mapping, prefix: str = "") -> dict[str, Any]:
  """{'group.key': value} of a nested dict."""
  out = {}
  for key, value in tree.items():
    out.update(leaves(value, f"{prefix}{key}.") if isinstance(value, Mapping) else {prefix + key: value})
  return out


def check_unchanged(
    workdir: str, config: Config, where: str, *, compare_mode: bool = True, may_change: tuple[str, ...] = ()
) -> None:
  """Raises ValueError, before any compute, if the run in `workdir` (its config.json, an earlier invocation's) was
  trained with another config than `config` in what it trains (`TRAINED`, and `mode` with `compare_mode`): a rerun
  would otherwise resume (or, in a sweep, skip) a run of another config, and fail deep in the checkpoint restore.
  The message names every differing key with both values. The other groups may change (more seeds, another
  analysis, another machine, a study's settings that no run reads). A key the run's config.json lacks was added to
  the code after the run: unchanged while it holds its default. `may_change`: keys left out of the comparison
  (main.py's train mode: `train.num_steps`, which a rerun raises to train longer, as the run's summary says). main.py's
  train mode and every sweep run call it."""
  path = epath.Path(workdir) / "config.json"
  if not path.exists():
    return
  try:
    old = leaves(json.loads(path.read_text()))
  except ValueError as e:  # torn (a crash while it was written): it says nothing; setup writes it again
    logging.warning("%s does not parse (%s): read as absent, the run's setup writes it again", path, e)
    return
  new = leaves(json.loads(json.dumps(config.to_dict())))
  from configs import default  # noqa: PLC0415 (the defaults, for keys added after the run was trained)

  defaults = leaves(json.loads(json.dumps(default.get_config().to_dict())))
  # data.tokenizer_dir may change: a moved sweep folder moves its tokenizer; an evaluation at step 0 trains nothing
  trained = lambda k: ((k == "mode" and compare_mode) or k.startswith(TRAINED)) and k not in (*UNTRAINED, *may_change)
  same = lambda k: old.get(k, defaults.get(k)) == new.get(k, defaults.get(k))
  changed = sorted(k for k in set(old) | set(new) if trained(k) and not same(k))
  if changed:
    diffs = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed[:5])
    raise ValueError(
        f"{where}: {path} was trained with another config ({diffs}{', ...' if len(changed) > 5 else ''}); "
        "rerun with the same config, or use another --workdir"
    )
