"""Every bad invocation of main.py is one line on stderr and exit status 2, before any compute (issue 41's table):
the key or input, the bad value and the valid choices. `--verbosity=1` keeps the traceback (tests/test_config.py)."""

import gzip
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.main_server import MainServer
from train import cli

pytestmark = pytest.mark.slow  # end to end: the slow tier (pytest.ini)

LOG = re.compile(r"^[IWEF]\d{4} ")  # absl's log lines (a warning about a platform, say): not the error's lines
SWEEP = "--config=configs/sweeps/warmup.py"
T5 = "--config=configs/t5_init.py"
CASES = [
    # (arguments, environment, a phrase of the one line)
    (["--config=configs/t5_init.py", "--config.model.nonexistent=1"], {}, "no such key"),
    (["--config=configs/t5_init.py", "--config.optim.learning_rate=-1"], {}, "optim.learning_rate"),
    (["--config=configs/t5_init.py", "--config.mode=trian"], {}, "config.mode='trian' is invalid"),
    (["--config=configs/t5_init.py", "--config.train.num_steps=abc"], {}, "--config.train.num_steps=abc"),
    (["--config=configs/nope.py"], {}, "--config=configs/nope.py is invalid (no such file)"),
    (["--config=configs/t5_init.py:bad"], {}, "get_config() takes 0 positional arguments"),
    ([SWEEP, "--config.sweep.grid=nope.key=1"], {}, "key 'nope.key' is not a leaf key"),
    ([SWEEP, "--config.sweep.grid=optim.learning_rate=abc"], {}, "optim.learning_rate takes a number"),
    ([SWEEP, "--config.sweep.grid=optim.learning_rate"], {}, "needs exactly one '='"),
    ([SWEEP, "--config.sweep.shard=3/2"], {}, "sweep.shard"),
    ([SWEEP], {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "2"}, "SLURM_ARRAY_TASK_ID=5 is invalid"),
    (
        [T5, "--config.model.norm_position=middle"],
        {},
        "config.model.norm_position='middle' is invalid; valid: ['post', 'pre'",
    ),
    ([T5, "--config.model.preset=huge"], {}, "config.model.preset='huge' is invalid; valid: ['base'"),
    ([T5, "--config.model.activation=swish"], {}, "config.model.activation='swish' is invalid"),
    ([T5, "--config.model.dtype=float8"], {}, "config.model.dtype='float8' is invalid"),
    ([T5, "--config.model.d_model=100", "--config.model.num_heads=3"], {}, "d_model=100 contradicts"),
    ([T5, "--config.model.residual=deepnorm"], {}, "config.model.residual='deepnorm' contradicts"),
    ([T5, "--config.optim.name=sgdd"], {}, "config.optim.name='sgdd' is invalid; valid: ['adafactor'"),
    ([T5, "--config.optim.schedule=cosine"], {}, "config.optim.schedule='cosine' is invalid"),
    ([T5, "--config.train.num_steps=-5"], {}, "config.train.num_steps=-5 is invalid; valid: an integer >= 0"),
    ([T5, "--config.data.name=foo"], {}, "config.data.name='foo' is invalid"),
    ([T5, "--config.data.batch_size=0"], {}, "config.data.batch_size=0 is invalid; valid: an integer >= 1"),
    ([T5, "--config.metrics.writers=nope"], {}, "config.metrics.writers=('nope',) is invalid"),
    ([T5, "--nope=1"], {}, "Unknown command line flag 'nope'"),
    ([SWEEP, "--config.sweep.seeds=0"], {}, "config.sweep.seeds=0 is invalid"),
    ([SWEEP, "--config.sweep.shard=abc"], {}, "config.sweep.shard='abc' is invalid"),
    ([SWEEP], {"SLURM_ARRAY_TASK_ID": "abc", "SLURM_ARRAY_TASK_COUNT": "2"}, "SLURM_ARRAY_TASK_ID='abc' is invalid"),
    (
        ["--config=configs/t5_init.py", "--config.data.name=multi30k", "--config.data.dir=/nonexistent/multi30k"],
        {},
        "data.dir",
    ),
]


def _data(folder, short: str = "", empty: str = "") -> str:
  """A Multi30k-shaped folder of 5-line splits; `short`: a file 2 lines short; `empty`: a valid empty gzip file."""
  os.makedirs(folder)
  for split in ("train", "val", "test_2016_flickr"):
    for lang in ("de", "en"):
      name = f"{split}.{lang}.gz"
      lines = 0 if name == empty else 3 if name == short else 5
      with gzip.open(os.path.join(folder, name), "wt", encoding="utf-8") as f:
        f.write("".join(f"a sentence {i}\n" for i in range(lines)))
  return str(folder)


@pytest.mark.parametrize(
    "make, phrase",
    [
        (lambda d: _data(d, short="val.en.gz"), "val.de.gz has 5 lines but"),
        (lambda d: _data(d, empty="train.de.gz"), "train.de.gz has 0 lines"),
        (lambda d: _data(d, empty="test_2016_flickr.en.gz"), "test_2016_flickr.en.gz has 0 lines"),
    ],
)
def test_a_bad_data_folder_is_one_line_naming_the_file(make, phrase, tmp_path, server):
  folder = make(tmp_path / "multi30k")
  args = ["--config=configs/t5_init.py", "--config.data.name=multi30k", f"--config.data.dir={folder}"]
  test_a_bad_invocation_is_one_line_and_exit_2(args, {}, phrase, tmp_path, server)


def test_a_workdir_that_is_a_file_is_one_line(tmp_path):
  (tmp_path / "w").write_text("a file")
  out = subprocess.run(
      [sys.executable, "main.py", "--config=configs/t5_init.py", f"--workdir={tmp_path / 'w'}"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  lines = [line for line in out.stderr.splitlines() if line.strip() and not LOG.match(line)]
  assert out.returncode == 2 and len(lines) == 1 and "(a file, not a folder)" in lines[0], out.stderr[-2000:]


@pytest.fixture(scope="module")
def server():
  """main.py's runs forked from one process that imported its modules once (tests/main_server.py)."""
  with MainServer() as s:
    yield s


def test_the_server_runs_main_py_as_a_process_of_its_own_would(tmp_path, server):
  """The same bad invocation through the server and as `python main.py`: the same exit status and stderr lines
  (absl's log lines aside), and a child's environment is its own (SLURM's variables reach it, not the next)."""
  args = [SWEEP, f"--workdir={tmp_path / 'w'}"]
  env = {**os.environ, "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "2"}
  real = subprocess.run([sys.executable, "main.py", *args], cwd=REPO, env=env, capture_output=True, text=True)
  forked = server.run(args, env=env)
  error_lines = lambda p: [line for line in p.stderr.splitlines() if line.strip() and not LOG.match(line)]
  assert real.returncode == forked.returncode == 2
  assert error_lines(real) == error_lines(forked) and "SLURM_ARRAY_TASK_ID=5 is invalid" in error_lines(real)[0]
  again = server.run([*args, "--config.sweep.shard=3/2"], env=dict(os.environ))
  assert again.returncode == 2 and "SLURM" not in "".join(error_lines(again)), again.stderr[-2000:]


@pytest.mark.parametrize("args, env, phrase", CASES, ids=[" ".join(a[1:]) or a[0] for a, _, _ in CASES])
def test_a_bad_invocation_is_one_line_and_exit_2(args, env, phrase, tmp_path, server):
  out = server.run([*args, f"--workdir={tmp_path / 'w'}"], env={**os.environ, **env})
  lines = [line for line in out.stderr.splitlines() if line.strip() and not LOG.match(line)]
  assert out.returncode == 2, out.stderr[-3000:]
  assert len(lines) == 1 and lines[0].startswith("main.py: ") and phrase in lines[0], lines
  assert not (tmp_path / "w" / "checkpoints").exists()  # nothing trained (a file named w would not have it either)


def test_a_workdir_this_user_cannot_write_is_invalid(tmp_path, monkeypatch):
  """A read-only folder (the suite runs as root, whom permissions do not stop, so the access check is what is
  faked): the nearest existing parent of the workdir is named."""
  monkeypatch.setattr(cli.os, "access", lambda path, mode: path != str(tmp_path))
  with pytest.raises(ValueError, match=rf"\({re.escape(str(tmp_path))} is not writable\); valid: a folder this user"):
    cli.check_workdir(str(tmp_path / "new" / "run"))
  cli.check_workdir(str(tmp_path.parent / "elsewhere"))  # a writable parent passes
