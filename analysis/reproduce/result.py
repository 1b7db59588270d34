"""The result of one claim's run: verdict vocabulary, threshold bookkeeping and `result.json`.

Contract: a claim module returns an `Outcome` (measured numbers, the thresholds it applied, verdict, reason, figure
file names); `finish` adds the claim's identity (statement, source, paper scale), the scale used and the wall time,
writes `<workdir>/result.json` (strict JSON: non-finite floats become null) and returns the dict. Verdicts are
decided by code in the claim modules, never by hand: every threshold a verdict used is recorded in `thresholds`
as a sentence, so the report states it next to the numbers.
"""

import dataclasses
import json
import math
import os
from typing import Any

import numpy as np

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclasses.dataclass
class Outcome:
  """What a claim's run measured and concluded.

  Attributes:
    measured: every number the verdict used (and the raw per-layer / per-seed values behind them).
    summary: the few headline numbers shown in the report's table, name -> value.
    thresholds: name -> the rule as a sentence, e.g. "|std/0.8796σ − 1| ≤ 0.01".
    verdict: one of VERDICTS.
    reason: why, in one or two sentences with the deciding numbers.
    figures: PNG file names (relative to the workdir).
    scale_used: the sizes actually run, in words (stated next to the paper's).
  """

  measured: dict
  summary: dict
  thresholds: dict
  verdict: str
  reason: str
  figures: list
  scale_used: str

  def __post_init__(self):
    if self.verdict not in VERDICTS:
      raise ValueError(f"verdict={self.verdict!r} is not one of {list(VERDICTS)}")


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
  if hasattr(x, "shape") and hasattr(x, "dtype"):  # jax.Array
    return jsonable(np.asarray(x))
  if isinstance(x, float):
    return x if math.isfinite(x) else None
  return x


def finish(claim: Any, scale: str, outcome: Outcome, workdir: str, seconds: float) -> dict:
  """Writes `<workdir>/result.json` for `claim` (a registry `Claim`) and returns the dict."""
  result = dict(
      claim=claim.name,
      number=claim.number,
      statement=claim.statement,
      source=claim.source,
      paper_scale=claim.paper_scale,
      scale=scale,
      scale_used=outcome.scale_used,
      verdict=outcome.verdict,
      reason=outcome.reason,
      thresholds=outcome.thresholds,
      summary=outcome.summary,
      measured=outcome.measured,
      figures=list(outcome.figures),
      seconds=round(float(seconds), 1),
  )
  result = jsonable(result)
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "result.json"), "w") as f:
    json.dump(result, f, indent=1)
  return result
