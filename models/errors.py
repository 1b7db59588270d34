"""The one error format of the whole config boundary: `invalid(key, value, valid)` for a bad value and
`contradiction(key_a, value_a, key_b, value_b, why)` for two keys that cannot go together. It sits at the bottom of
`models/` and imports nothing, so every validating module (`models.config`, `models.blocks`) and every layer above
uses it; `models.config` re-exports both names."""

from typing import Any


def invalid(key: str, value: Any, valid: Any, reason: str = "") -> ValueError:
  """The config boundary's error for a bad value: `config.<key>=<value> is invalid[ (reason)]; valid: <valid>`."""
  why = f" ({reason})" if reason else ""
  return ValueError(f"config.{key}={value!r} is invalid{why}; valid: {valid}")


def contradiction(key_a: str, value_a: Any, key_b: str, value_b: Any, why: str) -> ValueError:
  """The config boundary's error for two keys that cannot go together; names both."""
  return ValueError(f"config.{key_a}={value_a!r} contradicts config.{key_b}={value_b!r}: {why}")
