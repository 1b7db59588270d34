"""Imports go one way: configs.schema, configs.default and curvax on the ground floor, then models ← init ← train ← analysis ←
experiments ← main.py. Read from the source with `ast` (no import runs), so a new upward arrow fails here by file
and line."""

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
FLOORS = ("curvax", "models", "init", "train", "analysis", "experiments", "main")  # bottom to top
# Below every floor but curvax (which imports nothing of the project): the typed-config base and the defaults.
GROUND = ("configs.schema", "configs.default")
MAIN = REPO / "main.py"  # the top floor, a module of its own


def _imports(path: pathlib.Path):
  """(line, dotted module) for every absolute import of a project module in `path`."""
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      yield from ((node.lineno, alias.name) for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      # `from configs import schema` imports configs.schema: name the module with what it takes.
      yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def _allowed(floor: str, module: str) -> bool:
  top = module.split(".")[0]
  if any(module == g or module.startswith(g + ".") for g in GROUND):
    return floor != "curvax"
  if top == "configs":
    return False  # config files are read by main.py and the runners through ml_collections, never imported below
  if top not in FLOORS:
    return True  # a library
  return FLOORS.index(top) <= FLOORS.index(floor)


def _sources(floor: str):
  if floor == "main":
    return [MAIN]
  return sorted((REPO / floor).rglob("*.py"))


@pytest.mark.parametrize("floor", FLOORS)
def test_no_import_runs_back_up(floor):
  bad = [
      f"{path.relative_to(REPO)}:{line} imports {module}"
      for path in _sources(floor)
      for line, module in _imports(path)
      if not _allowed(floor, module)
  ]
  assert not bad, "\n".join(bad)


def test_config_files_import_only_configs():
  bad = [
      f"{path.relative_to(REPO)}:{line} imports {module}"
      for path in sorted((REPO / "configs").rglob("*.py"))
      for line, module in _imports(path)
      if module.split(".")[0] in FLOORS
  ]
  assert not bad, "\n".join(bad)


def test_the_checker_sees_an_upward_import():
  assert not _allowed("models", "train.optim")
  assert not _allowed("curvax", "configs.schema")
  assert not _allowed("train", "configs.claims.depth")
  assert _allowed("models", "configs.schema.invalid") and _allowed("experiments", "analysis.run")
