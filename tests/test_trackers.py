"""Trackers beside metrics.jsonl (train/trackers.py, issue 27): `metrics.writers` with 'wandb' or 'trackio'.

Neither library is a dependency, so CI drives the same writer path through fake modules put in `sys.modules` under
their names (`FakeTracker`: records every `init`'s arguments, every logged scalar and every `finish`). They check
that the tracker gets the scalars of metrics.jsonl at the same steps, that a resumed run reopens its own tracker run
(the id derived from the workdir), that a sweep's runs are grouped by the sweep's name with the resolved config as
each run's config, that only process 0 opens one, that importing the project imports neither library, and that a
writer whose library is missing is a config error before any compute. With wandb (trackio) installed, a real
offline (local) run checks the same against the library itself; each is skipped, with the reason, where it is not.
"""

import importlib.machinery
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

import train.config
from experiments import sweep as sweep_lib
from tests import tiny
from train import loop
from train import metrics as metrics_lib
from train import trackers as trackers_lib

REPO = pathlib.Path(__file__).resolve().parents[1]
SMALL = {
    "model.arch": "decoder",
    "model.num_decoder_layers": 1,
    "data.embedded.num_train": 64,
    "data.embedded.num_eval": 8,
    "data.batch_size": 8,
    "data.eval_batch_size": 8,
    "optim.warmup_steps": 0,
    "train.num_steps": 4,
    "train.log_every": 1,
    "train.eval_every": 2,
    "train.checkpoint_every": 2,
    "train.num_decode_examples": 0,
}


class FakeRun:

  def __init__(self, module, kwargs):
    self.module, self.kwargs, self.logged, self.finished = module, kwargs, [], 0

  def log(self, data, step=None):
    self.logged.append((step, dict(data)))

  def finish(self):
    self.finished += 1


def fake_tracker(name: str) -> types.ModuleType:
  """A module named `name` whose `init(**kwargs)` returns a `FakeRun` and records it in `module.runs`."""
  module = types.ModuleType(name)
  module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec() sees it as installed
  module.runs = []

  def init(**kwargs):
    module.runs.append(FakeRun(module, kwargs))
    return module.runs[-1]

  module.init = init
  return module


@pytest.fixture(params=["wandb", "trackio"])
def tracker(request, monkeypatch):
  module = fake_tracker(request.param)
  monkeypatch.setitem(sys.modules, request.param, module)
  return module


def _train(workdir, writers, **overrides):
  config = tiny.run_config(**{**SMALL, "metrics.writers": writers, **overrides})
  exp = loop.setup(config, str(workdir))
  loop.train_and_evaluate(exp)
  return exp


def _as_logged(records: list[dict]) -> list[tuple[int, dict]]:
  """metrics.jsonl's records as a tracker gets them: (step, {'<split>/<name>': value})."""
  out = []
  for r in records:
    out.append((r["step"], {f"{r['split']}/{k}": v for k, v in r.items() if k not in ("step", "split")}))
  return out


@pytest.mark.slow
def test_a_tracker_gets_every_record_of_metrics_jsonl_and_resumes_its_own_run(tmp_path, tracker):
  workdir = tmp_path / "run"
  exp = _train(workdir, ("jsonl", tracker.__name__), **{"train.num_steps": 2})
  (first,) = tracker.runs
  kwargs = first.kwargs
  assert kwargs["resume"] == "allow" and kwargs["project"] == "transformer-init" and kwargs["group"] is None
  run_id = trackers_lib.run_id(workdir)
  assert (kwargs["id"] if tracker.__name__ == "wandb" else kwargs["name"]) == run_id
  assert kwargs["config"] == exp.config.to_dict()  # the resolved config: config.json's, with its tuples
  assert json.loads(json.dumps(kwargs["config"])) == json.loads((workdir / "config.json").read_text())
  assert first.logged == _as_logged(metrics_lib.read_metrics(workdir)) and first.finished == 1
  assert [step for step, _ in first.logged] == [1, 2, 2]  # train 1, train 2, eval 2

  # A rerun that trains on to step 4 resumes from checkpoint 2: the same tracker run, only the new steps.
  _train(workdir, ("jsonl", tracker.__name__), **{"train.num_steps": 4})
  second = tracker.runs[1]
  assert {k: second.kwargs[k] for k in ("id", "name") if k in second.kwargs} == {
      k: kwargs[k] for k in ("id", "name") if k in kwargs
  }
  assert [step for step, _ in second.logged] == [3, 4, 4]
  assert first.logged + second.logged == _as_logged(metrics_lib.read_metrics(workdir)) and second.finished == 1


@pytest.mark.slow
def test_no_tracker_without_the_writer_and_none_but_on_process_0(tmp_path, tracker):
  _train(tmp_path / "plain", ("jsonl",), **{"train.num_steps": 1})
  assert tracker.runs == []  # the default writers: no tracker, its module never asked for
  metrics = trackers_lib.MetricsConfig.from_config(
      {"writers": ("jsonl", tracker.__name__), "project": "p", "group": "g"}
  )
  assert trackers_lib.open_trackers(metrics, tmp_path / "w", {}, primary=False) == []
  assert tracker.runs == []
  (opened,) = trackers_lib.open_trackers(metrics, tmp_path / "w", {"a": 1}, primary=True)
  assert tracker.runs[0].kwargs["group"] == "g" and tracker.runs[0].kwargs["config"] == {"a": 1}
  with metrics_lib.MetricWriter(tmp_path / "w", primary=False, trackers=[opened]) as writer:
    writer.write_scalars(1, {"loss": 1.0})  # another process: checks the record, writes and logs nothing
  assert tracker.runs[0].logged == [] and tracker.runs[0].finished == 0


@pytest.mark.slow
def test_a_sweeps_runs_are_grouped_by_its_name_each_with_its_config(tmp_path, monkeypatch):
  module = fake_tracker("trackio")
  monkeypatch.setitem(sys.modules, "trackio", module)
  config = tiny.sweep_config(
      **{
          "model.arch": "decoder",
          "train.num_steps": 1,
          "train.eval_every": 1,
          "data.embedded.num_train": 16,
          "sweep.grid": "optim.learning_rate=0.001,0.002",
          "sweep.seeds": 1,
          "metrics.writers": ("jsonl", "trackio"),
      }
  )
  records = sweep_lib.run_sweep(config, str(tmp_path / "warmup_sweep"), emit=print, env={})
  assert [r["outcome"] for r in records] == ["finished", "finished"]
  assert [run.kwargs["group"] for run in module.runs] == ["warmup_sweep", "warmup_sweep"]
  names = [run.kwargs["name"] for run in module.runs]
  assert names == [trackers_lib.run_id(tmp_path / "warmup_sweep" / r["workdir"]) for r in records]
  assert names[0].startswith("optim.learning_rate-0.001_seed_0-") and len(set(names)) == 2
  assert [run.kwargs["config"]["optim"]["learning_rate"] for run in module.runs] == [0.001, 0.002]
  for run, record in zip(module.runs, records):
    assert run.logged == _as_logged(metrics_lib.read_metrics(tmp_path / "warmup_sweep" / record["workdir"]))

  config.metrics.group = "lr-study"  # an explicit group wins
  module.runs.clear()
  sweep_lib.run_sweep(config, str(tmp_path / "other"), emit=print, env={})
  assert [run.kwargs["group"] for run in module.runs] == ["lr-study", "lr-study"]


def test_the_run_id_is_the_workdirs_whatever_form_it_is_given_in(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  run_id = trackers_lib.run_id
  assert run_id("runs/a") == run_id(tmp_path / "runs" / "a") == run_id(f"{tmp_path}/runs/./a/")
  assert run_id("runs/a") != run_id("runs/b") and run_id("x/a") != run_id("y/a")  # the hash tells them apart
  assert run_id("gs://bucket/sweep/cells/optim.lr=0.1/seed_0") == run_id("gs://bucket/sweep/cells/optim.lr=0.1/seed_0/")
  got = run_id("gs://bucket/sweep/cells/optim.lr=0.1/seed_0")
  assert got.startswith("optim.lr-0.1_seed_0-") and len(got) <= 64
  assert all(c.isalnum() or c in "._-" for c in got)  # no / \ # ? % : (W&B ids)


@pytest.mark.parametrize(
    "writers, match",
    [
        (
            ("tensorboard",),
            r"config.metrics.writers=\('tensorboard',\) is invalid; valid: a tuple of .* holding 'jsonl'",
        ),
        (("jsonl", "mlflow"), r"config.metrics.writers=\('jsonl', 'mlflow'\) is invalid"),
        (("jsonl", "jsonl"), r"no repeats"),
    ],
)
def test_bad_writers_fail_at_the_config_boundary(writers, match):
  with pytest.raises(ValueError, match=match):
    train.config.resolve(tiny.run_config(**{"metrics.writers": writers}))


@pytest.mark.parametrize("name", ["wandb", "trackio"])
def test_a_missing_tracker_library_is_a_config_error_naming_the_pip_install(name, monkeypatch):
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == name else real(n, *a))
  with pytest.raises(ValueError) as error:
    train.config.resolve(tiny.run_config(**{"metrics.writers": ("jsonl", name)}))
  assert str(error.value) == (
      f"config.metrics.writers=('jsonl', {name!r}) is invalid ({name!r} needs the {name} package, which is not "
      f"installed); valid: writers whose library is installed (pip install {name}; not a dependency of this project)"
  )


@pytest.mark.slow
def test_main_names_a_missing_tracker_before_any_compute_and_imports_none(tmp_path):
  """Importing the project (main.py and every layer) imports neither library; and main.py with metrics.writers
  naming wandb where it is not installed exits 2 with one line, before any compute (no workdir made)."""
  check = (
      "import sys; import main, experiments, train.loop, train.trackers;"
      "assert not {'wandb', 'trackio'} & set(sys.modules), sorted(sys.modules);"
      "print('no tracker imported')"
  )
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
  out = subprocess.run([sys.executable, "-c", check], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0 and "no tracker imported" in out.stdout, out.stderr[-2000:]
  if importlib.util.find_spec("wandb") is not None:
    pytest.skip("wandb is installed here: the missing-library path is covered by the resolve test above")
  workdir = tmp_path / "w"
  proc = subprocess.run(
      [
          sys.executable,
          "main.py",
          "--config=configs/default.py",
          f"--workdir={workdir}",
          "--config.metrics.writers=('jsonl','wandb')",
      ],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1] == (
      "main.py: config.metrics.writers=('jsonl', 'wandb') is invalid ('wandb' needs the wandb package, which is not "
      "installed); valid: writers whose library is installed (pip install wandb; not a dependency of this project)"
  )
  assert not workdir.exists()


@pytest.mark.slow
def test_wandb_offline_records_the_scalars_of_metrics_jsonl_and_resumes_its_run(tmp_path, monkeypatch):
  """The real library, offline: the run's id is the workdir's, its group and config are set, a resumed run opens the
  same id again, and the offline run files hold every scalar of metrics.jsonl (each key and value as wandb's history
  records spell them: the key and the value's JSON)."""
  wandb = pytest.importorskip("wandb", reason="wandb is not installed (not a dependency: pip install wandb)")
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
  monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb_cache"))
  seen = []
  log = trackers_lib.WandbTracker.log

  def log_and_record(self, step, scalars):
    if not seen or seen[-1][0] is not self._run:
      seen.append((self._run, self._run.id, self._run.group, dict(self._run.config)))
    log(self, step, scalars)

  monkeypatch.setattr(trackers_lib.WandbTracker, "log", log_and_record)
  workdir = tmp_path / "run"
  exp = _train(workdir, ("jsonl", "wandb"), **{"train.num_steps": 2, "metrics.group": "g"})
  _train(workdir, ("jsonl", "wandb"), **{"train.num_steps": 4, "metrics.group": "g"})
  assert [s[1] for s in seen] == [trackers_lib.run_id(workdir)] * 2 and [s[2] for s in seen] == ["g", "g"]
  assert seen[0][3]["optim"]["learning_rate"] == exp.config.optim.learning_rate
  assert wandb.run is None  # finished
  runs = sorted((workdir / "wandb").glob("offline-run-*"))
  assert len(runs) == 2 and all(run.name.endswith(trackers_lib.run_id(workdir)) for run in runs)
  data = b"".join(path.read_bytes() for run in runs for path in run.glob("run-*.wandb"))
  for _, values in _as_logged(metrics_lib.read_metrics(workdir)):
    for key, value in values.items():
      assert key.encode() in data and json.dumps(value).encode() in data, (key, value)


@pytest.mark.slow
def test_trackio_offline_records_the_scalars_of_metrics_jsonl_and_resumes_its_run(tmp_path, monkeypatch):
  """The real library, local (its SQLite database under TRACKIO_DIR): the run named by the workdir holds exactly
  metrics.jsonl's records, the resumed run's steps appended to the same run, with the group and config given."""
  monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))  # read when trackio is first imported
  if "trackio" in sys.modules:
    pytest.skip("trackio was imported before TRACKIO_DIR could point it at this test's folder")
  pytest.importorskip("trackio", reason="trackio is not installed (not a dependency: pip install trackio)")
  from trackio.sqlite_storage import SQLiteStorage  # noqa: PLC0415 (only where trackio is installed)

  workdir = tmp_path / "run"
  _train(workdir, ("jsonl", "trackio"), **{"train.num_steps": 2, "metrics.group": "g", "metrics.project": "t"})
  exp = _train(workdir, ("jsonl", "trackio"), **{"train.num_steps": 4, "metrics.group": "g", "metrics.project": "t"})
  name = trackers_lib.run_id(workdir)
  assert SQLiteStorage.get_runs("t") == [name]  # the rerun resumed the run, made no second one
  logged = [
      (log["step"], {k: v for k, v in log.items() if k not in ("step", "timestamp")})
      for log in SQLiteStorage.get_logs("t", run=name)
  ]
  assert logged == _as_logged(metrics_lib.read_metrics(workdir))
  config = SQLiteStorage.get_run_config("t", run=name)
  assert config["_Group"] == "g" and config["optim"]["learning_rate"] == exp.config.optim.learning_rate
  assert (tmp_path / "trackio").is_dir()
