"""Claims 6, 8, 9 and 10 of the reproduction report decided from the atlas's learning-rate × warmup sweeps.

The claims' own runs (configs/claims/) train each method at one peak lr for 300 steps, which cannot say where
training breaks as the lr grows, the papers' statement (issue 15). Here the same claims are decided from the atlas's
grid of peak lrs and both warmups, with the atlas's stability rule (experiments/atlas/measures.py: a run is stable
unless it diverges or ends more than `LOSS_MARGIN` = 1 nat above the atlas's best; a cell (method, warmup, lr) is
stable if all its seeds are). The rules, stated before the atlas's training sweep ran (2026-11-24, when no training
run existed) and not to be changed after seeing its data without saying so in the report:

  δ = `DELTA` = 0.1 nats, the claims' resolution of a loss difference (configs/claims/_training.py); "best" is the
  lowest mean final validation loss of a (method, warmup) over the lr grid (no finished run: +∞).

  6 warmup (Xiong et al. 2020, Fig. 2: Post-LN needs warmup, Pre-LN does not). Arms Post-LN + Xavier without and
    with warmup, Pre-LN without. *Rescued lrs*: the lrs at which Post-LN without warmup is unstable and Post-LN with
    warmup is stable. Reproduced iff warmup helps Post-LN (a rescued lr exists, or best without − best with ≥ δ)
    and Pre-LN without warmup is stable at every rescued lr and its best is ≤ Post-LN-with-warmup's best + δ; not
    reproduced otherwise.
  8 tfixup (Huang et al. 2020: without LayerNorm and without warmup T-Fixup trains where Post-LN without warmup
    fails). Arms T-Fixup and Post-LN + Xavier, both without warmup. Reproduced iff at some lr Post-LN is unstable and
    T-Fixup stable, and T-Fixup's best ≤ Post-LN's best + δ; not reproduced otherwise.
  9 bert_vs_xavier, its training half (Su 2021b: in a Post-LN model BERT's N(0, 0.02) trains better than Xavier
    without long warmup; the identity-path half is the claim's at-init measurement). Arms Post-LN + BERT 0.02 and
    Post-LN + Xavier, without warmup. Reproduced iff BERT's best ≤ Xavier's best − δ; not reproduced iff BERT's
    best ≥ Xavier's best + δ; inconclusive within δ (the claim's own rule).
  10 deep_no_warmup (ReZero, Bachlechner et al. 2020; scheduled α, Su 2021a §6; DeepNorm, Wang et al. 2022; Admin,
    Liu et al. 2020: each trains without warmup). Arms the four methods and Pre-LN, without warmup. A method trains
    iff its best ≤ Pre-LN's best + `DEEP_MARGIN` = 0.3 nats (the claim's own margin). Reproduced iff all four train;
    not reproduced iff one does not.

Every claim is inconclusive while one of its arms is incomplete (a learning rate with fewer finished or diverged
seeds than the atlas's `sweep.seeds`) or has a crashed run, and when a reference has no finished run where the rule
needs its loss. `decide(measured, seeds)` takes `experiments.atlas.collect.measure`'s dict (or atlas.json's, whose
warmup keys are strings) and returns one record per claim: claim, number, verdict, reason, numbers, rules.
"""

import math
from typing import Any, Optional

DELTA = 0.1  # nats: the claims' resolution of a loss difference
DEEP_MARGIN = 0.3  # nats above Pre-LN's best: claim 10's "trains"
POST, PRE, BERT, TFIXUP = "Post-LN + Xavier", "Pre-LN", "Post-LN + BERT 0.02", "T-Fixup"
DEEP = ("ReZero", "scheduled α", "DeepNorm", "Admin")
RULES = {
    "warmup": [
        f"rescued lrs: Post-LN + Xavier unstable without warmup and stable with it; δ = {DELTA} nats",
        "reproduced: warmup helps Post-LN (a rescued lr, or best without − best with ≥ δ), and Pre-LN without warmup "
        "is stable at every rescued lr with best ≤ Post-LN-with-warmup's best + δ",
        "not reproduced: otherwise; inconclusive: an arm incomplete or crashed",
    ],
    "tfixup": [
        f"both without warmup; δ = {DELTA} nats",
        "reproduced: at some lr Post-LN + Xavier is unstable and T-Fixup stable, and T-Fixup's best ≤ Post-LN's + δ",
        "not reproduced: otherwise; inconclusive: an arm incomplete or crashed",
    ],
    "bert_vs_xavier": [
        f"Post-LN, without warmup; δ = {DELTA} nats; the identity half is the claim's at-init measurement",
        "reproduced: BERT's best ≤ Xavier's best − δ; not reproduced: BERT's best ≥ Xavier's best + δ",
        "inconclusive: within δ, or an arm incomplete or crashed",
    ],
    "deep_no_warmup": [
        f"without warmup; a method trains iff its best ≤ Pre-LN's best + {DEEP_MARGIN} nats",
        f"reproduced: {', '.join(DEEP)} all train; not reproduced: one does not",
        "inconclusive: an arm incomplete or crashed, or Pre-LN has no finished run",
    ],
}
NUMBERS = {"warmup": 6, "tfixup": 8, "bert_vs_xavier": 9, "deep_no_warmup": 10}


def _arm(measured: dict, method: str, warm: bool) -> Optional[dict]:
  """The (method, warmup) row of `measured`: warmup 0 (warm=False) or the atlas's non-zero warmup."""
  runs = {int(k): v for k, v in measured["methods"].get(method, {}).get("runs", {}).items()}
  keys = [k for k in sorted(runs) if (k > 0) == warm]
  return runs[keys[0]] if keys else None


def _problem(name: str, arm: Optional[dict], seeds: int) -> Optional[str]:
  """Why an arm cannot be used yet (None: complete)."""
  if arm is None:
    return f"{name}: no run yet"
  if any("crashed" in o for o in arm["outcomes"]):
    return f"{name}: a run crashed"
  short = [lr for lr, o in zip(arm["lrs"], arm["outcomes"]) if len(o) < seeds]
  if short:
    return f"{name}: lr {', '.join(format(lr, 'g') for lr in short)} incomplete"
  return None


def _best(arm: dict) -> float:
  return arm["best"] if arm.get("best") is not None and math.isfinite(arm["best"]) else math.inf


def _stable(arm: dict) -> dict[float, Optional[bool]]:
  return dict(zip(arm["lrs"], arm["stable"]))


def _lrs(lrs) -> str:
  return "{" + ", ".join(format(lr, "g") for lr in sorted(lrs)) + "}"


def _fmt(x: float) -> str:
  return "∞ (no finished run)" if not math.isfinite(x) else f"{x:.3f}"


def _record(name: str, verdict: str, reason: str, numbers: dict) -> dict:
  return dict(claim=name, number=NUMBERS[name], verdict=verdict, reason=reason, numbers=numbers, rules=RULES[name])


def _incomplete(name: str, problems: list[Optional[str]]) -> Optional[dict]:
  bad = [p for p in problems if p]
  return _record(name, "inconclusive", "atlas incomplete: " + "; ".join(bad), {}) if bad else None


def _no_warmup_arms(name: str, measured: dict, seeds: int, *methods: str) -> tuple[list, Optional[dict]]:
  """The methods' no-warmup arms and the claim's inconclusive record if one of them is incomplete (else None)."""
  arms = [_arm(measured, m, False) for m in methods]
  return arms, _incomplete(name, [_problem(f"{m}, no warmup", a, seeds) for m, a in zip(methods, arms)])


def warmup(measured: dict, seeds: int) -> dict:
  """Claim 6 (module docstring)."""
  post0, postw, pre0 = _arm(measured, POST, False), _arm(measured, POST, True), _arm(measured, PRE, False)
  problems = [
      _problem(f"{POST}, no warmup", post0, seeds),
      _problem(f"{POST}, warmup", postw, seeds),
      _problem(f"{PRE}, no warmup", pre0, seeds),
  ]
  early = _incomplete("warmup", problems)
  if early:
    return early
  s0, sw, sp = _stable(post0), _stable(postw), _stable(pre0)
  rescued = [lr for lr in s0 if s0[lr] is False and sw.get(lr) is True]
  gain = _best(post0) - _best(postw) if math.isfinite(_best(postw)) else -math.inf
  helps = bool(rescued) or gain >= DELTA
  pre_where = [lr for lr in rescued if sp.get(lr) is not True]
  pre_ok = not pre_where and _best(pre0) <= _best(postw) + DELTA
  numbers = {
      "Post-LN best, no warmup": _best(post0),
      "Post-LN best, warmup": _best(postw),
      "Pre-LN best, no warmup": _best(pre0),
      "rescued lrs": sorted(rescued),
  }
  reason = (
      f"best final validation loss over the lr grid: Post-LN without warmup {_fmt(_best(post0))}, with warmup "
      f"{_fmt(_best(postw))}, Pre-LN without warmup {_fmt(_best(pre0))}; warmup rescues Post-LN at lr "
      f"{_lrs(rescued) if rescued else 'none'}; "
      + (
          f"Pre-LN without warmup unstable at {_lrs(pre_where)}"
          if pre_where
          else "Pre-LN without warmup stable at every rescued lr"
      )
  )
  return _record("warmup", "reproduced" if helps and pre_ok else "not reproduced", reason, numbers)


def tfixup(measured: dict, seeds: int) -> dict:
  """Claim 8 (module docstring)."""
  (tf0, post0), early = _no_warmup_arms("tfixup", measured, seeds, TFIXUP, POST)
  if early:
    return early
  st, sp = _stable(tf0), _stable(post0)
  where = [lr for lr in sp if sp[lr] is False and st.get(lr) is True]
  ok = bool(where) and _best(tf0) <= _best(post0) + DELTA
  reason = (
      f"without warmup, best final validation loss: T-Fixup {_fmt(_best(tf0))}, Post-LN {_fmt(_best(post0))}; "
      f"T-Fixup stable where Post-LN is not at lr {_lrs(where) if where else 'none'}"
  )
  numbers = {"T-Fixup best": _best(tf0), "Post-LN best": _best(post0), "lrs T-Fixup only": sorted(where)}
  return _record("tfixup", "reproduced" if ok else "not reproduced", reason, numbers)


def bert_vs_xavier(measured: dict, seeds: int) -> dict:
  """Claim 9's training half (module docstring)."""
  (bert0, post0), early = _no_warmup_arms("bert_vs_xavier", measured, seeds, BERT, POST)
  if early:
    return early
  b, x = _best(bert0), _best(post0)
  if not math.isfinite(b) and not math.isfinite(x):
    verdict = "inconclusive"
  elif b <= x - DELTA:
    verdict = "reproduced"
  elif b >= x + DELTA:
    verdict = "not reproduced"
  else:
    verdict = "inconclusive"
  diff = x - b if math.isfinite(x) and math.isfinite(b) else None
  reason = f"without warmup, best final validation loss over the lr grid: BERT 0.02 {_fmt(b)}, Xavier {_fmt(x)}" + (
      f"; Xavier − BERT = {diff:+.3f} nats (δ = {DELTA})" if diff is not None else ""
  )
  return _record("bert_vs_xavier", verdict, reason, {"BERT best": b, "Xavier best": x})


def deep_no_warmup(measured: dict, seeds: int) -> dict:
  """Claim 10 (module docstring)."""
  found, early = _no_warmup_arms("deep_no_warmup", measured, seeds, *DEEP, PRE)
  if early:
    return early
  arms = dict(zip((*DEEP, PRE), found))
  pre = _best(arms[PRE])
  if not math.isfinite(pre):
    return _record("deep_no_warmup", "inconclusive", "Pre-LN without warmup has no finished run", {})
  limit = pre + DEEP_MARGIN
  failed = [m for m in DEEP if not _best(arms[m]) <= limit]
  reason = (
      "without warmup, best final validation loss over the lr grid: "
      + ", ".join(f"{m} {_fmt(_best(arms[m]))}" for m in DEEP)
      + f"; Pre-LN {pre:.3f}, limit {limit:.3f}; "
      + (f"did not train: {failed}" if failed else "all train")
  )
  numbers = {f"{m} best": _best(arms[m]) for m in (*DEEP, PRE)}
  return _record("deep_no_warmup", "not reproduced" if failed else "reproduced", reason, numbers)


def decide(measured: dict, seeds: int) -> list[dict[str, Any]]:
  """The four claims' records from the atlas's measured dict, in claim order."""
  return [fn(measured, seeds) for fn in (warmup, tfixup, bert_vs_xavier, deep_no_warmup)]


def markdown(decisions: list[dict]) -> str:
  """ATLAS.md's section body: per claim its verdict, reason and rules (the REPRODUCTION.md link reads it)."""
  lines = [
      "Claims 6, 8, 9 and 10 of reports/REPRODUCTION.md are decided here, from the lr × warmup grid, by",
      "experiments/atlas/claims.py (rules stated before the training sweep ran; δ and margins in its docstring).",
      "",
      "| # | claim | verdict | reason |",
      "|---|---|---|---|",
  ]
  for d in decisions:
    lines.append(f"| {d['number']} | {d['claim']} | **{d['verdict']}** | {d['reason'].replace('|', '/')} |")
  return "\n".join(lines)
