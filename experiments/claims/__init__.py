"""The papers' claims, each a sweep (configs/claims/<name>.py) plus measure / verdict / figure (this package).

    python main.py --config=configs/claims/warmup.py:cpu --config.data.dir=<folder with Multi30k's .gz files>
    python main.py --config=configs/claims/identity_path.py:tiny          # seconds, on the synthetic task

`run_claim(config, workdir)` runs one claim (experiments/claims/run.py); `get_claim(name)` / `CLAIM_NAMES` the
registry; experiments/study.py the contract every claim module follows.
"""

from experiments.claims.registry import CLAIM_NAMES, SCALES, ClaimConfig, get_claim
from experiments.claims.run import decide, run_claim, run_claim_parallel
from experiments.study import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Results, Study, Verdict

__all__ = [
    "CLAIM_NAMES",
    "INCONCLUSIVE",
    "NOT_REPRODUCED",
    "REPRODUCED",
    "SCALES",
    "Study",
    "ClaimConfig",
    "Results",
    "Verdict",
    "decide",
    "get_claim",
    "run_claim",
    "run_claim_parallel",
]
