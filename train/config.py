"""The config boundary of a training run: `resolve(config)` derives the 'auto' keys and validates every subtree once.

Contract: `resolve(config)` takes the experiment ConfigDict (configs/default.py and what an experiment config or the
command line overrode) and returns a resolved copy, before any data is read or any array is created:
  * derived keys filled: `model.attention_logit_scale='auto'` from `model.parameterization`
    (`models.config.derived_attention_logit_scale`), `init.scheme='auto'` from the parameterization and residual
    rule (`init.derived_scheme`); the resolved values are what `config.json` records;
  * every training subtree validated: `model` (`models.ModelConfig`), `init` (scheme, hyper-parameters, the
    scheme's model requirements), `optim` (`train.optim.validate_optim_config`), `data`
    (`train.data.config.validate`) and `train` (`validate_train_config`);
  * keys of different subtrees that must agree checked together: µP learning-rate multipliers exist only for the
    optimizers of `train.optim.MUP_OPTIMIZERS`.
Every error names the key (two keys for a contradiction), the bad value and the valid choices
(`models.config.invalid` / `contradiction`). `resolve` is idempotent: `main.py` resolves the command line's config,
`train.loop.setup` resolves whatever it is given.
"""

import ml_collections

import init as init_lib
import models
from models.config import AUTO, contradiction, invalid
from train import optim
from train.data import config as data_config
from train.data import sources

# Every key of `config.train` (declared with its default and comment in configs/default.py).
TRAIN_KEYS = (
    "num_steps",
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "seed",
    "label_smoothing",
    "mlm_mask_rate",
    "num_decode_examples",
    "decode_max_length",
    "grad_norms_every",
)


def _int(cfg, key: str, minimum: int) -> None:
  value = cfg[key]
  if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
    raise invalid(f"train.{key}", value, f"an integer >= {minimum}")


def validate_train_config(cfg: ml_collections.ConfigDict) -> None:
  """Raises ValueError naming `train.<key>`, the bad value and the valid choices."""
  unknown = sorted(set(cfg.keys()) - set(TRAIN_KEYS))
  if unknown:
    raise invalid(f"train.{unknown[0]}", cfg[unknown[0]], f"a key of {sorted(TRAIN_KEYS)}", "unknown key")
  missing = [k for k in TRAIN_KEYS if k not in cfg.keys()]
  if missing:
    raise invalid(f"train.{missing[0]}", None, "a value: the key is missing (start from configs/default.py)")
  for key in ("num_steps", "log_every", "eval_every", "checkpoint_every", "keep_checkpoints"):
    _int(cfg, key, 1)
  for key in ("seed", "num_decode_examples", "decode_max_length", "grad_norms_every"):
    _int(cfg, key, 0)
  if isinstance(cfg.label_smoothing, bool) or not 0.0 <= cfg.label_smoothing < 1.0:
    raise invalid("train.label_smoothing", cfg.label_smoothing, "a number in [0, 1)")
  if isinstance(cfg.mlm_mask_rate, bool) or not 0.0 < cfg.mlm_mask_rate < 1.0:
    raise invalid("train.mlm_mask_rate", cfg.mlm_mask_rate, "a number in (0, 1)")


def resolve(config: ml_collections.ConfigDict, *, process_count: int | None = None) -> ml_collections.ConfigDict:
  """The resolved, validated copy of `config` (see the module docstring); raises ValueError before any compute."""
  config = ml_collections.ConfigDict(config.to_dict())  # a plain, unlocked copy: placeholders become values
  for group in ("model", "init", "optim", "data", "train"):
    if group not in config:
      raise invalid(group, None, "a config subtree (start from configs/default.py)", "missing")
  mc = models.ModelConfig.from_config(config.model, vocab_size=1)  # validates model.*; derives the attention scale
  config.model.attention_logit_scale = mc.attention_logit_scale
  if config.init.get("scheme") == AUTO:
    config.init.scheme = init_lib.derived_scheme(mc)
  init_lib.check_init_config(config.init, mc)
  validate_train_config(config.train)
  optim.validate_optim_config(config.optim, total_steps=config.train.num_steps)
  if mc.parameterization == "mup" and config.optim.name not in optim.MUP_OPTIMIZERS:
    raise contradiction(
        "model.parameterization",
        "mup",
        "optim.name",
        config.optim.name,
        f"µP's learning-rate multipliers are implemented for {list(optim.MUP_OPTIMIZERS)} (the Adam column of Yang"
        " et al. 2022, Tensor Programs V, Table 3); other optimizers need their own column",
    )
  # Divisibility of the global batches by the process count: checked here when the caller knows the count (no
  # device is touched before `jax.distributed` starts), and again by `train.data.build`.
  data_config.validate(config.data, process_count or 1, sources.VALID_NAMES)
  return config
