"""A sweep's grid: `sweep.grid` (or `sweep.products`) parsed into cells over any config keys (`config.sweep` itself
is typed by experiments/sweep_config.py).

Contract: `sweep.grid` is a string the command line can set, `'<key>=<v1>,<v2>;<key>=<v1>,...'`, e.g.
`'optim.warmup_steps=0,400;init.scheme=xavier,bert'`; the cells are the product of the lists, in the order written
(the last key varies fastest); '' is one cell, the base config. Products joined by '|' are a union (their cells in
the order written), e.g. two arms that each set several keys. A product may be named by a label before a ':',
`'Post-LN: model.norm_position=post | Pre-LN: model.norm_position=pre'`: its cells' `arm` (a study's name for it),
recorded with each run and not part of the directory name, so two grids that name the same cells differently share
their runs. A product may run its own number of seeds, `seeds=<n>` among its parts, in place of `sweep.seeds`
(`cell_seeds`): not a config key, a cell's name or a swept value. A cell records the value of every swept key (the
union's keys), the base config's where its part does not set it. Every key must be a leaf of the config (not
`mode`, `train.seed`, which `sweep.seeds` sets, or a `sweep.*` key); each value is read as the type of the key's
default (an integer, a number, `true`/`false`, a string; 'none' for a key whose default is None). A bad grid raises
before any compute, in the config boundary's format: `config.sweep.grid='...' is invalid (<the bad part and why>);
valid: <the syntax>`. `cells(config)` gives each cell's overrides and its filesystem-safe name
(`optim.warmup_steps=0__init.scheme=xavier`).

A config file gives its grid as data, `sweep.products` (the claims): a tuple of products, each a tuple of (key,
values) pairs in grid order, `("arm", label)` naming it and `("seeds", n)` its seeds, each value checked like a value
of the string, so the cells, their order and folder names are those of the same grid written as `sweep.grid`;
`format_grid` writes it so (the processes of `sweep.parallel` get a claim's round on their command line), and an
extension round repeats a product, seeds and all (`extend_grid`). `sweep.grid`, when set, takes the place of
`sweep.products`: the command line has the last word. `sweep_products(config)` is the one reading of either.
"""

import copy
import dataclasses
import itertools
import re
from typing import Any, Optional

import ml_collections

from configs.schema import invalid
from experiments.sweep_config import ARM, PRODUCTS_SYNTAX, SEEDS, SweepConfig, product_pairs

GRID_SYNTAX = (
    "'<key>=<v1>,<v2>,...' parts joined by ';' over leaf keys of the config (not mode, train.seed or sweep.*), "
    "e.g. 'optim.warmup_steps=0,400;init.scheme=xavier,bert'; products joined by '|' are a union, each optionally "
    "named by '<label>: ' before it, and may run its own number of seeds ('seeds=<n>' among its parts, in place of "
    "sweep.seeds); '' = the base config alone"
)
RESERVED_KEYS = ("mode", "train.seed")  # the sweep sets these itself (train.seed from sweep.seeds)
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")


@dataclasses.dataclass(frozen=True)
class Cell:
  """One point of the grid: `overrides` (key -> typed value, in grid order), its directory name, and `params`: the
  value of every swept key (the overrides, and the base config's value of the union's other keys)."""

  name: str
  overrides: dict[str, Any]
  params: dict[str, Any] = dataclasses.field(default_factory=dict)
  arm: str = ""  # the label of the cell's product ('' when unnamed)
  seeds: int = 0  # its product's own number of seeds (`SEEDS`); 0: sweep.seeds


def cell_seeds(cell: Cell, sweep: SweepConfig) -> range:
  """The seeds `cell` runs: `sweep.first_seed` on, as many as its product's `seeds=<n>`, else `sweep.seeds`."""
  return range(sweep.first_seed, sweep.first_seed + (cell.seeds or sweep.seeds))


def seed_counts(config: ml_collections.ConfigDict) -> tuple[int, ...]:
  """The distinct numbers of seeds the cells of the sweep of `config` run (`cell_seeds`), increasing."""
  sweep = SweepConfig.from_config(config.sweep)
  return tuple(sorted({len(cell_seeds(c, sweep)) for c in cells(config)} or {sweep.seeds}))


def num_runs(config: ml_collections.ConfigDict) -> int:
  """How many runs the sweep of `config` has: its cells' seeds summed (`cell_seeds`)."""
  sweep = SweepConfig.from_config(config.sweep)
  return sum(len(cell_seeds(c, sweep)) for c in cells(config))


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


def parse_products(grid: str, config: ml_collections.ConfigDict) -> list[list[tuple[str, list[Any]]]]:
  """One [(key, [values typed as the key's default])] per '|'-separated product of `grid` (module docstring), each
  checked against `config`; [[]] for ''."""
  return [product for _, product in labeled_products(grid, config)]


def labeled_products(grid: str, config: ml_collections.ConfigDict) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
  """(label, product) per '|'-separated product of `grid`: `parse_products` with each product's label ('' when
  unnamed)."""
  if not grid.strip():
    return [("", [])]
  products = grid.split("|")
  if len(products) > 1 and any(not p.strip() for p in products):
    raise _grid_error(grid, "an empty product (two '|' in a row, or one at an end)")
  out = []
  for text in products:
    label, body = split_label(text)
    if label is not None and (not label or ";" in label or "," in label):
      raise _grid_error(grid, f"product {text.strip()!r}: its label before ':' is empty or has ';' or ','")
    if label is not None and not body.strip():
      raise _grid_error(grid, f"product {text.strip()!r} names no key after its label")
    out.append((label or "", _parse_product(grid, body, config)))
  return out


def sweep_products(config: ml_collections.ConfigDict) -> list[tuple[str, list[tuple[str, list[Any]]]]]:
  """(label, product) of the sweep of `config`: `sweep.grid` parsed (`labeled_products`) when set (the command
  line's form), else `sweep.products` (the data form of a config file), each checked against `config` alike."""
  grid = config.sweep.grid
  products = product_pairs(config.sweep.get("products", ()))
  if grid.strip() or not products:
    return labeled_products(grid, config)
  out = []
  for product in products:
    label = dict(product).get(ARM, "")
    if not isinstance(label, str) or any(c in label for c in ":;,|") or label != label.strip():
      raise invalid(
          "sweep.products", product, PRODUCTS_SYNTAX, f"label {label!r} has one of ':;,|' or spaces at an end"
      )
    out.append((label, _data_product(product, config)))
  return out


def _data_product(product: tuple, config: ml_collections.ConfigDict) -> list[tuple[str, list[Any]]]:
  """[(key, [values typed as the key's default])] of one product of `sweep.products`: the checks of the grid
  string's parts (`_parse_product`), on values that are data."""
  axes: list[tuple[str, list[Any]]] = []
  for key, values in product:
    if key == ARM:
      continue
    fail = lambda why: invalid("sweep.products", product, PRODUCTS_SYNTAX, why)
    if key == SEEDS:
      if len(values) != 1 or type(values[0]) is not int or values[0] < 1:
        raise fail(f"{SEEDS}={values!r}: a product's own number of seeds is one integer >= 1")
    if key in (k for k, _ in axes):
      raise fail(f"key {key!r} appears twice")
    if key == SEEDS:
      axes.append((key, list(values)))
      continue
    if key in RESERVED_KEYS or key.startswith("sweep."):
      raise fail(f"key {key!r} is set by the sweep itself (seeds: sweep.seeds)")
    found = _lookup(config, key)
    if found is None:
      raise fail(f"key {key!r} is not a leaf key of the config (see configs/default.py)")
    if not values or len(set(map(repr, values))) < len(values):
      raise fail(f"key {key!r} has no value or repeats one")
    node, leaf = found
    axes.append((key, [_data_value(fail, key, v, node.get_type(leaf), node[leaf]) for v in values]))
  return axes


def _data_value(fail, key: str, value: Any, kind: type, default: Any) -> Any:
  """`value` as the type `kind` of `key`'s default (an integer is a number); what `_typed_value` reads its text as."""
  if value is None and default is None:
    return None
  names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
  if kind is float and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  if kind in names and not (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
    raise fail(f"{key}={value!r}: {key} takes {names[kind]}")
  return value


def format_grid(products: list[tuple[str, list[tuple[str, list[Any]]]]]) -> str:
  """`sweep_products`'s (label, product) list written as `sweep.grid` (the command line's form, which parses back
  to the same cells): a sweep's processes (`sweep.parallel`) get a round's grid on their command line."""
  out = []
  for label, axes in products:
    for _, values in axes:
      if any(isinstance(v, str) and (set(v) & set(",;|=") or v != v.strip() or not v) for v in values):
        raise invalid("sweep.products", products, PRODUCTS_SYNTAX, f"{values} cannot be written as sweep.grid")
    body = ";".join(f"{k}={','.join('none' if v is None else value_text(v) for v in vs)}" for k, vs in axes)
    out.append(f"{label}: {body}" if label else body)
  return " | ".join(out)


def split_label(text: str) -> tuple[Optional[str], str]:
  """(label, the product without it) of one product's text; (None, text) when it has no label (no ':' before the
  first '=')."""
  head, eq, _ = text.partition("=")
  if ":" not in head:
    return None, text
  label, _, rest = text.partition(":")
  return label.strip(), rest


def parse_grid(grid: str, config: ml_collections.ConfigDict) -> list[tuple[str, list[Any]]]:
  """[(key, [values])] over the union of `grid`'s products: every swept key once (first appearance), its values in
  the order they first appear."""
  axes: dict[str, list[Any]] = {}
  for product in parse_products(grid, config):
    for key, values in product:
      if key != SEEDS:
        axes.setdefault(key, []).extend(v for v in values if v not in axes.get(key, []))
  return list(axes.items())


def swept_keys(config: ml_collections.ConfigDict) -> list[str]:
  """The keys the sweep of `config` sets (`sweep_products`), each once, in the order they first appear."""
  return list(dict.fromkeys(k for _, product in sweep_products(config) for k, _ in product if k != SEEDS))


def _parse_product(grid: str, text: str, config: ml_collections.ConfigDict) -> list[tuple[str, list[Any]]]:
  """[(key, [values typed as the key's default])] of one product `text` of `grid`."""
  axes: list[tuple[str, list[Any]]] = []
  for part in text.split(";"):
    part = part.strip()
    if not part:
      raise _grid_error(grid, "an empty part (two ';' in a row, or one at an end)")
    if part.count("=") != 1:
      raise _grid_error(grid, f"part {part!r} needs exactly one '=' between the key and its values")
    key, values = (s.strip() for s in part.split("="))
    if key == SEEDS:
      if not re.fullmatch(r"[1-9][0-9]*", values) or key in (k for k, _ in axes):
        raise _grid_error(grid, f"part {part!r}: a product's own number of seeds is one integer >= 1, given once")
      axes.append((key, [int(values)]))
      continue
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


def value_text(value: Any) -> str:
  """`value` as the grid syntax writes it (booleans lower-case, floats by repr)."""
  return str(value).lower() if isinstance(value, bool) else _format(value)


def extend_grid(grid: str, config: ml_collections.ConfigDict, additions: dict[str, dict[str, list]]) -> str:
  """`grid` with one more product for every label `additions` names: its first product that sets each key given
  there, with those keys' values replaced by the given ones that no product of the label has yet (an adaptive
  study's next round, experiments/study.py `Study.extend`); `grid` itself when nothing is new."""
  products = labeled_products(grid, config)
  new = []
  for label, change in additions.items():
    mine = [axes for name, axes in products if name == label and set(change) <= {k for k, _ in axes}]
    if not label or not mine:
      continue
    seen = {k: {v for axes in mine for key, vs in axes for v in vs if key == k} for k in change}
    fresh = {k: [v for v in vs if v not in seen[k]] for k, vs in change.items()}
    if all(fresh.values()):
      values = lambda k, vs: fresh.get(k, vs)
      new.append(f"{label}: " + ";".join(f"{k}={','.join(value_text(v) for v in values(k, vs))}" for k, vs in mine[0]))
  return " | ".join([grid, *new]) if new else grid


def cell_name(overrides: dict[str, Any]) -> str:
  """`key=value` pairs joined by '__', characters other than [A-Za-z0-9._=+-] replaced by '-'; 'base' if none."""
  if not overrides:
    return "base"
  return "__".join(_UNSAFE.sub("-", f"{k}={_format(v)}") for k, v in overrides.items())


def cells(config: ml_collections.ConfigDict) -> list[Cell]:
  """The cells of the sweep of `config` (`sweep_products`: `sweep.grid`, else `sweep.products`) over `config` (raises
  the grid error on a bad grid or clashing names)."""
  grid = config.sweep.grid
  products = sweep_products(config)
  swept = swept_keys(config)
  base = {}
  for key in swept:
    node, leaf = _lookup(config, key)
    base[key] = node[leaf]
  out = []
  for label, product in products:
    own = dict(product).get(SEEDS, [0])[0]
    axes = [(k, v) for k, v in product if k != SEEDS]
    for values in itertools.product(*[v for _, v in axes]):
      overrides = dict(zip([k for k, _ in axes], values))
      params = {k: overrides.get(k, base[k]) for k in swept}
      out.append(Cell(cell_name(overrides), overrides, params, label, own))
  names = [c.name for c in out]
  if len(set(names)) < len(names):
    raise _grid_error(
        grid or format_grid(products),
        "two cells get the same directory name; use values that differ in [A-Za-z0-9._=+-]",
    )
  return out


def cell_config(
    config: ml_collections.ConfigDict, cell: Cell, seed: int, tokenizer_dir: str = ""
) -> ml_collections.ConfigDict:
  """A copy of `config` with the cell's overrides, `train.seed = seed`, `mode = 'train'` and, where the config leaves
  `data.tokenizer_dir` empty, `tokenizer_dir` (the sweep's shared SentencePiece cache)."""
  out = copy.deepcopy(config)
  if tokenizer_dir and not out.data.tokenizer_dir:
    out.data.tokenizer_dir = tokenizer_dir
  for key, value in {**cell.overrides, "train.seed": seed, "mode": "train"}.items():
    node, leaf = _lookup(out, key)
    node[leaf] = value
  return out
