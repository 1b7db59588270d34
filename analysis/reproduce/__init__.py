"""Reproduce the papers' claims (docs/science.md): one command per claim, one sweep for all, a report with figures
and verdicts.

    python main.py --config=configs/reproduce/<claim>.py --workdir=runs/reproduce/<claim>
    python -m analysis.reproduce.sweep --out=reports --runs=runs/reproduce      # every claim, then the report

Public API: `CLAIMS` / `get_claim(name)` (registry), `run_claim(config, workdir) -> dict` (writes result.json and
PNGs into workdir), `analysis.reproduce.report.write_report(results, path)`. One module per claim or group:
sampling (1), moments (2), attention (3), identity (4), gradients (5), curvature (7), training_claims (6, 8, 9, 10,
on the `training` runner). Every verdict is code with its thresholds in the module docstring and in result.json.
"""

from analysis.reproduce.registry import CLAIMS, Claim, get_claim, run_claim

__all__ = ["CLAIMS", "Claim", "get_claim", "run_claim"]
