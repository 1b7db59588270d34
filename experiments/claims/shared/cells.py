"""How the training claims read a cell (arm, lr) by its seeds' outcome classes (analysis/outcomes.py), shared by
claim 6 (warmup.py) and the claims on the atlas's cells (8 tfixup, 9 bert_vs_xavier, 10 deep_no_warmup: training.py).

A cell *fails* when at least half its seeds collapsed or diverged, *trains* when more than half trained (a fraction,
not "every seed alike": a boundary cell may land either side on another CPU), else it is `MIXED`; a cell a rule
decides on needs `MIN_SEEDS` seeds. `MARKERS`: the outcome class's marker in the claims' figures.
"""

from typing import Optional

from analysis import outcomes

MIN_SEEDS = 3
FAILED = (outcomes.COLLAPSED, outcomes.DIVERGED)
MIXED = "mixed"
Cells = dict[float, tuple[str, int]]  # lr -> (the cell's class or 'mixed', its seeds)
MARKERS = {outcomes.TRAINED: "o", outcomes.COLLAPSED: "s", outcomes.UNDERTRAINED: "^", outcomes.DIVERGED: "x"}


def cell_class(classes: list[Optional[str]]) -> str:
  """The cell's reading by fractions (module docstring): its commonest failing class when at least half its seeds
  collapsed or diverged, 'trained' when more than half trained, else 'mixed' (a run without a class counts as
  neither)."""
  n = len(classes)
  failed = [c for c in classes if c in FAILED]
  if n and 2 * len(failed) >= n:
    return max(FAILED, key=failed.count)
  if n and 2 * sum(c == outcomes.TRAINED for c in classes) > n:
    return outcomes.TRAINED
  return MIXED
