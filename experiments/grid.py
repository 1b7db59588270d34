"""A sweep's grid: `config.sweep`, typed (`SweepConfig`), and `sweep.grid` parsed into cells over any config keys.

Contract: `sweep.grid` is a string the command line can set, `'<key>=<v1>,<v2>;<key>=<v1>,...'`, e.g.
`'optim.warmup_steps=0,400;init.scheme=xavier,bert'`; the cells are the product of the lists, in the order written
(the last key varies fastest); '' is one cell, the base config. Every key must be a leaf of the config (not `mode`,
`train.seed`, which `sweep.seeds` sets, or a `sweep.*` key); each value is read as the type of the key's default
(an integer, a number, `true`/`false`, a string; 'none' for a key whose default is None). A bad grid raises before any
compute, in the config boundary's format (`models.config.invalid`): `config.sweep.grid='...' is invalid (<the bad
part and why>); valid: <the syntax>`. `cells(config)` gives each cell's overrides and its filesystem-safe name
(`optim.warmup_steps=0__init.scheme=xavier`).
"""

import copy
import dataclasses
import itertools
import re
from typing import Any

import ml_collections

from models.config import Section, invalid

GRID_SYNTAX = (
    "'<key>=<v1>,<v2>,...' parts joined by ';' over leaf keys of the config (not mode, train.seed or sweep.*), "
    "e.g. 'optim.warmup_steps=0,400;init.scheme=xavier,bert'; '' = the base config alone"
)
RESERVED_KEYS = ("mode", "train.seed")  # the sweep sets these itself (train.seed from sweep.seeds)
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


@dataclasses.dataclass(frozen=True)
class SweepConfig(Section):
  """The `config.sweep` subtree, typed and checked (each key's meaning: configs/default.py)."""

  KEY = "sweep"
  grid: str
  seeds: int
  analysis_at_init: bool
  metric: str

  def __post_init__(self):
    if self.seeds < 1:
      raise invalid("sweep.seeds", self.seeds, "an integer >= 1")
    if not re.fullmatch(r"[A-Za-z0-9_]+/[A-Za-z0-9_/]+", self.metric):
      raise invalid("sweep.metric", self.metric, "'<split>/<name>' of metrics.jsonl, e.g. 'eval/loss', 'train/loss'")


@dataclasses.dataclass(frozen=True)
class Cell:
  """One point of the grid: `overrides` (key -> typed value, in grid order) and its directory name."""

  name: str
  overrides: dict[str, Any]


def _grid_error(grid: str, reason: str) -> ValueError:
  return invalid("sweep.grid", grid, GRID_SYNTAX, reason)


def _lookup(config: ml_collections.ConfigDict, key: str):
  """(parent ConfigDict, leaf name) of a dotted `key`, or None if it is not a leaf of `config`."""
  node = config
  *parents, leaf = key.split(".")
  for p in parents:
    if not isinstance(node, ml_collections.ConfigDict) or p not in node:
      return None
    node = node[p]
  if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
    return None
  if isinstance(node[leaf], ml_collections.ConfigDict):
    return None
  return node, leaf


def _typed_value(grid: str, key: str, text: str, kind: type, default: Any) -> Any:
  """`text` read as the type `kind` of `key`'s default; raises the grid error naming the value otherwise."""
  if text.lower() == "none" and default is None:  # a placeholder back to "from the preset"
    return None
  try:
    if kind is bool:
      if text.lower() not in ("true", "false"):
        raise ValueError
      return text.lower() == "true"
    if kind is int:
      return int(text)
    if kind is float:
      return float(text)
  except ValueError:
    names = {bool: "true or false", int: "an integer", float: "a number"}
    raise _grid_error(grid, f"{key}={text!r}: {key} takes {names[kind]}") from None
  return text


def parse_grid(grid: str, config: ml_collections.ConfigDict) -> list[tuple[str, list[Any]]]:
  """[(key, [values typed as the key's default])] of `grid` (module docstring), checked against `config`."""
  axes: list[tuple[str, list[Any]]] = []
  if not grid.strip():
    return axes
  for part in grid.split(";"):
    part = part.strip()
    if not part:
      raise _grid_error(grid, "an empty part (two ';' in a row, or one at an end)")
    if part.count("=") != 1:
      raise _grid_error(grid, f"part {part!r} needs exactly one '=' between the key and its values")
    key, values = (s.strip() for s in part.split("="))
    if key in RESERVED_KEYS or key.startswith("sweep."):
      raise _grid_error(grid, f"key {key!r} is set by the sweep itself (seeds: sweep.seeds)")
    found = _lookup(config, key)
    if found is None:
      raise _grid_error(grid, f"key {key!r} is not a leaf key of the config (see configs/default.py)")
    if key in (k for k, _ in axes):
      raise _grid_error(grid, f"key {key!r} appears twice")
    texts = [v.strip() for v in values.split(",")]
    if any(not t for t in texts):
      raise _grid_error(grid, f"part {part!r} has an empty value")
    if len(set(texts)) < len(texts):
      raise _grid_error(grid, f"part {part!r} repeats a value")
    node, leaf = found
    axes.append((key, [_typed_value(grid, key, t, node.get_type(leaf), node[leaf]) for t in texts]))
  return axes


def _format(value: Any) -> str:
  return repr(value) if isinstance(value, float) else str(value)


def cell_name(overrides: dict[str, Any]) -> str:
  """`key=value` pairs joined by '__', characters other than [A-Za-z0-9._=+-] replaced by '-'; 'base' if none."""
  if not overrides:
    return "base"
  return "__".join(_UNSAFE.sub("-", f"{k}={_format(v)}") for k, v in overrides.items())


def cells(config: ml_collections.ConfigDict) -> list[Cell]:
  """The cells of `config.sweep.grid` over `config` (raises the grid error on a bad grid or clashing names)."""
  grid = config.sweep.grid
  axes = parse_grid(grid, config)
  out = [
      Cell(cell_name(o), o)
      for o in (dict(zip([k for k, _ in axes], v)) for v in itertools.product(*[v for _, v in axes]))
  ]
  names = [c.name for c in out]
  if len(set(names)) < len(names):
    raise _grid_error(grid, "two cells get the same directory name; use values that differ in [A-Za-z0-9._=+-]")
  return out


def cell_config(config: ml_collections.ConfigDict, cell: Cell, seed: int) -> ml_collections.ConfigDict:
  """A copy of `config` with the cell's overrides, `train.seed = seed` and `mode = 'train'`."""
  out = copy.deepcopy(config)
  for key, value in {**cell.overrides, "train.seed": seed, "mode": "train"}.items():
    node, leaf = _lookup(out, key)
    node[leaf] = value
  return out
