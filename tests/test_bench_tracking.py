"""bench/tracking_products.py: the products per warm record are read from the rows that carry a curvature record, the
first (cold) one apart, and the committed record (reports/curvax_models/tracking.json) agrees with its own rows."""

import json
import pathlib

import numpy as np
import pytest

from analysis import tracking
from bench import tracking_products

RECORD = pathlib.Path(__file__).resolve().parents[1] / "reports" / "curvax_models" / "tracking.json"


def test_reads_only_curvature_rows_in_step_order(tmp_path):
  rows = [
      {"step": 20, "curvature/lanczos_steps": 4, "curvature/lambda_max": 10.0, "curvature/lambda_max_bound": 0.05},
      {"step": 5, "loss": 3.0},
      {"step": 10, "curvature/lanczos_steps": 30, "curvature/lambda_max": 8.0, "curvature/lambda_max_bound": 0.08},
      {"step": 30, "curvature/lanczos_steps": 6, "curvature/lambda_max": -12.0, "curvature/lambda_max_bound": 0.2},
      {"step": 40, "curvature/lanczos_steps": 9, "curvature/lambda_max": 11.0, "curvature/lambda_max_bound": 0.1},
  ]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  got = tracking_products.summarize(tracking_products._records(str(tmp_path)), tol=0.01)
  assert got["cold_products"] == 30  # step 10's record, not the first row written
  assert got["warm_products"] == [4, 6, 9]
  assert (got["warm_median"], got["warm_max"], got["records"]) == (6.0, 9, 4)
  assert got["bound_met"] == "3/4"  # 0.2 > 0.01·|−12|


def test_metric_names_are_the_trackers():
  """The bench reads the names analysis/tracking.py writes; a rename there must fail here."""
  assert "curvature/lanczos_steps" in tracking.WARM_NAMES
  assert {"curvature/lambda_max", "curvature/lambda_max_bound"} <= set(tracking.NAMES)


@pytest.mark.skipif(not RECORD.exists(), reason="no committed tracking record")
def test_committed_record_is_consistent():
  record = json.loads(RECORD.read_text())
  assert record["results"]
  for row in record["results"]:
    warm = row["warm_products"]
    assert row["records"] == len(warm) + 1
    assert row["warm_median"] == float(np.median(warm)) and row["warm_max"] == max(warm)
    met, total = map(int, row["bound_met"].split("/"))
    assert met == total == row["records"]
