"""reports/REPRODUCTION.md, reports/ATLAS.md and the README's results table, written from the claims' claim.json files alone.

Contract:
  write_reproduction(results, path, figure_dir=, command=)  the report: how it was produced, a table (claim, verdict,
      scale, data, runs, time, commit), then per claim: statement and source, the paper's scale next to the settings
      run, the data, a link to its section of the design log (docs/design_log.md: calibrations and the changes made
      after its data, where it has one), the thresholds the verdict code applied, the headline numbers, the verdict
      and its reason, the figures, and provenance (commit and whether the tree was dirty, jax version, backend and
      devices, host, date). A claim with no claim.json (its process failed) is listed as inconclusive with the error.
  readme_table(results)   the Markdown table the README shows between `<!-- claims:begin -->` and `<!-- claims:end -->`
  update_readme(readme_path, results)   rewrites that block in place (ValueError if the markers are missing).
  write_atlas(results, path, command=)   reports/ATLAS.md: the atlas's studies (ATLAS_STUDIES) and their verdicts.
One record per claim: `reports/reproduction/<claim>/claim.json`, written by the claim's own study. The report and the
README's table are written from those records, so they state the same verdicts and numbers (tests/test_reports_agree.py
regenerates them from the records and compares). The design log is linked, not copied: its sections run to dozens of
lines of history each, which the report, a record of results, would only repeat.
"""

import os
import re
from typing import Optional

from experiments import baseline as baseline_lib
from experiments import registry

README_BEGIN, README_END = "<!-- claims:begin -->", "<!-- claims:end -->"
DESIGN_LOG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "design_log.md")
DESIGN_LOG_LINK = "../docs/design_log.md"  # the design log as the report links it, from reports/ where it lives
BASELINE_BEGIN, BASELINE_END = "<!-- baseline:begin -->", "<!-- baseline:end -->"


def _fmt(v) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  if v is None:
    return "—"
  return _cell(str(v))


def _cell(text: str) -> str:
  """`text` safe inside a Markdown table cell ('|' escaped)."""
  return text.replace("|", "\\|")


def _anchor(name: str) -> str:
  """GitHub's anchor of a heading: lower case, spaces to hyphens, punctuation but '-' and '_' dropped."""
  return re.sub(r"[^\w\- ]", "", name.strip().lower()).replace(" ", "-")


def _data(r: dict) -> str:
  d = r.get("data") or {}
  if d.get("name") == "multi30k":
    return f"Multi30k {d.get('source_lang')}→{d.get('target_lang')}"
  return {"embedded": "synthetic (no data read)"}.get(d.get("name"), str(d.get("name", "?")))


def _commit(r: dict, key: str = "provenance") -> str:
  p = r.get(key) or {}
  c = p.get("git_commit")
  return (c[:10] + ("+dirty" if p.get("git_dirty") else "")) if c else "?"


def _runs(r: dict) -> str:
  return ", ".join(f"{n} {o}" for o, n in (r.get("runs") or {}).items()) or "—"


def design_log_sections(path: str = DESIGN_LOG) -> set[str]:
  """The claims with a section in the design log at `path`: its `<a id="<claim>"></a>` anchors (none without it)."""
  if not os.path.exists(path):
    return set()
  with open(path, encoding="utf-8") as f:
    return set(re.findall(r'<a id="([\w-]+)"></a>', f.read()))


def write_reproduction(
    results: list[dict],
    path: str,
    *,
    figure_dir: str,
    command: str,
    baseline: Optional[dict] = None,
    design_log: str = DESIGN_LOG,
) -> str:
  """Writes the report (module docstring) and returns its path; figures are at `<figure_dir>/<claim>/<png>`. With
  `baseline` (reports/baseline/result.json), its section (experiments/baseline.py) heads the results. A claim with a
  section in `design_log` (`design_log_sections`) links it as `DESIGN_LOG_LINK#<claim>`."""
  logged = design_log_sections(design_log)
  lines = [
      "# Reproduction of the papers' claims",
      "",
      f"Produced by `{command}`. Each claim alone: `python main.py --config=configs/claims/<claim>.py:<scale> "
      "--config.data.dir=<folder with Multi30k's .gz files>`; scales `tiny` (tests), `cpu` (this report), `paper` "
      "(the papers' sizes, for accelerators).",
      "",
      "Each claim is a sweep (configs/claims/) run by the same code as `main.py`; its verdict is computed by code "
      "(experiments/claims/) from thresholds stated in the module docstring before the runs. Results that contradict "
      f"a claim are reported as such. The [design log]({DESIGN_LOG_LINK}) keeps each claim's calibrations and every "
      "change made after its data were seen.",
      "",
      *([*baseline_lib.section(baseline), "", "## The claims", ""] if baseline else []),
      "| # | claim | verdict | scale | data | runs | time (s) | commit |",
      "|---|---|---|---|---|---|---|---|",
  ]
  for r in results:
    lines.append(
        f"| {r.get('number', '?')} | [{r['claim']}](#{_anchor(r['claim'])}) | **{r['verdict']}** | "
        f"{r.get('scale') or '—'} | {_data(r) if not r.get('pending') else '—'} | {_runs(r)} | "
        f"{_fmt(r.get('seconds'))} | {_commit(r) if not r.get('pending') else '—'} |"
    )
  for r in results:
    head = [
        "",
        f"## {r['claim']}",
        "",
        f"**Claim {r.get('number', '?')}.** {r.get('statement', '')}",
        "",
        f"- Source: {r.get('source', '?')}",
        f"- Paper's scale: {r.get('paper_scale', '?')}",
    ]
    if r["claim"] in logged:
      link = f"{DESIGN_LOG_LINK}#{r['claim']}"
      head.append(
          f"- Design log (calibrations, changes made after the data): [docs/design_log.md#{r['claim']}]({link})"
      )
    if r.get("pending"):  # a registered study without a record (experiments/reproduce.py `not_run`)
      lines += [*head, "", f"**{r['verdict'][0].upper() + r['verdict'][1:]}:** {r.get('reason', '')}."]
      continue
    p = r.get("provenance") or {}
    d = r.get("data") or {}
    lines += [
        *head,
        f"- Run here ({r.get('scale', '?')}): {r.get('settings', '?')}; "
        f"swept: {', '.join(r.get('swept') or []) or '—'}",
        f"- Data: {_data(r)}" + (f" (data.dir `{d['dir']}`)" if d.get("dir") and not os.path.isabs(d["dir"]) else ""),
        f"- Runs: {_runs(r)}",
        "",
        "Thresholds (as coded; a change made after a run is stated, with its reason, in the design log):",
        "",
    ]
    lines += [f"- {k}: {v}" for k, v in (r.get("thresholds") or {}).items()] or ["- —"]
    if r.get("summary"):
      lines += ["", "| quantity | value |", "|---|---|"]
      lines += [f"| {_cell(k)} | {_fmt(v)} |" for k, v in r["summary"].items()]
    for table in r.get("tables") or []:  # the study's further tables (Study.tables)
      title = table["title"] if table["title"].endswith(("?", ".", ":")) else table["title"] + ":"
      lines += ["", title, "", "| " + " | ".join(map(_cell, table["header"])) + " |"]
      lines += ["|" + "---|" * len(table["header"])]
      lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in table["rows"]]
    if r.get("identity"):
      i = r["identity"]
      lines += ["", f"Identity half (the claim's at-init run, commit {i.get('commit', '?')}): {i.get('reason', '')}"]
    lines += ["", f"**Verdict: {r['verdict']}.** {r.get('reason', '')}", ""]
    for fig in r.get("figures", []):
      lines.append(f"![{r['claim']}]({figure_dir}/{r['claim']}/{fig})")
    if r.get("trained_at"):
      t = r["trained_at"]
      lines += ["", f"The runs trained at commit(s) {', '.join(c[:10] + c[40:] for c in t['git_commits'])}, on "
                f"{'; '.join(t['machines'])}; decided at commit {_commit(r)}."]  # fmt: skip
    if r.get("redecided_by"):
      lines += [
          "",
          f"Re-decided from this record's measurements by the rules above at commit {_commit(r, 'redecided_by')}; the "
          f"runs were measured at commit {_commit(r)}.",
      ]
    if p:
      lines += [
          "",
          f"<sub>Provenance: commit {_commit(r)}, jax {(p.get('packages') or {}).get('jax', '?')}, "
          f"{p.get('backend', '?')} × {p.get('device_count', '?')} ({', '.join(p.get('device_kinds') or ['?'])}), "
          f"host {p.get('hostname', '?')}, finished {r.get('finished', '?')}.</sub>",
      ]
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


# The atlas's questions, each a study of the registry (configs/claims/<name>.py).
ATLAS_STUDIES = ("edge", "width", "depth", "edge_boundary")
ANSWER = "edge_boundary"  # the study whose verdict answers the atlas's question (ATLAS.md says it first)


def write_atlas(results: list[dict], path: str, *, command: str) -> str:
  """reports/ATLAS.md: the atlas's question, its studies (`ATLAS_STUDIES`) with the verdict and headline numbers of
  each one's record (the same records as REPRODUCTION.md, whose sections hold the rest), and how to run them."""
  mine = [r for r in results if r["claim"] in ATLAS_STUDIES]
  lines = [
      "# The atlas: does curvature at step 0 predict where training breaks, and where warmup rescues it?",
      "",
      f"Written by `{command}` from the same records as [REPRODUCTION.md](REPRODUCTION.md) "
      "(`reports/reproduction/<study>/claim.json`), whose sections give each study's settings, rules, numbers, "
      "figures and provenance. The atlas's cells (configs/atlas.py: its methods, model and data at each scale) are "
      "shared with claims 8, 9 and 10; its questions are the studies below, each a sweep with its verdict code fixed "
      "before its runs (configs/claims/<study>.py, experiments/claims/<study>.py).",
      "",
  ]
  answer = next((r for r in mine if r["claim"] == ANSWER), None)
  if answer is not None:  # the question's answer, in one sentence, from the record that decides it
    said = "not decided yet: its runs are under way" if answer.get("pending") else answer["verdict"]
    lines += [f"**The answer** (study {answer.get('number', '?')}, {answer['claim']}, on fresh seeds): {said}. "
              f"{'' if answer.get('pending') else answer.get('reason', '')}".rstrip(), ""]  # fmt: skip
  lines += ["| # | study | verdict | headline numbers | scale | commit |", "|---|---|---|---|---|---|"]
  for r in mine:
    numbers = "; ".join(f"{_cell(k)} {_fmt(v)}" for k, v in (r.get("summary") or {}).items()) or "—"
    lines.append(
        f"| {r.get('number', '?')} | [{r['claim']}](REPRODUCTION.md#{_anchor(r['claim'])}) | {verdict_cell(r)} | "
        f"{numbers} | {r.get('scale', '—')} | {_commit(r) if r.get('provenance') else '—'} |"
    )
  for r in mine:
    lines += ["", f"## {r['claim']}", "", f"**Study {r.get('number', '?')}.** {r.get('statement', '')}", ""]
    lines += [f"**{r['verdict'][0].upper() + r['verdict'][1:]}.** {r.get('reason', '')}"]
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def verdict_cell(r: dict) -> str:
  """A record's verdict as the tables say it: bold unless reproduced, and a re-reading (a rule stated after its
  runs were seen: the reason opens "A re-reading") said as one, its fresh seeds deciding."""
  verdict = r["verdict"] if r["verdict"] == "reproduced" else f"**{r['verdict']}**"
  return f"{verdict} (re-reading; fresh seeds decide)" if r.get("reason", "").startswith("A re-reading") else verdict


def headline(r: dict) -> dict:
  """The summary entries the README's table shows: the study's `headline` keys, else the first entry."""
  summary = r.get("summary") or {}
  keys = registry.get_claim(r["claim"]).headline if r["claim"] in registry.CLAIM_NAMES else ()
  keys = [k for k in keys if k in summary] or list(summary)[:1]
  return {k: summary[k] for k in keys}


def readme_table(results: list[dict], report_link: str = "reports/REPRODUCTION.md") -> str:
  """The README's results table: one row per claim with its verdict and its headline number (`headline`), linking
  the report, which has the rest."""
  lines = ["| # | claim | verdict | headline number | scale |", "|---|---|---|---|---|"]
  for r in results:
    numbers = "; ".join(f"{_cell(k)} {_fmt(v)}" for k, v in headline(r).items()) or "—"
    lines.append(
        f"| {r.get('number', '?')} | [{r['claim']}]({report_link}#{_anchor(r['claim'])}) | "
        f"{verdict_cell(r)} | {numbers} | "
        f"{r.get('scale') or '—'} |"
    )
  return "\n".join(lines)


def baseline_readme(record: dict) -> str:
  """The README's baseline lines: its test BLEU beside the tutorials', the command and the time."""
  test = record["test"]
  published = "; ".join(f"{p['source']}: {p['test_bleu']}" for p in record["published"] if p["test_bleu"])
  return (
      f"Known-good baseline ([reports/REPRODUCTION.md](reports/REPRODUCTION.md#known-good-baseline)): "
      f"`{record['commands'][0]}` trains {record['recipe']} for {record['epochs']:.1f} epochs "
      f"({record['wall_time_s'] / 60:.0f} min on {record['machine']}); test_2016_flickr sacreBLEU "
      f"**{test['bleu']:.1f}**, lowercased {test['bleu_lc']:.1f} (published for the recipe: {published})."
  )


def _replace_block(text: str, begin: str, end: str, body: str, path: str) -> str:
  pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
  if not pattern.search(text):
    raise ValueError(f"{path} has no {begin} ... {end} block to update")
  return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def update_readme(readme_path: str, results: list[dict], baseline: Optional[dict] = None) -> None:
  """Rewrites the README's claims table (and, given the baseline's record, its baseline lines) in place."""
  with open(readme_path, encoding="utf-8") as f:
    text = f.read()
  text = _replace_block(text, README_BEGIN, README_END, readme_table(results), readme_path)
  if baseline:
    text = _replace_block(text, BASELINE_BEGIN, BASELINE_END, baseline_readme(baseline), readme_path)
  with open(readme_path, "w", encoding="utf-8") as f:
    f.write(text)
