"""Initialization: per-tensor initializers, whole-model schemes, post-init procedures, and the maths behind them.

Public API:
- `init_params(config.init, model, key, batch) -> variables`.
- `get_scheme(name)` / `SCHEMES` (init.schemes): role + ModelConfig -> initializer rule, per-role target stds.
- `get_procedure(name)` / `PROCEDURES` (init.procedures): Admin's profiling pass.
- `get_initializer(name, **hp)`, `realized_std(name, ...)` / `INITIALIZERS` (init.initializers).
- `init.math`: closed forms and papers' constants.
Imports only models/ from the project.
"""

from init.initializers import INITIALIZERS, get_initializer, realized_std
from init.params import check_init_config, init_params
from init.procedures import PROCEDURES, admin_profile, get_procedure
from init.schemes import SCHEMES, InitConfig, Rule, Scheme, derived_scheme, get_scheme

__all__ = [
    "INITIALIZERS",
    "InitConfig",
    "PROCEDURES",
    "SCHEMES",
    "Rule",
    "Scheme",
    "admin_profile",
    "check_init_config",
    "get_initializer",
    "get_procedure",
    "derived_scheme",
    "get_scheme",
    "init_params",
    "realized_std",
]
