"""The study contract: what every claim is made of, and the results every study (claims and the atlas) reads.

A study is a sweep config (`configs/claims/<name>.py`: the base config, the grid with its named arms, the seeds,
what to analyze, and the sizes of each scale `tiny`/`cpu`/`paper`) run by the sweep layer (experiments/sweep.py),
plus three functions of its results, kept apart so each can be tested alone (`Study`; experiments/run.py runs
one and writes its record, claim.json; experiments/reproduction.py writes every record's section):
  measure(results) -> dict     pure: the numbers the verdict uses, from the sweep's records and each run's files
                               (metrics.jsonl, analysis/step_<k>/*.json); JSON-able.
  verdict(measured) -> Verdict pure: REPRODUCED / NOT_REPRODUCED / INCONCLUSIVE and the reason with the deciding
                               numbers, by the thresholds in `Study.thresholds` (stated in the claim module's docstring
                               before any run, later changes in docs/design_log.md; tested on synthetic numbers for
                               every branch; its rules folded by `decide`).
  figure(measured, results, out_dir, title) -> [file names]   draws every quantity the verdict uses.

`Results` is a sweep read back from its results.jsonl (grid order; no file: no runs), grouped by cell, each `Run`
with its arm (its grid product's label), params, seed, outcome, class and final metrics, able to read its own
metrics, analysis and other files; the atlas's parts are read through the same `Results`
(study 11, experiments/claims/edge.py, and the claims on the atlas's cells). A run that crashed is not a measurement:
`crashed(runs)` lists them and the claims' verdicts say INCONCLUSIVE naming it (`@crashed_first` on a verdict; a
diverged run is a measurement: it failed to train).
"""

import dataclasses
import functools
import json
import math
import os
from typing import Any, Callable, Optional

import numpy as np
from etils import epath

from experiments import report
from train import metrics as metrics_lib

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclasses.dataclass(frozen=True)
class Verdict:
  verdict: str
  reason: str

  def __post_init__(self):
    if self.verdict not in VERDICTS:
      raise ValueError(f"verdict={self.verdict!r} is not one of {list(VERDICTS)}")


@dataclasses.dataclass(frozen=True)
class Study:
  """A study (a claim of a paper): its identity, the thresholds of its verdict (name -> rule as a sentence) and its
  three functions."""

  name: str
  number: int
  statement: str
  source: str
  paper_scale: str
  thresholds: dict[str, str]
  measure: Callable[["Results"], dict]
  verdict: Callable[[dict], Verdict]
  figure: Callable[[dict, "Results", str, str], list[str]]
  summary: Callable[[dict], dict] = lambda measured: {}  # headline numbers (name -> value) for the report's table
  headline: tuple[str, ...] = ()  # the summary's keys the README's table shows (none: its first)
  # The report's further tables, below the headline numbers (REPRODUCTION.md only: the README's table keeps the
  # summary): [{"title": str, "header": [column names], "rows": [[cells]]}], e.g. every predictor's scores.
  tables: Callable[[dict], list] = lambda measured: []
  # An adaptive grid: `extend(results)` -> {product label: {key: values}}, the next round's products (each labelled
  # product of the grid that sets those keys, with those values instead); {} when the grid is complete. The runner
  # (experiments/run.py) runs up to `max_rounds` rounds; the same results give the same rounds, so a rerun
  # resumes them.
  extend: Optional[Callable[["Results"], dict]] = None
  max_rounds: int = 0
  # `figure` draws from `measured` alone (results=None): a re-decision from the record redraws the figures too.
  figures_from_record: bool = False


@dataclasses.dataclass(frozen=True)
class Run:
  """One (cell, seed) of a finished sweep: its record (results.jsonl) and its folder."""

  record: dict
  path: str  # absolute

  @property
  def cell(self) -> str:
    return self.record["cell"]

  @property
  def params(self) -> dict:
    return self.record["params"]

  @property
  def arm(self) -> str:
    """The label of the run's grid product (experiments/grid.py; '' when unnamed)."""
    return self.record.get("arm", "")

  @property
  def seed(self) -> int:
    return self.record["seed"]

  @property
  def outcome(self) -> str:
    return self.record["outcome"]

  @property
  def final(self) -> dict:
    return self.record["final"]

  def metrics(self, split: Optional[str] = None) -> list[dict]:
    return metrics_lib.read_metrics(self.path, split=split)

  def analysis(self, name: str, step: int = 0, *, required: bool = True) -> Optional[Any]:
    """`analysis/step_<step>/<name>.json` of this run (e.g. 'signal', 'eigenvalues', 'grad_norms'); a missing file
    raises, or is None with `required=False`."""
    found = self.json(os.path.join("analysis", f"step_{step}", f"{name}.json"))
    if found is None and required:
      raise FileNotFoundError(f"{self.path}: run {self.cell}, seed {self.seed} has no {name} analysis at step {step}")
    return found

  def json(self, name: str) -> Optional[Any]:
    """The JSON file `name` (relative to the run's folder), None if the run has none."""
    path = epath.Path(self.path) / name
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

  def config(self) -> dict:
    return json.loads((epath.Path(self.path) / "config.json").read_text(encoding="utf-8"))


class Results:
  """A sweep read back: `runs` in grid order, `cells()` grouping them, `select(params)` filtering by swept values."""

  def __init__(self, workdir: str, records: list[dict], config: Any = None, settings: str = ""):
    self.workdir = workdir
    self.config = config
    self.settings = settings  # the sweep's fixed settings in words (figure titles)
    self.runs = [Run(r, report.run_path(workdir, r["workdir"])) for r in records]

  @classmethod
  def load(cls, workdir: str, config: Any = None) -> "Results":
    """The sweep in `workdir` as its results.jsonl records it (no run yet, or no such folder: no runs)."""
    path = epath.Path(workdir) / "results.jsonl"
    if not path.exists():
      return cls(workdir, [], config)
    return cls(
        workdir, [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()], config
    )

  def cells(self) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for run in self.runs:
      out.setdefault(run.cell, []).append(run)
    return out

  def select(self, params: dict) -> list[Run]:
    """The runs whose swept values include `params` (dotted key -> value)."""
    return [r for r in self.runs if all(r.params.get(k) == v for k, v in params.items())]


def crashed(runs: list[Run]) -> list[str]:
  """'<cell> seed <s>: <error>' for every run that crashed (no measurement)."""
  return [f"{r.cell} seed {r.seed}: {r.record.get('error')}" for r in runs if r.outcome == "crashed"]


def crashed_verdict(measured: dict) -> Optional[Verdict]:
  """INCONCLUSIVE naming the crashed runs recorded in `measured['crashed']`, or None when none crashed."""
  bad = measured.get("crashed") or []
  if bad:
    return Verdict(INCONCLUSIVE, f"{len(bad)} run(s) crashed, so the comparison is incomplete: " + "; ".join(bad))
  return None


def crashed_first(verdict: Callable[[dict], Verdict]) -> Callable[[dict], Verdict]:
  """`verdict`, answering `crashed_verdict(measured)` instead while a run crashed (a claim's verdict decorator)."""

  @functools.wraps(verdict)
  def decide(measured: dict) -> Verdict:
    return crashed_verdict(measured) or verdict(measured)

  return decide


def decide(
    rules: dict[str, Any],
    reason: str,
    *,
    failing: Optional[str] = "failing",
    undetermined: Optional[Callable[[list[str]], str]] = None,
) -> Verdict:
  """The verdict of a claim's rules (name -> False or NOT_REPRODUCED: fails; None or INCONCLUSIVE: undetermined, as
  `stats.reading` or a part's own verdict says; anything else holds), `reason` stating the deciding numbers:
  NOT_REPRODUCED when a rule fails (`reason` + '; <failing>: [their names]'; `failing=None`: `reason` alone), else
  INCONCLUSIVE when one is undetermined (`reason` + '; ' + `undetermined(their names)`, what would decide them;
  `reason` alone without it), else REPRODUCED. The one fold of the claims' verdicts: a rule holds only when its whole
  interval does."""
  failed = [k for k, v in rules.items() if v is False or (isinstance(v, str) and v == NOT_REPRODUCED)]
  if failed:
    return Verdict(NOT_REPRODUCED, f"{reason}; {failing}: {failed}" if failing else reason)
  open_ = [k for k, v in rules.items() if v is None or (isinstance(v, str) and v == INCONCLUSIVE)]
  if open_:
    return Verdict(INCONCLUSIVE, f"{reason}; {undetermined(open_)}" if undetermined else reason)
  return Verdict(REPRODUCED, reason)


def mean_std(values) -> tuple[Optional[float], Optional[float]]:
  """(mean, sample std) of the finite values; (None, None) if none, std None for one value."""
  v = np.asarray([x for x in values if x is not None and math.isfinite(x)], np.float64)
  if not len(v):
    return None, None
  return float(v.mean()), (float(v.std(ddof=1)) if len(v) > 1 else None)


def jsonable(x: Any) -> Any:
  """Arrays -> lists, numpy scalars -> Python, non-finite floats -> None (strict JSON)."""
  if isinstance(x, dict):
    return {str(k): jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [jsonable(v) for v in x]
  if isinstance(x, np.ndarray):
    return jsonable(x.tolist())
  if isinstance(x, np.generic):
    return jsonable(x.item())
  if isinstance(x, float):
    return x if math.isfinite(x) else None
  return x
