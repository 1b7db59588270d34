"""`write_report(results, path)`: reports/REPRODUCTION.md from the claims' result dicts (result.json files).

Contract: one summary table (claim, verdict, scale, time), then per claim: the statement and its source, the
scale used next to the paper's, the thresholds the verdict code applied, the headline numbers, the verdict with
its reason, and the figures (paths relative to the report). A claim whose run failed (no result.json) appears with
verdict "inconclusive" and the error, so the report always lists every claim.
"""

import os


def _fmt(v):
  if isinstance(v, float):
    return f"{v:.4g}"
  if v is None:
    return "∞ / failed"
  return str(v)


def write_report(results: list, path: str, *, figure_dir: str = "", command: str = "") -> str:
  """Writes the Markdown report and returns its path.

  Args:
    results: result dicts (analysis.reproduce.result.finish), in claim order.
    path: output file, e.g. reports/REPRODUCTION.md.
    figure_dir: folder (relative to the report) holding `<claim>/<figure>.png`.
    command: the command that produced the results, quoted at the top.
  """
  lines = ["# Reproduction of the papers' claims", ""]
  if command:
    lines += [f"Produced by `{command}`; each claim alone: `python main.py --config=configs/reproduce/<claim>.py`.", ""]
  lines += [
      "Verdicts are computed by code (`analysis/reproduce/`) from the thresholds stated under each claim; "
      "results that contradict a claim are reported as such.",
      "",
      "| # | claim | verdict | scale used | time (s) | finished |",
      "|---|---|---|---|---|---|",
  ]
  for r in results:
    lines.append(
        f"| {r.get('number', '?')} | [{r['claim']}](#{r['claim'].replace('_', '-')}) | **{r['verdict']}** | "
        f"{r.get('scale', '?')} | {r.get('seconds', '?')} | {r.get('finished_at', '?')} |"
    )
  for r in results:
    lines += [
        "",
        f"## {r['claim']}",
        "",
        f"**Claim {r.get('number', '?')}.** {r.get('statement', '')}",
        "",
        f"- Source: {r.get('source', '?')}",
        f"- Paper's scale: {r.get('paper_scale', '?')}",
        f"- Scale used ({r.get('scale', '?')}): {r.get('scale_used', '?')}",
        "",
        "Thresholds:",
        "",
    ]
    lines += [f"- {k}: {v}" for k, v in (r.get("thresholds") or {}).items()]
    if r.get("summary"):
      lines += ["", "| quantity | value |", "|---|---|"]
      lines += [f"| {k} | {_fmt(v)} |" for k, v in r["summary"].items()]
    lines += ["", f"**Verdict: {r['verdict']}.** {r.get('reason', '')}", ""]
    for fig in r.get("figures", []):
      lines.append(f"![{r['claim']}]({os.path.join(figure_dir, r['claim'], fig) if figure_dir else fig})")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  return path
