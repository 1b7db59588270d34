"""The config boundary's ground floor: one error format and the typed section every group's dataclass derives from.

`invalid(key, value, valid)` is the error for a bad value, `contradiction(key_a, value_a, key_b, value_b, why)` for
two keys that cannot go together; `Section` is a typed, frozen config subtree (`typed_values` checks its keys and
types); `as_section` is the one coercion a public entry point applies at its door; `AUTO` marks a key derived from
others. It imports nothing of the project, so every layer (models/ up to
experiments/) validates its own section with it without reaching into another layer.
"""

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Optional, Union

AUTO = "auto"  # a key derived from others at the config boundary


def invalid(key: str, value: Any, valid: Any, reason: str = "") -> ValueError:
  """The config boundary's error for a bad value: `config.<key>=<value> is invalid[ (reason)]; valid: <valid>`."""
  why = f" ({reason})" if reason else ""
  return ValueError(f"config.{key}={value!r} is invalid{why}; valid: {valid}")


def contradiction(key_a: str, value_a: Any, key_b: str, value_b: Any, why: str) -> ValueError:
  """The config boundary's error for two keys that cannot go together; names both."""
  return ValueError(f"config.{key_a}={value_a!r} contradicts config.{key_b}={value_b!r}: {why}")


class Section:
  """A typed config subtree: a frozen dataclass whose fields are the subtree's keys, built from its ConfigDict by
  `from_config` (the one place its keys, types and values are checked) and read like the ConfigDict it replaces
  (`cfg.key`, `cfg["key"]`, `cfg.get`, `cfg.keys()`, `cfg.to_dict()`), so code that reads a subtree takes either.

  Subclasses set `KEY` (the group's path in the config, e.g. "optim") and check values in `__post_init__` (ranges,
  choices, keys that must agree), raising `invalid` / `contradiction`. Fields without a default must be given:
  configs/default.py is where their defaults live.
  """

  KEY: typing.ClassVar[str] = ""

  def __getitem__(self, key: str) -> Any:
    if key not in self.keys():
      raise KeyError(key)
    return getattr(self, key)

  def __contains__(self, key: str) -> bool:
    return key in self.keys()

  def keys(self) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(self))

  def get(self, key: str, default: Any = None) -> Any:
    return getattr(self, key) if key in self.keys() else default

  def to_dict(self) -> dict[str, Any]:
    return {k: (v.to_dict() if isinstance(v, Section) else v) for k, v in ((k, getattr(self, k)) for k in self.keys())}

  @classmethod
  def from_config(cls, cfg: Any, key: Optional[str] = None):
    """The frozen subtree from its ConfigDict (or any mapping, or an instance, returned as is).

    Raises:
      ValueError: an unknown or missing key, or a value of the wrong type (`invalid`), or whatever the subclass's
        `__post_init__` rejects.
    """
    if isinstance(cfg, cls):
      return cfg
    return cls(**typed_values(cls, cfg, key or cls.KEY))


def as_section(cls: type, cfg: Any, check: Optional[Callable[[Any], Any]] = None) -> Any:
  """`cfg` as the typed section `cls`: the one coercion at the door of a public entry point that users also call
  with a ConfigDict (`init_params`, `make_optimizer`, `data.build`, `run_analysis`). A `cls` instance is typed
  already (by `train.config.resolve`, or by an earlier door) and is returned as it is, trusted: not checked again.
  Anything else is typed by `cls.from_config` and then passed to `check` (the entry point's checks beyond the
  section's own, e.g. the decay horizon against the run's length).
  """
  if isinstance(cfg, cls):
    return cfg
  typed = cls.from_config(cfg)
  if check is not None:
    check(typed)
  return typed


_TYPE_NAMES = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}


def _typed(key: str, value: Any, hint: Any) -> Any:
  """`value` checked against the field annotation `hint` (bool, int, float, str, Optional[...], a Section)."""
  optional = False
  if typing.get_origin(hint) in (Union, types.UnionType):
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = len(args) < len(typing.get_args(hint))
    hint = args[0] if len(args) == 1 else Any
  if value is None and optional:
    return None
  if isinstance(hint, type) and issubclass(hint, Section):
    if value is None or not hasattr(value, "keys"):
      raise invalid(key, value, f"a config subtree with keys {sorted(f.name for f in dataclasses.fields(hint))}")
    return hint.from_config(value, key)
  if hint is bool:
    ok = isinstance(value, bool)
  elif hint is int:
    ok = isinstance(value, int) and not isinstance(value, bool)
  elif hint is float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    value = float(value) if ok else value
  elif hint is str:
    ok = isinstance(value, str)
  else:
    return value
  if not ok:
    raise invalid(key, value, _TYPE_NAMES[hint] + (" or None" if optional else ""))
  return value


def typed_values(cls: type, cfg: Any, key: str) -> dict[str, Any]:
  """The keyword arguments of dataclass `cls` from the ConfigDict (or mapping) `cfg` of the group `key`: unknown
  and missing keys rejected, each value checked against its field's annotation."""
  values = dict(cfg.to_dict() if hasattr(cfg, "to_dict") else cfg)
  fields = {f.name: f for f in dataclasses.fields(cls)}
  hints = typing.get_type_hints(cls)
  unknown = sorted(set(values) - set(fields))
  if unknown:
    raise invalid(f"{key}.{unknown[0]}", values[unknown[0]], f"a key of {sorted(fields)}", "unknown key")
  out = {}
  for name, field in fields.items():
    if name not in values:
      if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
        raise invalid(f"{key}.{name}", None, "a value: the key is missing (start from configs/default.py)")
      continue
    out[name] = _typed(f"{key}.{name}", values[name], hints[name])
  return out
