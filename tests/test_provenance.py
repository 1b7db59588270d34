"""experiments/provenance.py: what counts as a dirty tree (code, not the reports a study writes while it runs)."""

import subprocess

from experiments import provenance


def _git(repo, *args):
  subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_dirty_means_the_code_changed_not_the_reports(tmp_path):
  _git(tmp_path, "init", "-q")
  (tmp_path / "reports").mkdir()
  (tmp_path / "model.py").write_text("x = 1\n")
  (tmp_path / "reports" / "ATLAS.md").write_text("old\n")
  _git(tmp_path, "add", ".")
  _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
  clean = provenance.git_state(str(tmp_path))
  assert clean["git_dirty"] is False and clean["git_dirty_paths"] == [] and len(clean["git_commit"]) == 40
  (tmp_path / "reports" / "ATLAS.md").write_text("rewritten by the study after a cell\n")
  (tmp_path / "reports" / "new.png").write_text("a figure\n")
  assert provenance.git_state(str(tmp_path))["git_dirty"] is False
  (tmp_path / "model.py").write_text("x = 2\n")
  (tmp_path / "extra.py").write_text("y = 1\n")
  dirty = provenance.git_state(str(tmp_path))
  assert dirty["git_dirty"] is True and sorted(dirty["git_dirty_paths"]) == ["extra.py", "model.py"]


def test_outside_a_repository_says_why(tmp_path):
  state = provenance.git_state(str(tmp_path))
  assert state["git_commit"] is None and state["git_dirty"] is None and state["git_error"]


def test_a_process_names_the_code_it_started_with(tmp_path):
  """A long sweep's later runs name the commit its code came from, not the checkout's state by then: the git state
  is read once per process (per repository)."""
  _git(tmp_path, "init", "-q")
  (tmp_path / "model.py").write_text("x = 1\n")
  _git(tmp_path, "add", ".")
  _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
  first = provenance.provenance(str(tmp_path))
  (tmp_path / "model.py").write_text("x = 2\n")  # edited (and could be committed) while the process runs
  again = provenance.provenance(str(tmp_path))
  assert (again["git_commit"], again["git_dirty"]) == (first["git_commit"], False)
  assert provenance.git_state(str(tmp_path))["git_dirty"] is True  # the checkout itself is dirty now
