"""The suite's two tiers (pytest.ini): `slow` is a registered marker under `--strict-markers`, and every test that runs
the project end to end carries it, so `python -m pytest -m "not slow"` stays the quick loop while developing. A test
runs end to end when it starts `main.py` (the string "main.py" in an argument list), starts the processes of a
multi-process run (the `jax_processes` fixture), runs a helper script of tests/scripts/, or runs the training loop
(`train_and_evaluate`). Read from the test files' syntax trees: nothing is imported or collected."""

import ast
import configparser
import pathlib
import shlex

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
END_TO_END_NAMES = {"jax_processes", "train_and_evaluate", "SCRIPT"}  # SCRIPT: a tests/scripts/ helper


def ini() -> configparser.ConfigParser:
  parser = configparser.ConfigParser()
  parser.read(TESTS.parent / "pytest.ini")
  return parser


def test_slow_is_registered_and_markers_are_strict():
  markers = [line.split(":")[0].strip() for line in ini()["pytest"]["markers"].strip().splitlines()]
  assert markers == ["slow"]
  assert "--strict-markers" in shlex.split(ini()["pytest"]["addopts"])


def is_slow(expr: ast.expr) -> bool:
  """`pytest.mark.slow` itself (a decorator, `pytestmark = ...`), or a list of marks holding it."""
  if isinstance(expr, (ast.List, ast.Tuple)):
    return any(is_slow(e) for e in expr.elts)
  return ast.unparse(expr) == "pytest.mark.slow"


def runs_end_to_end(fn: ast.FunctionDef) -> bool:
  for node in ast.walk(fn):
    if isinstance(node, ast.Constant) and node.value == "main.py":
      return True
    if isinstance(node, ast.Name) and node.id in END_TO_END_NAMES:
      return True
    if isinstance(node, ast.Attribute) and node.attr in END_TO_END_NAMES:
      return True
  return any(a.arg in END_TO_END_NAMES for a in fn.args.args)


def unmarked_end_to_end(source: str) -> list[str]:
  """The test functions of a test module's source that run end to end and are not in the slow tier."""
  tree = ast.parse(source)
  module_slow = any(
      isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["pytestmark"] and is_slow(n.value)
      for n in tree.body
  )
  return [
      n.name
      for n in tree.body
      if isinstance(n, ast.FunctionDef)
      and n.name.startswith("test_")
      and not (module_slow or any(is_slow(d) for d in n.decorator_list))
      and runs_end_to_end(n)
  ]


def test_the_rule_reads_marks_on_functions_and_modules():
  body = "def test_a(tmp_path):\n  run([sys.executable, 'main.py'])\n"
  assert unmarked_end_to_end("import pytest\n" + body) == ["test_a"]
  assert unmarked_end_to_end("import pytest\n@pytest.mark.slow\n" + body) == []
  assert unmarked_end_to_end("import pytest\npytestmark = pytest.mark.slow\n" + body) == []
  assert unmarked_end_to_end("import pytest\npytestmark = [pytest.mark.slow]\n" + body) == []
  assert unmarked_end_to_end("def test_b(jax_processes):\n  pass\n") == ["test_b"]
  assert unmarked_end_to_end("def test_c(x):\n  loop.train_and_evaluate(x)\n") == ["test_c"]
  assert unmarked_end_to_end("def test_d():\n  assert 'main.py: ' in out\n") == []  # a message, not an argument


@pytest.mark.parametrize("path", sorted(TESTS.glob("test_*.py")), ids=lambda p: p.name)
def test_every_end_to_end_test_is_in_the_slow_tier(path):
  assert unmarked_end_to_end(path.read_text()) == [], f"{path.name}: mark these @pytest.mark.slow"
