"""Every file that states a result states the same one: claim.json (the record), REPRODUCTION.md, ATLAS.md (the
atlas's studies) and the README's table, checked on the committed reports; a registered study without a record is
stated as not run yet in each of them, and nowhere given a verdict."""

import json
import os
import pathlib
import re

from experiments.claims import report, reproduce
from experiments.claims.registry import CLAIM_NAMES

REPO = pathlib.Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
# Results whose runs were measured on a dirty tree and not rerun yet, with the reason; the test fails for any other.
# The atlas's driver rewrote reports/ATLAS.md in the repository after every cell, so its own output made the tree
# dirty from the first cell on (experiments/provenance.py now leaves reports/ out of the check); rerunning it takes
# ~4.6 hours of 2 cores (configs/atlas.py's calibration), more than a session.


def _records() -> list[dict]:
  return reproduce.collect(str(REPORTS))


def _table_verdicts(text: str) -> dict[int, str]:
  """'| n | [claim](...) | verdict ...' rows → {n: verdict without markup}."""
  out = {}
  for line in text.splitlines():
    m = re.match(r"\| (\d+) \| \[?(\w+)\]?[^|]* \| (\*\*)?([a-z ]+?)(\*\*)?( \(atlas\))? \|", line)
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
  fresh = report.write_reproduction(
      records, str(tmp_path / "R.md"), figure_dir="reproduction", command=command, baseline=baseline
  )
  assert pathlib.Path(fresh).read_text(encoding="utf-8") == committed
  atlas = report.write_atlas(records, str(tmp_path / "A.md"), command=command)
  assert pathlib.Path(atlas).read_text(encoding="utf-8") == (REPORTS / "ATLAS.md").read_text(encoding="utf-8")
  readme = (REPO / "README.md").read_text(encoding="utf-8")
  block = readme[readme.index(report.README_BEGIN) + len(report.README_BEGIN) : readme.index(report.README_END)]
  assert block.strip() == report.readme_table(records)
  if baseline:  # the README's baseline lines are the record's too
    block = readme[readme.index(report.BASELINE_BEGIN) + len(report.BASELINE_BEGIN) : readme.index(report.BASELINE_END)]
    assert block.strip() == report.baseline_readme(baseline)


def test_verdicts_agree_across_the_files():
  records = {r["number"]: r for r in _records()}
  expected = {n: r["verdict"] for n, r in records.items()}
  assert _table_verdicts((REPORTS / "REPRODUCTION.md").read_text(encoding="utf-8")) == expected
  readme = (REPO / "README.md").read_text(encoding="utf-8")
  assert _table_verdicts(readme[readme.index(report.README_BEGIN) : readme.index(report.README_END)]) == expected
  atlas = _table_verdicts((REPORTS / "ATLAS.md").read_text(encoding="utf-8"))
  assert atlas == {n: v for n, v in expected.items() if records[n]["claim"] in report.ATLAS_STUDIES}
  for r in records.values():  # each record's figures are its own copies, beside it
    folder = REPORTS / "reproduction" / r["claim"]
    if r.get("pending"):  # no record: no verdict anywhere, at most the records of its runs so far
      assert r["verdict"] == reproduce.NOT_RUN and set(os.listdir(folder) if folder.exists() else []) <= {
          reproduce.RECORDS_DIR
      }
      continue
    assert not r.get("decided_from"), r["claim"]  # every record was decided from its own runs
    # beside them only the records of a rerun still under way (experiments/claims/reproduce.py RECORDS_DIR)
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
