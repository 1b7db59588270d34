"""No study imports another study: every module of experiments/claims/ that the registry lists (a study) and every
module of experiments/claims/shared/ (the rules studies share) is parsed, and none may import a study module, in
any of Python's spellings (`import experiments.claims.x`, `from experiments.claims import x`, `from
experiments.claims.x import y`, a relative import). A study's shared code lives in experiments/claims/shared/."""

import ast
import pathlib

import pytest

from experiments.registry import CLAIM_NAMES

CLAIMS = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "claims"
SHARED = sorted(p.stem for p in (CLAIMS / "shared").glob("*.py") if p.stem != "__init__")


def imported_studies(path: pathlib.Path, package: str) -> set[str]:
  """The study modules (`CLAIM_NAMES`) that the module at `path`, of `package`, imports."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: resolved against the module's own package
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
      names = [base] + [f"{base}.{a.name}" for a in node.names]
    else:
      continue
    for name in names:
      parts = name.split(".")
      if parts[:2] == ["experiments", "claims"] and len(parts) > 2 and parts[2] in CLAIM_NAMES:
        found.add(parts[2])
  return found


def test_every_registered_study_is_a_module_of_claims_and_no_shared_module_is_a_study():
  assert all((CLAIMS / f"{name}.py").exists() for name in CLAIM_NAMES)
  assert not set(SHARED) & set(CLAIM_NAMES) and {"training", "transfer", "edge_rules", "boundary_rules"} <= set(SHARED)
  # experiments/claims/ holds the studies alone (and its package file); the shared rules are in shared/
  assert {p.stem for p in CLAIMS.glob("*.py")} == {*CLAIM_NAMES, "__init__"}


@pytest.mark.parametrize("name", CLAIM_NAMES)
def test_no_study_imports_another_study(name):
  assert imported_studies(CLAIMS / f"{name}.py", "experiments.claims") - {name} == set()


@pytest.mark.parametrize("name", SHARED)
def test_no_shared_module_imports_a_study(name):
  assert imported_studies(CLAIMS / "shared" / f"{name}.py", "experiments.claims.shared") == set()


def test_the_check_sees_every_spelling_of_an_import(tmp_path):
  path = tmp_path / "m.py"
  for source in (
      "import experiments.claims.warmup",
      "from experiments.claims import warmup",
      "from experiments.claims import edge_figures, warmup as w",
      "from experiments.claims.warmup import MIN_SEEDS",
      "from . import warmup",
      "from .warmup import rescue",
  ):
    path.write_text(source + "\n")
    assert imported_studies(path, "experiments.claims") == {"warmup"}, source
  path.write_text("from experiments.claims.shared import training\nfrom .. import study\nimport warmup\n")
  assert imported_studies(path, "experiments.claims.shared") == set()
