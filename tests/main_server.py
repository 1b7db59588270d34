"""`python main.py ARGS` without paying for the interpreter's start and main.py's imports each time.

A server process imports what main.py imports (not main.py itself), then forks one child per request; the child sets
the request's environment and working folder, points its stdin, stdout and stderr at /dev/null and two files, and runs
main.py as `__main__` with `sys.argv = ["main.py", *args]`: main.py's own module code, flags, `app.run` and exit
status, in a process of its own, that leaves through the interpreter's normal exit (atexit handlers included). Nothing
in the server has initialized a JAX backend, the one state a fork must not copy (JAX warns at a fork only after one),
so each child builds its own from its environment. A request whose environment differs from the server's in a variable
JAX, XLA or Python read at import (JAX_*, XLA_*, PYTHON*) runs as a real subprocess instead.

Why: the imports are most of what a bad-input run costs, and the suite runs dozens of them.

    with MainServer() as server:
      proc = server.run(["--config=configs/t5_init.py", "--config.mode=trian"], env={...}, cwd=REPO)
      proc.returncode, proc.stdout, proc.stderr     # a subprocess.CompletedProcess
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
READ_AT_IMPORT = ("JAX_", "XLA_", "PYTHON")


def _import_time_env(env: dict) -> dict:
  return {k: v for k, v in env.items() if k.startswith(READ_AT_IMPORT)}


class MainServer:
  """A forking server of main.py runs (see the module docstring); a context manager that stops it."""

  def __init__(self):
    self._env = dict(os.environ)
    self._proc = subprocess.Popen(
        [sys.executable, __file__],
        cwd=REPO,
        env=self._env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

  def run(self, args: list[str], *, env: dict, cwd=REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    """main.py with `args` in `env` and `cwd`: its exit status, stdout and stderr, as `subprocess.run` gives them."""
    if _import_time_env(env) != _import_time_env(self._env):
      return subprocess.run(
          [sys.executable, "main.py", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
      )
    with tempfile.TemporaryDirectory() as folder:
      request = dict(args=args, env=env, cwd=str(cwd), timeout=timeout, out=f"{folder}/out", err=f"{folder}/err")
      self._proc.stdin.write(json.dumps(request) + "\n")
      self._proc.stdin.flush()
      reply = json.loads(self._proc.stdout.readline())
      if reply["returncode"] is None:
        raise subprocess.TimeoutExpired(["main.py", *args], timeout)
      read = lambda name: pathlib.Path(request[name]).read_text(errors="replace")
      return subprocess.CompletedProcess(["main.py", *args], reply["returncode"], read("out"), read("err"))

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self._proc.stdin.close()
    self._proc.wait(timeout=60)


def _serve() -> dict:
  """The server's loop: forks per request and answers with the child's exit status; returns the request in the child."""
  import gc  # noqa: PLC0415
  import signal  # noqa: PLC0415
  import threading  # noqa: PLC0415
  import time  # noqa: PLC0415

  gc.freeze()  # the imports' objects: a child's collections then leave their pages shared
  for line in sys.stdin:
    request = json.loads(line)
    assert threading.active_count() == 1, "a fork copies one thread of several"
    pid = os.fork()
    if pid == 0:
      return request
    deadline = time.monotonic() + request["timeout"]
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
      time.sleep(0.02)
    if done[0] == 0:
      os.kill(pid, signal.SIGKILL)
      os.waitpid(pid, 0)
      code = None
    else:
      code = os.waitstatus_to_exitcode(done[1])
    sys.stdout.write(json.dumps(dict(returncode=code)) + "\n")
    sys.stdout.flush()
  sys.exit(0)


if __name__ == "__main__":
  sys.path[0] = str(REPO)  # where `python main.py` finds the project (this file's folder, tests/, is not on it)
  # main.py's imports, once (its module code, the flags' definitions, runs in each child).
  import ast  # noqa: E402

  tree = ast.parse((REPO / "main.py").read_text(encoding="utf-8"))
  for node in tree.body:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      exec(compile(ast.Module([node], []), "main.py", "exec"), {})  # noqa: S102 (main.py's own import lines)
  request = _serve()
  # The child: main.py as `python main.py ARGS` would run it.
  import runpy  # noqa: E402

  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  for fd, path, mode in (
      (0, os.devnull, os.O_RDONLY),
      (1, request["out"], os.O_WRONLY),
      (2, request["err"], os.O_WRONLY),
  ):
    os.dup2(os.open(path, mode | (os.O_CREAT if fd else 0), 0o644), fd)
  sys.argv = ["main.py", *request["args"]]
  try:
    runpy.run_path("main.py", run_name="__main__")
    code = 0
  except SystemExit as e:  # as the interpreter reads it: None is 0, an int itself, anything else printed and 1
    code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    if not isinstance(e.code, (int, type(None))):
      print(e.code, file=sys.stderr)
  # The exit `sys.exit` makes, less the teardown of every module object the server imported (most of a child's cost,
  # each freed object a copied page): the atexit handlers, the streams flushed, then out.
  import atexit  # noqa: E402

  atexit._run_exitfuncs()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)
