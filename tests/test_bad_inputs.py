"""Every bad invocation of main.py is one line on stderr and exit status 2, before any compute (issue 41's table):
the key or input, the bad value and the valid choices. `--verbosity=1` keeps the traceback (tests/test_config.py)."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

LOG = re.compile(r"^[IWEF]\d{4} ")  # absl's log lines (a warning about a platform, say): not the error's lines
SWEEP = "--config=configs/sweeps/warmup.py"
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
        ["--config=configs/t5_init.py", "--config.data.name=multi30k", "--config.data.dir=/nonexistent/multi30k"],
        {},
        "data.dir",
    ),
]


@pytest.mark.parametrize("args, env, phrase", CASES, ids=[" ".join(a[1:]) or a[0] for a, _, _ in CASES])
def test_a_bad_invocation_is_one_line_and_exit_2(args, env, phrase, tmp_path):
  out = subprocess.run(
      [sys.executable, "main.py", *args, f"--workdir={tmp_path / 'w'}"],
      cwd=REPO,
      env={**os.environ, **env},
      capture_output=True,
      text=True,
      timeout=300,
  )
  lines = [line for line in out.stderr.splitlines() if line.strip() and not LOG.match(line)]
  assert out.returncode == 2, out.stderr[-3000:]
  assert len(lines) == 1 and lines[0].startswith("main.py: ") and phrase in lines[0], lines
  assert not (tmp_path / "w" / "checkpoints").exists()  # nothing trained
