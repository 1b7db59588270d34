"""The suite's two tiers (pytest.ini): `slow` is a registered marker under `--strict-markers`, and every test that runs
the project end to end carries it, so `python -m pytest -m "not slow"` stays the quick loop while developing. A test
runs end to end when it, a module-scoped fixture it takes or a function of its module it calls starts `main.py` (a
string "main.py", or tests/main_server.py's `MainServer`) or a shell script ("*.sh"), the processes of a
multi-process run (the `jax_processes` fixture) or a module's `SCRIPT`, or runs the training loop
(`train_and_evaluate`) or a coordinate check (training steps at every width or depth). Read from the test files'
syntax trees: nothing is imported or collected."""

import ast
import configparser
import pathlib
import shlex

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
END_TO_END_NAMES = {"jax_processes", "train_and_evaluate", "SCRIPT", "MainServer"}  # SCRIPT: a script a test file runs
COORD_CHECKS = {"coord_check", "depth_coord_check"}  # analysis.coord_check's: training steps at every width or depth
# Tests that call an end-to-end helper and stop before any compute (the train step replaced by a failure): fast.
STOP_BEFORE_COMPUTE = {
    "test_curvature_every.py": {
        "test_bad_values_fail_before_compute",
        "test_preconditioned_records_need_adam_before_training",
    },
}


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


def starts_or_trains(fn: ast.FunctionDef) -> bool:
  """Whether `fn`'s own body or arguments name a way of running the project end to end."""
  for node in ast.walk(fn):
    if isinstance(node, ast.Constant) and (node.value == "main.py" or str(node.value).endswith(".sh")):
      return True
    if isinstance(node, ast.Name) and node.id in END_TO_END_NAMES:
      return True
    if isinstance(node, ast.Attribute) and (node.attr in END_TO_END_NAMES or node.attr in COORD_CHECKS):
      return True
  return any(a.arg in END_TO_END_NAMES for a in fn.args.args)


def end_to_end_functions(tree: ast.Module) -> set[str]:
  """The module's functions (tests, fixtures, helpers) that run end to end themselves or through a function or
  fixture of the module they name or take as an argument."""
  functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
  uses = {
      name: {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
      for name, fn in functions.items()
  }
  found = {name for name, fn in functions.items() if starts_or_trains(fn)}
  while more := {name for name in functions if name not in found and uses[name] & found}:
    found |= more
  return found


def unmarked_end_to_end(source: str) -> list[str]:
  """The test functions of a test module's source that run end to end and are not in the slow tier."""
  tree = ast.parse(source)
  module_slow = any(
      isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["pytestmark"] and is_slow(n.value)
      for n in tree.body
  )
  end_to_end = end_to_end_functions(tree)
  return [
      n.name
      for n in tree.body
      if isinstance(n, ast.FunctionDef)
      and n.name.startswith("test_")
      and not (module_slow or any(is_slow(d) for d in n.decorator_list))
      and n.name in end_to_end
  ]


def test_the_rule_reads_marks_and_follows_fixtures_and_helpers():
  body = "def test_a(tmp_path):\n  run([sys.executable, 'main.py'])\n"
  assert unmarked_end_to_end("import pytest\n" + body) == ["test_a"]
  assert unmarked_end_to_end("import pytest\n@pytest.mark.slow\n" + body) == []
  assert unmarked_end_to_end("import pytest\npytestmark = pytest.mark.slow\n" + body) == []
  assert unmarked_end_to_end("import pytest\npytestmark = [pytest.mark.slow]\n" + body) == []
  assert unmarked_end_to_end("def test_b(jax_processes):\n  pass\n") == ["test_b"]
  assert unmarked_end_to_end("def test_c(x):\n  loop.train_and_evaluate(x)\n") == ["test_c"]
  assert unmarked_end_to_end("def test_d():\n  assert 'main.py: ' in out\n") == []  # a message, not an argument
  fixture = "@pytest.fixture(scope='module')\ndef sizes():\n  return coord_check.coord_check(c, (8, 16), b)\n"
  assert unmarked_end_to_end(fixture + "def test_e(sizes):\n  assert sizes\n") == ["test_e"]
  helper = "def _run(tmp_path):\n  subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)])\n"
  assert unmarked_end_to_end(helper + "def test_f(tmp_path):\n  _run(tmp_path)\n") == ["test_f"]
  assert unmarked_end_to_end("def test_g():\n  run([str(REPO / 'bench' / 'gpu.sh')])\n") == ["test_g"]
  assert unmarked_end_to_end("def _config():\n  return 1\ndef test_h():\n  assert _config()\n") == []


# This file is left out: its source spells the rule's words ("main.py", SCRIPT, ...) as data.
@pytest.mark.parametrize("path", sorted(set(TESTS.glob("test_*.py")) - {TESTS / "test_tiers.py"}), ids=lambda p: p.name)
def test_every_end_to_end_test_is_in_the_slow_tier(path):
  unmarked = set(unmarked_end_to_end(path.read_text())) - STOP_BEFORE_COMPUTE.get(path.name, set())
  assert not unmarked, f"{path.name}: mark these @pytest.mark.slow: {sorted(unmarked)}"


def test_the_tests_that_stop_before_compute_exist_and_replace_the_train_step():
  for name, tests in STOP_BEFORE_COMPUTE.items():
    tree = ast.parse((TESTS / name).read_text())
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in tests):
      assert "jit_train_step" in ast.unparse(fn) and "raise AssertionError" in ast.unparse(fn), (name, fn.name)
    assert tests <= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, name
