"""PNG plots of the analysis records (matplotlib, Agg backend: no display needed).

Contract: each function takes the JSON-able records written by `analysis.run` (plain dicts and lists, so a plot can
be redrawn from the JSON files alone) and an output path, writes one PNG and returns the path. A series drawn in
several panels has one colour in all of them (`series_colors`), so one legend reads for every panel.
"""

import io
import os
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402  (after selecting the backend)
import matplotlib.layout_engine  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from etils import epath  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

LOG_SPAN = 2.0  # a y axis is logarithmic only where its positive values span more than this factor


def integer_ticks(axis) -> None:
  """Ticks at integers only (layer and index axes: no 0.5 layer)."""
  axis.set_major_locator(MaxNLocator(integer=True))


def scale_y(ax, values, *, log_ok: bool = True) -> str:
  """A log y axis where the finite `values` are positive and span more than LOG_SPAN, else a linear one whose range
  is at least 5% of the values' magnitude (so float noise around a constant reads as a constant, not as six ticks of
  9.99999e-1) without an offset; returns the scale chosen."""
  v = np.asarray([x for x in np.ravel(np.asarray(values, float)) if np.isfinite(x)])
  if not v.size:
    return ax.get_yscale()
  if log_ok and v.min() > 0 and v.max() / v.min() > LOG_SPAN:
    ax.set_yscale("log")
    if v.max() / v.min() < 100:  # under two decades the default labels say 2×10⁰ or, within one, nothing
      ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
      ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
      ax.yaxis.set_minor_formatter(NullFormatter())
    return "log"
  ax.set_yscale("linear")
  center, half = (v.max() + v.min()) / 2, (v.max() - v.min()) / 2
  half = max(1.1 * half, 0.05 * abs(center), 1e-12)
  ax.set_ylim(center - half, center + half)
  ax.ticklabel_format(axis="y", style="plain", useOffset=False)
  return "linear"


def color_norm(values) -> mcolors.Normalize:
  """The colour scale of a heatmap: LogNorm where every finite value is positive, SymLogNorm (linear within the
  smallest nonzero magnitude) where signs differ, linear where the positive values span less than LOG_SPAN."""
  v = np.asarray([x for x in np.ravel(np.asarray(values, float)) if np.isfinite(x)])
  if not v.size:
    return mcolors.Normalize()
  if v.min() > 0:
    if v.max() / v.min() <= LOG_SPAN:
      return mcolors.Normalize(v.min(), v.max())
    return mcolors.LogNorm(v.min(), v.max())
  nonzero = np.abs(v[v != 0])
  linthresh = float(nonzero.min()) if nonzero.size else 1.0
  return mcolors.SymLogNorm(linthresh, vmin=v.min(), vmax=v.max(), base=10)


def series_colors(names) -> dict:
  """One colour per series name, fixed for the whole figure (the colour cycle restarts in every axes: drawn panel by
  panel, one name would take a different colour in each); names in sorted order, tab10 then tab20."""
  names = sorted(set(names))
  cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
  return {name: mcolors.to_hex(cmap(i % cmap.N)) for i, name in enumerate(names)}


def _save(fig, path):
  folder = epath.Path(path).parent  # through etils.epath: a sweep's run folder may be a URI (gs://...)
  folder.mkdir(parents=True, exist_ok=True)
  if not isinstance(fig.get_layout_engine(), matplotlib.layout_engine.ConstrainedLayoutEngine):
    fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format=os.path.splitext(path)[1][1:] or "png", dpi=110)
  plt.close(fig)
  epath.Path(path).write_bytes(buffer.getvalue())
  return path


def slq_floor(sigma: float, num_params: int) -> float:
  """1/(n σ √(2π)): the density of one eigenvalue's mass 1/n at the peak of the smoothing kernel; below it the SLQ
  density says less than one eigenvalue per kernel width, which its quadrature cannot resolve (kernel tails)."""
  return 1.0 / (num_params * sigma * np.sqrt(2 * np.pi))


def plot_spectral_density(
    density: dict, path: str, *, log_y: bool = True, title: str = "", num_params: Optional[int] = None
) -> str:
  """SLQ density ρ(t) with its bootstrap band; `density` has grid, density, band_low, band_high, sigma.

  On a log axis the density is not drawn below a floor (gaps, no shelves): `slq_floor(σ, num_params)` (drawn, dotted)
  when the operator's size is given, else 1e-12 of the peak.
  """
  grid, rho = np.asarray(density["grid"], float), np.asarray(density["density"], float)
  sigma = float(density["sigma"])
  floor = slq_floor(sigma, num_params) if num_params else 1e-12 * max(float(np.nanmax(rho)), 1e-300)
  low, high = np.asarray(density["band_low"], float), np.asarray(density["band_high"], float)
  fig, ax = plt.subplots(figsize=(6, 4))
  band = f"bootstrap {density.get('band_percentiles', '')} band"
  if log_y:
    ax.fill_between(grid, np.maximum(low, floor), high, where=high >= floor, alpha=0.3, lw=0, label=band)
    ax.plot(grid, np.where(rho >= floor, rho, np.nan), lw=1.2, label=f"density (σ = {sigma:.3g})")
    if num_params:
      ax.axhline(floor, color="grey", ls=":", lw=1, label=r"floor $1/(n\sigma\sqrt{2\pi})$: < 1 eigenvalue per σ")
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor / 3)
  else:
    ax.fill_between(grid, low, high, alpha=0.3, lw=0, label=band)
    ax.plot(grid, rho, lw=1.2, label=f"density (σ = {sigma:.3g})")
  ax.set_xlabel("eigenvalue")
  ax.set_ylabel("density")
  ax.set_title(title or "Hessian spectral density (SLQ)")
  ax.legend(fontsize=8)
  return _save(fig, path)


def plot_eigenvalues(eigen: dict, path: str, *, title: str = "") -> str:
  """Top (and bottom) Ritz values with their residual bounds as error bars; `eigen` has "top"/"bottom" entries."""
  fig, ax = plt.subplots(figsize=(6, 4))
  for name, marker in (("top", "o"), ("bottom", "s")):
    part = eigen.get(name)
    if not part:
      continue
    values = np.asarray(part["values"], float)
    bounds = np.asarray(part["bounds"], float)
    valid = np.asarray(part["valid"], bool)
    idx = np.arange(1, len(values) + 1)[valid]
    ax.errorbar(
        idx, values[valid], yerr=bounds[valid], fmt=marker, capsize=3, label=f"{name} (separated={part['separated']})"
    )
  ax.axhline(0.0, color="gray", lw=0.5)
  integer_ticks(ax.xaxis)
  ax.set_xlabel("index i (most extreme first)")
  ax.set_ylabel(r"Ritz value $\theta_i$ ± residual bound")
  ax.set_title(title or "Extreme Hessian eigenvalues (Lanczos)")
  ax.legend(fontsize=8)
  return _save(fig, path)


def _layer_key(stack, layer):
  return f"{stack[:3]}{layer}" if layer is not None else stack


def plot_block_spectra(blocks: list, path: str, *, title: str = "") -> str:
  """Heatmap of each per-layer block's top eigenvalue: rows block kinds, columns stack/layer.

  Args:
    blocks: records {name, stack, layer, kind, top_value, top_bound, ...} (blocks without a layer are listed
      in the title-free bar panel on the right).
  """
  layered = [b for b in blocks if b.get("layer") is not None]
  other = [b for b in blocks if b.get("layer") is None]
  kinds = sorted({b["kind"] for b in layered})
  cols = sorted({(b["stack"], b["layer"]) for b in layered}, key=lambda c: (c[0] != "encoder", c[1]))
  fig, axes = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw=dict(width_ratios=[3, 1]))
  grid = np.full((len(kinds), len(cols)), np.nan)
  for b in layered:
    grid[kinds.index(b["kind"]), cols.index((b["stack"], b["layer"]))] = b["top_value"]
  if layered:
    # The blocks' top eigenvalues span decades (embeddings vs norms vs MLP blocks): a log colour scale.
    norm = color_norm(grid)
    im = axes[0].imshow(grid, aspect="auto", cmap="viridis", norm=norm)
    kind = {mcolors.LogNorm: "log scale", mcolors.SymLogNorm: "symmetric log scale"}.get(type(norm), "linear scale")
    fig.colorbar(im, ax=axes[0], label=f"top eigenvalue ({kind})")
    axes[0].set_yticks(range(len(kinds)), kinds, fontsize=7)
    axes[0].set_xticks(range(len(cols)), [_layer_key(*c) for c in cols], fontsize=7, rotation=90)
  axes[0].set_title(title or "Per-block top Hessian eigenvalue")
  if other:
    values = [b["top_value"] for b in other]
    axes[1].barh(range(len(other)), values, xerr=[b["top_bound"] for b in other])
    axes[1].set_yticks(range(len(other)), [b["name"] for b in other], fontsize=7)
    if min(values) > 0 and max(values) / min(values) > LOG_SPAN:
      axes[1].set_xscale("log")
  axes[1].set_xlabel("top eigenvalue")
  return _save(fig, path)


def plot_block_ritz_spectra(blocks: list, path: str, *, title: str = "") -> str:
  """Each block's whole Ritz spectrum: one row per block, a dot per Ritz value θ_i (symlog x axis) with area
  proportional to its Gauss-quadrature weight s_{1,i}² (the block's one-probe SLQ) and color its residual bound.

  Args:
    blocks: records {name, lanczos: {ritz_values, ritz_bounds, first_components}} as in blocks.json.
  """
  fig, ax = plt.subplots(figsize=(8, 1.2 + 0.22 * len(blocks)))
  points = None
  for row, b in enumerate(blocks):
    lz = b["lanczos"]
    theta, bounds = np.asarray(lz["ritz_values"], float), np.asarray(lz["ritz_bounds"], float)
    weights = np.square(np.asarray(lz["first_components"], float))
    points = ax.scatter(
        theta,
        np.full_like(theta, row),
        s=8 + 120 * weights,
        c=np.log10(np.maximum(bounds, 1e-16)),
        cmap="viridis_r",
        vmin=-12,
        vmax=1,
    )
  if points is not None:
    fig.colorbar(points, ax=ax, label="log10 residual bound")
  ax.set_xscale("symlog", linthresh=1e-3)
  ax.set_yticks(range(len(blocks)), [b["name"] for b in blocks], fontsize=6)
  ax.set_ylim(len(blocks) - 0.5, -0.5)
  ax.set_xlabel("Ritz value (area: quadrature weight)")
  ax.set_title(title or "Per-block Hessian Ritz spectra")
  return _save(fig, path)


MATRIX_ROLES = ("attn_q", "attn_k", "attn_v", "attn_out", "mlp_in", "mlp_out")


def plot_grad_norms(
    records: list,
    path: str,
    *,
    value_key: str = "norm_mean",
    spread_key: Optional[str] = "norm_std",
    roles: tuple = MATRIX_ROLES,
    title: str = "",
) -> str:
  """Per-layer gradient-norm profile of the weight matrices (one panel per stack; Xiong et al. 2020, Fig. 3): one
  line per parameter (its path without the stack and layer), so the biases and norms that share a role (a key bias,
  whose gradient is 0 up to rounding, next to a value bias) never zigzag along one line; `roles` picks them."""
  stacks = sorted({r["stack"] for r in records if r["layer"] is not None})
  fig, axes = plt.subplots(1, max(len(stacks), 1), figsize=(5 * max(len(stacks), 1), 4), squeeze=False)
  name = lambda r: "/".join(p for p in r["path"].split("/")[1:] if not p.startswith("layer_"))
  layered = [r for r in records if r["layer"] is not None and r["role"] in roles]
  colors = series_colors(name(r) for r in layered)
  for ax, stack in zip(axes[0], stacks):
    rows = [r for r in layered if r["stack"] == stack]
    for key in sorted({name(r) for r in rows}):
      sel = sorted((r for r in rows if name(r) == key), key=lambda r: r["layer"])
      x = [r["layer"] for r in sel]
      y = [r[value_key] for r in sel]
      err = [r[spread_key] for r in sel] if spread_key and spread_key in sel[0] else None
      ax.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, color=colors[key], label=key)
    scale_y(ax, [r[value_key] for r in rows])
    integer_ticks(ax.xaxis)
    ax.set_xlabel("layer")
    ax.set_ylabel(r"$\|\partial L/\partial W\|_F$")
    ax.set_title(f"{title or 'gradient norm'}: {stack} weight matrices", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
  return _save(fig, path)


def plot_signal(records: list, path: str, *, title: str = "") -> str:
  """Per-layer residual-stream moments, branch ratio, cosine with x_0 and attention entropy (signal.py records): one
  line per stack/sublayer, its colour the same in every panel, one legend under the panels."""
  panels = (
      ("second_moment_out", r"$E[x^2]$ leaving the sublayer", True),
      ("branch_ratio", r"$E[F^2]/E[x^2]$", True),
      ("x0_cosine", r"$\cos(x_l, x_0)$", False),
      ("attn_entropy", "attention entropy (nats, mean over heads)", False),
  )
  sublayers = ("self_attn", "cross_attn", "mlp")
  series = {  # name -> its records, stacks then sublayers in the model's order
      f"{stack}/{sub}": sel
      for stack in sorted({r["stack"] for r in records})
      for sub in sublayers
      if (sel := sorted((r for r in records if r["stack"] == stack and r["sublayer"] == sub), key=lambda r: r["layer"]))
  }
  colors = series_colors(series)
  fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.9), layout="constrained")
  for ax, (key, label, log) in zip(axes, panels):
    shown = []
    for name, rows in series.items():
      sel = [r for r in rows if key in r]
      if not sel:
        continue
      y = [float(np.mean(r[key])) for r in sel]
      shown += y
      ax.plot([r["layer"] for r in sel], y, marker="o", ms=3, color=colors[name], label=name)
    # Post-LN holds E[x²] at 1 to ~1e-6: a log axis over that range only magnifies float noise.
    scale_y(ax, shown, log_ok=log)
    integer_ticks(ax.xaxis)
    ax.set_xlabel("layer")
    ax.set_title(label, fontsize=9)
  handles = [plt.Line2D([], [], color=colors[n], marker="o", ms=3, label=n) for n in series]
  if handles:
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=7)
  fig.suptitle(title or "forward signal propagation", fontsize=10)
  return _save(fig, path)
