"""The project's name for `curvax.probes` (the code lives there; see its docstring)."""

from curvax.probes import (  # noqa: F401
    PROBE_BATCH_DEFAULTS,
    PROBES,
    check_positive_int,
    check_probe_batch,
    default_probe_batch,
    draw_probes,
    flat_info,
    get_probe,
    map_probes,
    sample_probes,
)
