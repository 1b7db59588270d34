"""Per-block spectra: the top eigenvalues of every selected diagonal block of a curvature operator (blocks.json).

Contract: `block_spectra(cfg, operator, params, model, key, print_fn)` takes the full-model operator (the Hessian:
`analysis.blocks` restricts it), the typed `analysis` config (`block_filter`: a regular expression on the names of
`analysis.blocks.model_blocks`; `block_lanczos_steps`, `max_basis_bytes`, `reorthogonalize`) and returns one record
per block, sorted by name: its stack, layer, kind and size, its top two Ritz values with their bounds and
`separated`, and its Lanczos run (`analysis.records.lanczos_record`), printing a line per block with the ETA. One
full-model linearization serves every block, and blocks of equal leaf sizes share one compiled program.
"""

import re
import time

import jax
from jax.flatten_util import ravel_pytree

import curvax
from analysis.blocks import block_operator, model_blocks
from analysis.records import lanczos_record
from models import ParamRole, param_roles


def block_spectra(cfg, operator, params, model, key, print_fn) -> list:
  """Top eigenvalues of every selected diagonal block of `operator` (one full-model linearization for all blocks;
  blocks with equal leaf sizes share one compiled program)."""
  records = []
  roles = {}
  for r in jax.tree.leaves(param_roles(model, params), is_leaf=lambda r: isinstance(r, ParamRole)):
    roles.setdefault(r.path, r)
  blocks = {k: v for k, v in model_blocks(model).items() if re.search(cfg.block_filter, k)}
  if not blocks:
    raise ValueError(
        f"analysis.block_filter={cfg.block_filter!r} matches no block; blocks: {sorted(model_blocks(model))}"
    )
  start = time.perf_counter()
  for i, (name, select) in enumerate(sorted(blocks.items())):
    matvec, example = block_operator(operator, params, select, model=model)
    size = int(ravel_pytree(example)[0].size)
    steps = min(cfg.block_lanczos_steps, size)
    e = curvax.top_eigenvalues(
        matvec,
        min(2, steps),
        num_steps=steps,
        key=jax.random.fold_in(key, i),
        max_basis_bytes=cfg.max_basis_bytes,
        reorthogonalize=cfg.reorthogonalize,
    )
    first = roles[next(iter(example))]
    kind = name.rsplit("/", 1)[-1]
    records.append(
        dict(
            name=name,
            stack=first.stack if first.layer is not None else None,
            layer=first.layer,
            kind=kind,
            size=size,
            num_steps=steps,
            top_value=float(e.values[0]),
            top_bound=float(e.bounds[0]),
            values=e.values,
            bounds=e.bounds,
            separated=bool(e.separated),
            lanczos=lanczos_record(e.lanczos),
        )
    )
    elapsed = time.perf_counter() - start
    print_fn(
        f"block {i + 1}/{len(blocks)} {name}: top eigenvalue {float(e.values[0]):.4g} "
        f"± {float(e.bounds[0]):.2g}, {elapsed:.1f} s elapsed, "
        f"ETA {elapsed / (i + 1) * (len(blocks) - i - 1):.1f} s"
    )
  return records
