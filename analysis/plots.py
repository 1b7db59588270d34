"""PNG plots of the analysis records (matplotlib, Agg backend: no display needed).

Contract: each function takes the JSON-able records written by `analysis.run` (plain dicts and lists, so a plot can
be redrawn from the JSON files alone) and an output path, writes one PNG and returns the path.
"""

import os
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the backend)
import numpy as np  # noqa: E402


def _save(fig, path):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def plot_spectral_density(density: dict, path: str, *, log_y: bool = True, title: str = "") -> str:
  """SLQ density ρ(t) with its bootstrap band; `density` has grid, density, band_low, band_high, sigma."""
  grid, rho = np.asarray(density["grid"], float), np.asarray(density["density"], float)
  floor = 1e-12 * max(float(np.nanmax(rho)), 1e-300)
  clip = (lambda a: np.maximum(np.asarray(a, float), floor)) if log_y else (lambda a: np.asarray(a, float))
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.fill_between(
      grid,
      clip(density["band_low"]),
      clip(density["band_high"]),
      alpha=0.3,
      label=f"bootstrap {density.get('band_percentiles', '')} band",
  )
  ax.plot(grid, clip(rho), lw=1.2, label=f"density (σ = {float(density['sigma']):.3g})")
  if log_y:
    ax.set_yscale("log")
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
  ax.set_xlabel("index i (most extreme first)")
  ax.set_ylabel("Ritz value θ_i ± residual bound")
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
    im = axes[0].imshow(grid, aspect="auto", cmap="viridis")
    fig.colorbar(im, ax=axes[0], label="top eigenvalue")
    axes[0].set_yticks(range(len(kinds)), kinds, fontsize=7)
    axes[0].set_xticks(range(len(cols)), [_layer_key(*c) for c in cols], fontsize=7, rotation=90)
  axes[0].set_title(title or "Per-block top Hessian eigenvalue")
  if other:
    axes[1].barh(range(len(other)), [b["top_value"] for b in other], xerr=[b["top_bound"] for b in other])
    axes[1].set_yticks(range(len(other)), [b["name"] for b in other], fontsize=7)
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


def plot_grad_norms(
    records: list, path: str, *, value_key: str = "norm_mean", spread_key: Optional[str] = "norm_std", title: str = ""
) -> str:
  """Per-layer gradient-norm profile by role (one panel per stack; Xiong et al. 2020, Fig. 3)."""
  stacks = sorted({r["stack"] for r in records if r["layer"] is not None})
  fig, axes = plt.subplots(1, max(len(stacks), 1), figsize=(5 * max(len(stacks), 1), 4), squeeze=False)
  for ax, stack in zip(axes[0], stacks):
    rows = [r for r in records if r["stack"] == stack and r["layer"] is not None]
    for key in sorted({(r["sublayer"], r["role"]) for r in rows}):
      sel = sorted((r for r in rows if (r["sublayer"], r["role"]) == key), key=lambda r: r["layer"])
      x = [r["layer"] for r in sel]
      y = [r[value_key] for r in sel]
      err = [r[spread_key] for r in sel] if spread_key and spread_key in sel[0] else None
      ax.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, label=f"{key[0]}/{key[1]}")
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("‖∂L/∂W‖_F")
    ax.set_title(f"{title or 'gradient norm'}: {stack}")
    ax.legend(fontsize=6, ncol=2)
  return _save(fig, path)


def plot_signal(records: list, path: str, *, title: str = "") -> str:
  """Per-layer residual-stream moments, branch ratio, cosine with x_0 and attention entropy (signal.py records)."""
  panels = (
      ("second_moment_out", "E[x²] (out)", True),
      ("branch_ratio", "E[F²]/E[x²]", True),
      ("x0_cosine", "cos(x_l, x_0)", False),
      ("attn_entropy", "attention entropy (mean over heads)", False),
  )
  fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
  for ax, (key, label, log) in zip(axes, panels):
    for stack in sorted({r["stack"] for r in records}):
      for sub in ("self_attn", "cross_attn", "mlp"):
        sel = [r for r in records if r["stack"] == stack and r["sublayer"] == sub and key in r]
        if not sel:
          continue
        y = [float(np.mean(r[key])) for r in sel]
        ax.plot([r["layer"] for r in sel], y, marker="o", ms=3, label=f"{stack}/{sub}")
    if log:
      ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_title(label, fontsize=9)
  axes[0].legend(fontsize=6)
  fig.suptitle(title or "forward signal propagation", fontsize=10)
  return _save(fig, path)
