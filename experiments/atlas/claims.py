"""Claims 6, 8, 9 and 10 of the reproduction report decided from the atlas's learning-rate × warmup grid.

Each cell (method, warmup, peak lr) is read by its runs' outcome classes (analysis/outcomes.py: diverged, collapsed,
undertrained, trained), never by a raw final loss: a run's class comes from its final validation loss, the method's
loss at init ℓ₀ and the unigram reference H (the training targets' unigram cross-entropy on the evaluated targets,
`train.data.Data.target_unigram_entropy`), both stored in atlas.json. A cell has a class when all its seeds share it
(else `mixed`); it *fails* when that class is collapsed or diverged, and *trains* when it is trained. A cell a rule
decides on needs at least `MIN_SEEDS` = 3 seeds (decision boundaries, issue 24): with fewer, the claim is
inconclusive and the reason names the cells that need another seed.

  6 warmup. Xiong et al. 2020, abstract: "for the original-designed Post-LN Transformer [...] the expected gradients
    of the parameters near the output layer are large. Therefore, using a large learning rate on those gradients
    makes the training unstable. The warm-up stage is practically helpful for avoiding this problem. [...] Pre-LN
    Transformers without the warm-up stage can reach comparable results with baselines". Tested per lr: warmup
    *rescues* Post-LN + Xavier at η when without warmup its cell fails and with warmup it trains. Reproduced iff a
    rescued η exists and Pre-LN without warmup trains at every rescued η; not reproduced iff the design could show
    it and did not: Post-LN with warmup trains at some η and Post-LN without warmup fails at some η, yet no η is
    rescued, or Pre-LN fails at every rescued η. Inconclusive otherwise (the good arm never trains: the horizon is
    too short; Post-LN without warmup never fails: the grid does not bracket its failure; a deciding cell is mixed
    or has fewer than 3 seeds).
  8 tfixup. Huang et al. 2020 (T-Fixup): without LayerNorm and without warmup, T-Fixup trains where Post-LN without
    warmup does not. Reproduced iff at some η Post-LN (no warmup) fails and T-Fixup (no warmup) trains; not
    reproduced iff Post-LN fails at some η and T-Fixup fails wherever Post-LN does; inconclusive otherwise.
  9 bert_vs_xavier, its training half. Su 2021b: in a Post-LN model BERT's N(0, 0.02) trains where Xavier needs
    warmup. The atlas's BERT arm changes the embedding setup too (unscaled embeddings, learned positions, an
    embedding LayerNorm: BERT's recipe), so it compares recipes, not the init scale: inconclusive until an ablation
    arm (Xavier with BERT's embedding setup, or BERT's 0.02 with this project's) separates the two; the cells are
    reported.
  10 deep_no_warmup. ReZero (Bachlechner et al. 2020), scheduled α (Su 2021a §6), DeepNorm (Wang et al. 2022),
    Admin (Liu et al. 2020): each trains *deep* models without warmup. The statement is about depth, so it needs at
    least two depths (6+6 and 12+12 or more); the atlas's training grid has one (6+6): inconclusive, with the
    methods' no-warmup cells at that depth reported (at every η where Pre-LN trains, does each method train?).

Rules changed on 2026-11-25 after the cpu atlas had run (issue 24; stated here with the reason): the earlier rules
called a run stable when it ended within 1 nat of the atlas's best, which Post-LN + Xavier could not reach at this
scale with or without warmup (so claim 6 could not pass), counted under-trained runs as failures, decided on 2 seeds,
compared recipes for claim 9 and one depth for claim 10.

`decide(measured, seeds, reference)` takes `experiments.atlas.collect.measure`'s dict (or atlas.json's, whose warmup
keys are strings), the atlas's seeds and the unigram reference ({"unigram_entropy": H, ...}; None: every claim that
reads classes is inconclusive), and returns one record per claim: claim, number, verdict, reason, numbers, rules.
"""

from typing import Any, Optional

from analysis import outcomes
from experiments.claims import warmup as warmup_claim

# The cell reading is claim 6's study's (experiments/claims/warmup.py): one definition of a cell's class, its failure
# classes and the seeds a deciding cell needs.
MIN_SEEDS, FAILED, MIXED, cell_class = (
    warmup_claim.MIN_SEEDS,
    warmup_claim.FAILED,
    warmup_claim.MIXED,
    warmup_claim.cell_class,
)
POST, PRE, BERT, TFIXUP = "Post-LN + Xavier", "Pre-LN", "Post-LN + BERT 0.02", "T-Fixup"
DEEP = ("ReZero", "scheduled α", "DeepNorm", "Admin")
RULES = {
    "warmup": [
        "a cell fails: all its seeds collapsed or diverged; trains: all trained (analysis/outcomes.py); a deciding "
        f"cell needs ≥ {MIN_SEEDS} seeds",
        "rescued η: Post-LN + Xavier fails without warmup and trains with it",
        "reproduced: a rescued η, and Pre-LN without warmup trains at every rescued η",
        "not reproduced: Post-LN with warmup trains somewhere and without fails somewhere, yet no η is rescued (or "
        "Pre-LN fails at every rescued η); inconclusive: otherwise",
    ],
    "tfixup": [
        f"without warmup; cells read by class as for claim 6 (≥ {MIN_SEEDS} seeds)",
        "reproduced: at some η Post-LN + Xavier fails and T-Fixup trains",
        "not reproduced: Post-LN fails somewhere and T-Fixup fails wherever it does; inconclusive: otherwise",
    ],
    "bert_vs_xavier": [
        "inconclusive while the BERT arm differs from the Xavier arm in more than the init (the embedding setup)",
    ],
    "deep_no_warmup": [
        "needs ≥ 2 depths (6+6 and ≥ 12+12); the atlas's training grid has one: inconclusive, its cells reported",
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


def run_class(loss: Optional[float], outcome: str, loss0: float, h: float) -> str:
  """One run's class from the atlas's record: its final validation loss (None: not finite) and sweep outcome."""
  if outcome == "diverged" or loss is None:
    return outcomes.DIVERGED
  return outcomes.classify_final(loss, init_loss=loss0, unigram_entropy=h).cls


def cells(measured: dict, method: str, warm: bool, h: float) -> dict[float, tuple[str, int]]:
  """lr -> (the cell's class or 'mixed', its seeds) of one (method, warmup) row."""
  row = measured["methods"][method]
  arm = _arm(measured, method, warm)
  out = {}
  for lr, losses, outs in zip(arm["lrs"], arm["losses"], arm["outcomes"]):
    out[lr] = (cell_class([run_class(l, o, row["loss0"], h) for l, o in zip(losses, outs)]), len(outs))
  return out


def _lrs(lrs) -> str:
  return "{" + ", ".join(format(lr, "g") for lr in sorted(lrs)) + "}"


def _show(c: dict[float, tuple[str, int]]) -> str:
  return ", ".join(f"{lr:g} {cls}" for lr, (cls, _) in sorted(c.items()))


def _record(name: str, verdict: str, reason: str, numbers: dict) -> dict:
  return dict(claim=name, number=NUMBERS[name], verdict=verdict, reason=reason, numbers=numbers, rules=RULES[name])


def _early(name: str, measured: dict, seeds: int, reference: Optional[dict], arms) -> Optional[dict]:
  """The claim's inconclusive record when an arm is incomplete or no unigram reference is stored (else None)."""
  bad = [_problem(f"{m}, {'warmup' if w else 'no warmup'}", _arm(measured, m, w), seeds) for m, w in arms]
  bad = [b for b in bad if b]
  if bad:
    return _record(name, "inconclusive", "atlas incomplete: " + "; ".join(bad), {})
  if not reference or reference.get("unigram_entropy") is None:
    return _record(name, "inconclusive", "no unigram reference (atlas.json `reference`) to classify runs", {})
  return None


def _few_seeds(c: dict, lrs) -> list[str]:
  return [f"{lr:g}" for lr in sorted(lrs) if c[lr][1] < MIN_SEEDS]


def warmup(measured: dict, seeds: int, reference: Optional[dict] = None) -> dict:
  """Claim 6 (module docstring): experiments/claims/warmup.py's per-lr rule on the atlas's cells."""
  early = _early("warmup", measured, seeds, reference, [(POST, False), (POST, True), (PRE, False)])
  if early:
    return early
  h = reference["unigram_entropy"]
  warm = max(int(k) for k in measured["methods"][POST]["runs"])
  verdict, reason, numbers = warmup_claim.rescue(
      cells(measured, POST, False, h), {warm: cells(measured, POST, True, h)}, cells(measured, PRE, False, h)
  )
  return _record("warmup", verdict, f"(H = {h:.3f} nats) " + reason, numbers)


def tfixup(measured: dict, seeds: int, reference: Optional[dict] = None) -> dict:
  """Claim 8 (module docstring)."""
  early = _early("tfixup", measured, seeds, reference, [(TFIXUP, False), (POST, False)])
  if early:
    return early
  h = reference["unigram_entropy"]
  ct, cp = cells(measured, TFIXUP, False, h), cells(measured, POST, False, h)
  fails = [lr for lr, (cls, _) in cp.items() if cls in FAILED]
  where = [lr for lr in fails if ct.get(lr, ("", 0))[0] == outcomes.TRAINED]
  numbers = {"lrs T-Fixup trains where Post-LN fails": sorted(where), "Post-LN fails at": sorted(fails)}
  reason = (
      f"without warmup, cells by class (H = {h:.3f} nats): T-Fixup [{_show(ct)}]; Post-LN + Xavier [{_show(cp)}]; "
      f"T-Fixup trains where Post-LN fails at η {_lrs(where) if where else 'none'}"
  )
  if not fails:
    return _record("tfixup", "inconclusive", reason + "; Post-LN never fails: extend the lr grid", numbers)
  if where:
    few = sorted(set(_few_seeds(ct, where) + _few_seeds(cp, where)), key=float)
    if few:
      return _record(
          "tfixup",
          "inconclusive",
          reason + f"; the deciding cells at η {{{', '.join(few)}}} have fewer than {MIN_SEEDS} seeds: run more",
          numbers,
      )
    return _record("tfixup", "reproduced", reason, numbers)
  if all(ct.get(lr, ("", 0))[0] in FAILED for lr in fails):
    return _record("tfixup", "not reproduced", reason, numbers)
  return _record("tfixup", "inconclusive", reason + "; T-Fixup's cells there are mixed or undertrained", numbers)


def bert_vs_xavier(measured: dict, seeds: int, reference: Optional[dict] = None) -> dict:
  """Claim 9's training half (module docstring): inconclusive by design until the ablation arm exists."""
  early = _early("bert_vs_xavier", measured, seeds, reference, [(BERT, False), (POST, False)])
  if early:
    return early
  h = reference["unigram_entropy"]
  cb, cx = cells(measured, BERT, False, h), cells(measured, POST, False, h)
  both = [lr for lr in cb if cb[lr][0] == outcomes.TRAINED and cx.get(lr, ("", 0))[0] in FAILED]
  reason = (
      f"without warmup, cells by class (H = {h:.3f} nats): BERT recipe [{_show(cb)}]; Xavier [{_show(cx)}]; the BERT "
      f"recipe trains where Xavier fails at η {_lrs(both) if both else 'none'}. The BERT arm also changes the "
      "embedding setup (unscaled embeddings, learned positions, an embedding LayerNorm), so this compares recipes: "
      "an ablation arm (Post-LN + Xavier with BERT's embedding setup) would separate the 0.02 scale from the rest"
  )
  return _record("bert_vs_xavier", "inconclusive", reason, {"lrs BERT recipe trains where Xavier fails": sorted(both)})


def deep_no_warmup(measured: dict, seeds: int, reference: Optional[dict] = None) -> dict:
  """Claim 10 (module docstring): inconclusive by design at one depth; the cells are reported."""
  early = _early("deep_no_warmup", measured, seeds, reference, [(m, False) for m in (*DEEP, PRE)])
  if early:
    return early
  h = reference["unigram_entropy"]
  pre = cells(measured, PRE, False, h)
  pre_trains = sorted(lr for lr, (cls, _) in pre.items() if cls == outcomes.TRAINED)
  per = {m: cells(measured, m, False, h) for m in DEEP}
  short = {m: [lr for lr in pre_trains if c.get(lr, ("", 0))[0] != outcomes.TRAINED] for m, c in per.items()}
  reason = (
      f"one depth (the atlas's 6+6), without warmup, cells by class (H = {h:.3f} nats): Pre-LN trains at η "
      f"{_lrs(pre_trains)}; "
      + "; ".join(f"{m} does not train at {_lrs(v)}" if v else f"{m} trains at each" for m, v in short.items())
      + ". The claim is about depth: runs at 12+12 or deeper (and ≥ 3 seeds) would decide it"
  )
  numbers = {f"{m}: Pre-LN's lrs it does not train at": v for m, v in short.items()}
  return _record("deep_no_warmup", "inconclusive", reason, numbers)


def decide(measured: dict, seeds: int, reference: Optional[dict] = None) -> list[dict[str, Any]]:
  """The four claims' records from the atlas's measured dict, in claim order."""
  return [fn(measured, seeds, reference) for fn in (warmup, tfixup, bert_vs_xavier, deep_no_warmup)]


SECTION, NEXT = "## Claims decided from the atlas\n", "\n## Per method"


def patch_report(path: str, decisions: list[dict]) -> None:
  """Rewrites the claims section of an ATLAS.md in place from `decisions` (the rest of the report is untouched)."""
  with open(path, encoding="utf-8") as f:
    text = f.read()
  start, end = text.find(SECTION), text.find(NEXT)
  if start < 0 or end < start:
    raise ValueError(f"{path} has no '{SECTION.strip()}' section followed by '{NEXT.strip()}'")
  text = text[: start + len(SECTION)] + "\n" + markdown(decisions) + "\n" + text[end:]
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def markdown(decisions: list[dict]) -> str:
  """ATLAS.md's section body: per claim its verdict, reason and rules (the REPRODUCTION.md link reads it)."""
  lines = [
      "Claims 6, 8, 9 and 10 of reports/REPRODUCTION.md are decided here, from the lr × warmup grid, by",
      "experiments/atlas/claims.py (runs read by outcome class, analysis/outcomes.py; rules in its docstring).",
      "",
      "| # | claim | verdict | reason |",
      "|---|---|---|---|",
  ]
  for d in decisions:
    lines.append(f"| {d['number']} | {d['claim']} | **{d['verdict']}** | {d['reason'].replace('|', '/')} |")
  return "\n".join(lines)
