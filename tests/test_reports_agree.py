"""Every file that states a result states the same one: claim.json (the record), REPRODUCTION.md, ATLAS.md (the
atlas's studies) and the README's table, checked on the committed reports; a registered study without a record is
stated as not run yet in each of them, and nowhere given a verdict."""

import json
import os
import pathlib
import re

from experiments import reproduce, reproduction
from experiments.registry import CLAIM_NAMES

REPO = pathlib.Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
# Results whose runs were measured on a dirty tree and not rerun yet, with the reason; the test fails for any other.
# The atlas's driver rewrote reports/ATLAS.md in the repository after every cell, so its own output made the tree
# dirty from the first cell on (experiments/provenance.py now leaves reports/ out of the check); rerunning it takes
# ~4.6 hours of 2 cores (configs/atlas.py's calibration), more than a session.


def _records() -> list[dict]:
  return reproduce.collect(str(REPORTS))


def _table_verdicts(text: str) -> dict[int, str]:
  """'| n | [claim](...) | verdict ...' rows → {n: verdict without markup (bold, '(re-reading; ...)')}."""
  out = {}
  for line in text.splitlines():
    m = re.match(
        r"\| (\d+) \| \[?(\w+)\]?[^|]* \| (\*\*)?([a-z ]+?)(\*\*)?( \(atlas\))?( \(re-reading[^)]*\))? \|", line
    )
    if m:
      out[int(m.group(1))] = m.group(4)
  return out


def test_every_claim_has_one_record():
  assert [r["claim"] for r in _records()] == list(CLAIM_NAMES)


def test_the_report_and_the_readme_are_written_from_the_records(tmp_path):
  records = _records()
  committed = (REPORTS / "REPRODUCTION.md").read_text(encoding="utf-8")
  first = committed.splitlines()[2]  # "Produced by `<command>`. ..."
  command = re.match(r"Produced by `([^`]*)`", first).group(1)
  baseline = reproduce.load_baseline(str(REPORTS))
  fresh = reproduction.write_reproduction(
      records, str(tmp_path / "R.md"), figure_dir="reproduction", command=command, baseline=baseline
  )
  assert pathlib.Path(fresh).read_text(encoding="utf-8") == committed
  atlas = reproduction.write_atlas(records, str(tmp_path / "A.md"), command=command)
  assert pathlib.Path(atlas).read_text(encoding="utf-8") == (REPORTS / "ATLAS.md").read_text(encoding="utf-8")
  readme = (REPO / "README.md").read_text(encoding="utf-8")
  block = readme[
      readme.index(reproduction.README_BEGIN) + len(reproduction.README_BEGIN) : readme.index(reproduction.README_END)
  ]
  assert block.strip() == reproduction.readme_table(records)
  if baseline:  # the README's baseline lines are the record's too
    block = readme[
        readme.index(reproduction.BASELINE_BEGIN)
        + len(reproduction.BASELINE_BEGIN) : readme.index(reproduction.BASELINE_END)
    ]
    assert block.strip() == reproduction.baseline_readme(baseline)


def test_verdicts_agree_across_the_files():
  records = {r["number"]: r for r in _records()}
  expected = {n: r["verdict"] for n, r in records.items()}
  assert _table_verdicts((REPORTS / "REPRODUCTION.md").read_text(encoding="utf-8")) == expected
  readme = (REPO / "README.md").read_text(encoding="utf-8")
  assert (
      _table_verdicts(readme[readme.index(reproduction.README_BEGIN) : readme.index(reproduction.README_END)])
      == expected
  )
  atlas = _table_verdicts((REPORTS / "ATLAS.md").read_text(encoding="utf-8"))
  assert atlas == {n: v for n, v in expected.items() if records[n]["claim"] in reproduction.ATLAS_STUDIES}
  for r in records.values():  # each record's figures are its own copies, beside it
    folder = REPORTS / "reproduction" / r["claim"]
    if r.get("pending"):  # no record: no verdict anywhere, at most the records of its runs so far
      assert r["verdict"] == reproduce.NOT_RUN and set(os.listdir(folder) if folder.exists() else []) <= {
          reproduce.RECORDS_DIR
      }
      continue
    assert not r.get("decided_from"), r["claim"]  # every record was decided from its own runs
    # beside them only the records of a rerun still under way (experiments/reproduce.py RECORDS_DIR)
    listed = set(os.listdir(folder)) - {reproduce.RECORDS_DIR}
    assert sorted(listed) == sorted(["claim.json", *r["figures"]])


def test_no_committed_result_records_a_dirty_tree():
  dirty = []
  for r in _records():
    for key in ("provenance", "redecided_by"):
      p = r.get(key)
      if p and p.get("git_dirty"):
        dirty.append(f"{r['claim']} {key} {p.get('git_commit')}")
      if key != "provenance" and p:
        assert p.get("git_dirty") is False, f"{r['claim']}: {key} a dirty tree"
  assert not dirty, dirty
  for record in (REPORTS / "reproduction").glob(f"*/{reproduce.RECORDS_DIR}/cells/*/seed_*/sweep_record.json"):
    assert json.loads(record.read_text(encoding="utf-8"))["provenance"]["git_dirty"] is False, record  # runs too
  baseline = REPORTS / "baseline" / "result.json"
  if baseline.exists():
    assert json.loads(baseline.read_text(encoding="utf-8"))["provenance"]["git_dirty"] is False


SHA = re.compile(r"^[0-9a-f]{40}(\+dirty)?$")
MACHINE_PATH = re.compile(r"(?<![\w.~<])/(work|home|tmp|root|Users|mnt|scratch|var|opt)/")


def test_every_record_names_the_commit_its_runs_trained_at_beside_the_one_that_decided():
  """claim.json's `provenance` is the deciding process's; `trained_at` lists the commits (and machines) of its runs,
  or says 'unrecorded' where no run record survived to tell (the record's `from` says which)."""
  for r in _records():
    if r.get("pending"):
      continue
    assert SHA.match(r["provenance"]["git_commit"]), r["claim"]
    t = r.get("trained_at")
    assert t and t["git_commits"] and t["machines"] and t.get("from", "runs"), r["claim"]
    assert all(SHA.match(c) or c == "unrecorded" for c in t["git_commits"]), (r["claim"], t)


def test_no_report_holds_a_machine_path():
  found = []
  for path in [*REPORTS.glob("*.md"), *REPORTS.glob("*/*.json"), *REPORTS.glob("reproduction/*/claim.json")]:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
      if MACHINE_PATH.search(line):
        found.append(f"{path.relative_to(REPO)}:{i}: {line.strip()[:120]}")
  assert not found, found


def test_the_provenance_names_the_cpu_and_xla_flags(monkeypatch):
  from experiments import provenance  # noqa: PLC0415

  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
  p = provenance.provenance()
  assert p["xla_flags"] == "--xla_cpu_max_isa=AVX2" and p["cpu"]["model"] and isinstance(p["cpu"]["isa"], list)
  t = provenance.trained_at([dict(p, git_dirty=False), dict(p, git_dirty=True), None])
  assert t["git_commits"] == sorted({p["git_commit"], p["git_commit"] + "+dirty", "unrecorded"})
  assert any("XLA_FLAGS=--xla_cpu_max_isa=AVX2" in m for m in t["machines"]) and "unrecorded" in t["machines"]


def test_atlas_states_the_answer_of_the_study_that_decides_it():
  """ATLAS.md opens with the atlas's answer in one sentence: the deciding study's verdict and reason, or that its
  runs are under way, as its record says."""
  record = next(r for r in _records() if r["claim"] == reproduction.ANSWER)
  text = (REPORTS / "ATLAS.md").read_text(encoding="utf-8")
  line = next(x for x in text.splitlines() if x.startswith("**The answer**"))
  said = "not decided yet" if record.get("pending") else f"{record['verdict']}. {record['reason']}"
  assert said in line


def test_a_claim_with_a_design_log_section_links_it(tmp_path):
  """The report links a claim's section of the design log (`<a id="<claim>">`) from that claim's section only."""
  log = tmp_path / "design_log.md"
  log.write_text(
      '# Design log\n\n<a id="warmup"></a>\n## Claim 6, warmup\n\nChanged after the runs.\n', encoding="utf-8"
  )
  records = [
      {"claim": "warmup", "number": 6, "verdict": "reproduced"},
      {"claim": "tfixup", "number": 8, "verdict": "x"},
  ]
  path = reproduction.write_reproduction(
      records, str(tmp_path / "R.md"), figure_dir="f", command="c", design_log=str(log)
  )
  text = pathlib.Path(path).read_text(encoding="utf-8")
  warmup, tfixup = text[text.index("\n## warmup\n") : text.index("\n## tfixup\n")], text[text.index("\n## tfixup\n") :]
  assert "- Design log (calibrations, changes made after the data): [docs/design_log.md#warmup]" in warmup
  assert "(../docs/design_log.md#warmup)" in warmup and "design_log.md#" not in tfixup
  assert reproduction.design_log_sections(str(tmp_path / "absent.md")) == set()


def test_every_claim_has_a_design_log_section_and_the_report_links_it():
  """Each registered claim's after-data history has a home, and a reader of REPRODUCTION.md is sent to it (the
  anchors resolve: tests/test_readme.py checks every relative link of the reports)."""
  assert set(CLAIM_NAMES) <= reproduction.design_log_sections()
  committed = (REPORTS / "REPRODUCTION.md").read_text(encoding="utf-8")
  for name in CLAIM_NAMES:
    section = committed[committed.index(f"\n## {name}\n") :][:2000]
    assert f"]({reproduction.DESIGN_LOG_LINK}#{name})" in section, name
