"""curvax as an outsider gets it: importing it loads none of the project's packages; docs/curvax.md's example runs
from a folder outside the repository and its numbers agree with `numpy.linalg.eigh` of the dense Hessian; and
`pip install .` into a fresh environment gives a working `import curvax` there (skipped without pip or setuptools)."""

import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("models", "init", "train", "analysis", "experiments", "configs", "main")
TIMEOUT_S = 300

# Appended to the example: the dense reference, printed as one JSON line.
CHECK = """
import json
import numpy as np
from jax.flatten_util import ravel_pytree
flat, unravel = ravel_pytree(params)
dense = np.asarray(jax.hessian(lambda f: loss_fn(unravel(f), batch))(flat), np.float64)
eigs = np.linalg.eigvalsh((dense + dense.T) / 2)
print("CHECK " + json.dumps(dict(
    top=float(top.values[0]), top_bound=float(top.bounds[0]), bottom=float(bottom.values[0]),
    bottom_bound=float(bottom.bounds[0]), trace=float(tr.estimate), trace_se=float(tr.std_error),
    eig_max=float(eigs[-1]), eig_min=float(eigs[0]), exact_trace=float(eigs.sum()),
    mass=sum(curvax.ritz_mass(H, top).values()), density_mean=float(np.sum(density.weights * density.nodes) / 8),
    curvax_file=curvax.__file__)))
"""


# What pip prints when it cannot reach the package index.
NO_NETWORK = r"(No matching distribution found|Could not find a version|NewConnectionError|Network is unreachable|Temporary failure in name resolution|ConnectTimeout|ProxyError)"


def _old_setuptools() -> bool:
  """True when this interpreter's setuptools (if any) predates 70.1, which builds wheels without `wheel`."""
  out = subprocess.run(
      [sys.executable, "-c", "import setuptools; print(setuptools.__version__)"], capture_output=True, text=True
  )
  if out.returncode != 0:
    return True
  major, minor = (int(x) for x in re.findall(r"\d+", out.stdout)[:2])
  return (major, minor) < (70, 1)


def doc_example() -> str:
  """The first python block of docs/curvax.md."""
  text = (REPO / "docs" / "curvax.md").read_text()
  return re.findall(r"```python\n(.*?)```", text, re.S)[0]


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_ENABLE_X64")}
  env.update(extra)
  return env


def _run_example(python, folder, cache, pythonpath=None):
  """Run the example plus CHECK with `python` in `folder`; returns the CHECK record."""
  script = folder / "example.py"
  script.write_text(doc_example() + CHECK)
  env = _env(XDG_CACHE_HOME=str(cache), **({"PYTHONPATH": pythonpath} if pythonpath else {}))
  proc = subprocess.run(
      [str(python), str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = next(l for l in proc.stdout.splitlines() if l.startswith("CHECK "))
  assert "λ_max = " in proc.stdout
  return json.loads(line[len("CHECK ") :])


def _assert_agrees_with_dense(r):
  scale = max(abs(r["eig_max"]), abs(r["eig_min"]))
  # float32 throughout: the dense reference carries its own rounding, ~1e-6 of the scale.
  assert abs(r["top"] - r["eig_max"]) <= r["top_bound"] + 1e-5 * scale, r
  assert abs(r["bottom"] - r["eig_min"]) <= r["bottom_bound"] + 1e-5 * scale, r
  assert r["eig_min"] < 0 < r["eig_max"]
  assert abs(r["trace"] - r["exact_trace"]) <= 4 * r["trace_se"], r
  assert abs(r["mass"] - 1.0) < 1e-4


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
  """One compilation cache for the module's runs of the example: the second run reads the first's programs."""
  return tmp_path_factory.mktemp("xdg_cache")


def test_importing_curvax_loads_none_of_the_projects_packages():
  code = "import sys, json, curvax\n" "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
  proc = subprocess.run(
      [sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
  assert "curvax" in loaded and "jax" in loaded
  assert not loaded & set(PROJECT_PACKAGES), loaded & set(PROJECT_PACKAGES)
  assert not loaded & {"flax", "optax", "matfree"}, "matfree is imported only by trace(method='xtrace')"


@pytest.mark.slow
def test_doc_example_runs_outside_the_repository_and_matches_the_dense_hessian(tmp_path, cache):
  r = _run_example(sys.executable, tmp_path, cache, pythonpath=str(REPO))
  _assert_agrees_with_dense(r)
  assert pathlib.Path(r["curvax_file"]).resolve().is_relative_to(REPO)


@pytest.mark.slow
def test_pip_install_into_a_fresh_environment_then_the_doc_example(tmp_path, cache):
  """`pip install --no-deps` of a copy of the package's files into a fresh venv that reuses this interpreter's jax and
  numpy through a .pth file (offline with --no-build-isolation when this interpreter can build a wheel, else pip
  fetches the build backend: skipped without network); the example then imports the installed curvax from a
  folder outside the repository, where the project's packages cannot be imported."""
  if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
    pytest.skip("pip is not available to this interpreter")
  # Offline when this interpreter can build a wheel itself (setuptools ≥ 70.1, or an older one with `wheel`);
  # otherwise pip fetches the build backend (pyproject's build-system) into an isolated build environment.
  offline = (
      subprocess.run(
          [sys.executable, "-c", "import setuptools, wheel"] if _old_setuptools() else [sys.executable, "-c", "1"],
          capture_output=True,
      ).returncode
      == 0
  )
  src = tmp_path / "src"
  shutil.copytree(REPO / "curvax", src / "curvax", ignore=shutil.ignore_patterns("__pycache__"))
  shutil.copy(REPO / "pyproject.toml", src / "pyproject.toml")
  (src / "docs").mkdir()
  shutil.copy(REPO / "docs" / "curvax.md", src / "docs" / "curvax.md")
  venv = tmp_path / "venv"
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=TIMEOUT_S)
  python = venv / "bin" / "python"
  purelib = subprocess.run(
      [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
      capture_output=True,
      text=True,
      check=True,
  ).stdout.strip()
  (pathlib.Path(purelib) / "reuse_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
  build = ["--no-build-isolation", "--no-index"] if offline else []
  install = subprocess.run(
      [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", *build, str(src)],
      env=_env(),
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
  )
  if install.returncode != 0 and not offline and re.search(NO_NETWORK, install.stderr):
    pytest.skip(
        f"no network to fetch the build backend (setuptools, wheel) for `pip install .`: {install.stderr[-300:]}"
    )
  assert install.returncode == 0, install.stderr[-3000:]
  outside = tmp_path / "elsewhere"
  outside.mkdir()
  probe = subprocess.run(
      [str(python), "-c", "import importlib.util as u; print([m for m in ('analysis', 'models') if u.find_spec(m)])"],
      cwd=outside,
      env=_env(),
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
  )
  assert probe.stdout.strip() == "[]", probe.stdout + probe.stderr
  r = _run_example(python, outside, cache)
  assert pathlib.Path(r["curvax_file"]).resolve().is_relative_to(venv.resolve()), r["curvax_file"]
  _assert_agrees_with_dense(r)


@pytest.mark.slow
def test_enable_compilation_cache_writes_curvax_programs_to_the_folder(tmp_path):
  """In a fresh process (the cache is process-wide configuration): the folder is created and receives the compiled
  programs of a curvax routine; a bad argument fails before anything is configured."""
  code = (
      "import jax, jax.numpy as jnp, curvax, sys\n"
      "folder = curvax.enable_compilation_cache(sys.argv[1])\n"
      "op = curvax.matrix_operator(jnp.diag(jnp.arange(1.0, 9.0)))\n"
      "print(float(curvax.top_eigenvalues(op, 1, num_steps=8, key=jax.random.key(0)).values[0]))\n"
      "try:\n"
      "  curvax.enable_compilation_cache(min_compile_time_secs=-1)\n"
      "except ValueError as e:\n"
      "  print('rejected', e)\n"
  )
  folder = tmp_path / "cache"
  proc = subprocess.run(
      [sys.executable, "-c", code, str(folder)],
      cwd=tmp_path,
      env=_env(PYTHONPATH=str(REPO)),
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert abs(float(proc.stdout.split()[0]) - 8.0) < 1e-5
  assert "rejected min_compile_time_secs=-1" in proc.stdout
  assert folder.is_dir() and any(folder.iterdir())
