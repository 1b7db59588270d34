"""Tests for curvax/__init__.py as the house's only door into curvax: every .py outside curvax/ and bench/ reaches
curvax through `import curvax` and the names of `curvax.__all__` (docs/curvax.md), never a private module.

The check reads the code, not its behaviour: each file is parsed with `ast` and every `from curvax import X`,
`import curvax.x`, `from curvax.x import Y` and attribute `curvax.X` (on the name `import curvax` binds, aliases
included; dunders such as `curvax.__all__` are free) is held against `curvax.__all__`. bench/ may time curvax's
internals; curvax's own unit tests (`OWN_TESTS`) test its private modules, which no client may reach.
"""

import ast
import pathlib

import curvax

ROOT = pathlib.Path(__file__).resolve().parents[1]
INSIDE = ("curvax", "bench")  # curvax itself, and the benchmarks that time its internals
# curvax's own unit tests of its private modules (the recurrence's reorthogonalization, probes, the SLQ kernel).
OWN_TESTS = (
    "tests/test_lanczos.py",
    "tests/test_spectrum.py",
    "tests/test_curvax_closures.py",
    "tests/test_curvax_restart.py",
    "tests/test_curvax_host_basis.py",
    "tests/test_reorthogonalization.py",
)


def violations(source: str, public=frozenset(curvax.__all__)) -> list:
  """The curvax names `source` takes from outside `public`, one line each ("line: what"), in order of lines."""
  tree = ast.parse(source)
  found, bound = [], set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name == "curvax":
          bound.add(alias.asname or "curvax")
        elif alias.name.startswith("curvax."):
          found.append((node.lineno, f"import {alias.name}"))
          bound.add(alias.asname or "curvax")
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      if node.module == "curvax":
        found += [(node.lineno, f"from curvax import {a.name}") for a in node.names if a.name not in public]
      elif node.module.startswith("curvax."):
        found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names]
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
      if node.attr not in public and not (node.attr.startswith("__") and node.attr.endswith("__")):
        found.append((node.lineno, f"{node.value.id}.{node.attr}"))
  return [f"{line}: {what}" for line, what in sorted(set(found))]


def _client_files() -> list:
  files = []
  for path in sorted(ROOT.rglob("*.py")):
    parts = path.relative_to(ROOT).parts
    if parts[0] in INSIDE or any(p.startswith(".") and p != ".ci" for p in parts) or "site-packages" in parts:
      continue
    if path.relative_to(ROOT).as_posix() not in OWN_TESTS:
      files.append(path)
  return files


def test_the_check_sees_every_way_in():
  source = (
      "import curvax\nimport curvax as cx\nimport curvax.lanczos\nfrom curvax import hessian, ravel_it\n"
      "from curvax.spectrum import top_eigenvalues\nx = curvax.lanczos(op, num_steps=3)\ny = cx._private\n"
      "z = curvax.operators.run_program\nw = curvax.__all__\n"
  )
  assert violations(source, frozenset({"hessian", "lanczos"})) == [
      "3: import curvax.lanczos",
      "4: from curvax import ravel_it",
      "5: from curvax.spectrum import top_eigenvalues",
      "7: cx._private",
      "8: curvax.operators",
  ]
  assert violations("import numpy as curvax\nfrom curvaxx import y\nx = curvax.anything\n") == []


def test_every_public_name_is_bound():
  assert len(set(curvax.__all__)) == len(curvax.__all__)
  assert [name for name in curvax.__all__ if not hasattr(curvax, name)] == []


def test_clients_use_the_public_face_only():
  files = _client_files()
  assert len(files) > 100  # the house's modules and tests were found
  bad = {}
  for path in files:
    found = violations(path.read_text(encoding="utf-8"))
    if found:
      bad[path.relative_to(ROOT).as_posix()] = found
  assert bad == {}, "names outside curvax.__all__:\n" + "\n".join(f"{p}: {v}" for p, v in bad.items())
