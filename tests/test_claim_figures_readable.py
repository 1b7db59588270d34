"""The studies' figures are readable (tests/test_figures_readable.py's checks on the figures of experiments/claims/):
study 11's predictor panels with every method of the registry, study 13's lr axes labelled at each value of the grid
and its titles fitting, study 12's log axes; all drawn from hand-made measurements, nothing overprinted or cut."""

import pytest

from experiments import plots as figure_kit
from experiments.claims import edge
from experiments.claims.shared import edge_report
from tests.test_figures_readable import LONG_SETTINGS, assert_readable, kept  # noqa: F401 (a fixture)

# ------------------------------------------------------------------------------ study 11's figure (the atlas's cells)


@pytest.mark.slow
def test_edge_figure_reads_with_every_method_of_the_registry(kept, tmp_path):  # noqa: F811
  """Nine methods on the rows of five predictor panels, the long settings line in the title: nothing overprints. A
  method whose λ₀ is negative (Post-LN + BERT 0.02's batch sharpness in the cpu run) or missing has its row say so."""
  names = ["Post-LN + Xavier", "Post-LN + BERT 0.02", "Pre-LN", "T-Fixup", "ReZero", "scheduled α", "DeepNorm",
           "Admin", "DS-Init"]  # fmt: skip
  runs, lam0 = [], {}
  for i, method in enumerate(names):
    lam0[method] = {p: 10.0 * (i + 1) * (19.0 if p == "adam" else 1.0) for p in edge.PREDICTORS}
    for lr in (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2):
      bad = lr * 10.0 * (i + 1) > 0.2
      runs += [dict(method=method, lr=lr, warmup=0, seed=s, early="unstable" if bad else "stable", final=None)
               for s in (0, 1)]  # fmt: skip
  lam0["Post-LN + BERT 0.02"]["batch"] = -0.21
  del lam0["T-Fixup"]["update"]
  m = dict(
      runs=runs,
      lam0=lam0,
      flagged={"ReZero": ["adam"]},
      thresholds={p: edge.threshold(p, 0.9) for p in edge.PREDICTORS},
      scores={"early": {p: {"auc": 0.9} for p in edge.PREDICTORS}},
  )
  assert edge_report.figure(m, None, str(tmp_path), LONG_SETTINGS) == ["edge.png"]
  (fig,) = kept
  assert all(ax.get_xscale() == "log" for ax in fig.axes)
  notes = {p: [t.get_text() for t in ax.texts] for ax, p in zip(fig.axes, edge.PREDICTORS)}
  assert notes["batch"] == ["λ₀ = -0.21 ≤ 0: every η predicted stable"] and notes["update"] == ["no λ₀"]
  assert not notes["gd"] and not notes["adam"] and not notes["ggn"]
  row = sorted(names).index("Post-LN + BERT 0.02")  # the rows in order of name
  batch = fig.axes[edge.PREDICTORS.index("batch")]
  assert all(row not in line.get_ydata() for line in batch.lines if len(line.get_ydata()) == 1)  # no marker there
  assert_readable(fig)


def _depth_measured():
  """Study 13's measurements as claim.json holds them: three arms at 2–16 layers per stack, a 7-lr factor-2 grid
  (1.25e-3 to 8e-2), two seeds; one run at the largest lr did not train."""
  lrs = [1.25e-3 * 2**k for k in range(7)]
  runs, optima = {}, {}
  for i, arm in enumerate(("SP", "CompleteP", "Depth-µP")):
    depths = (2, 16) if arm == "Depth-µP" else (2, 4, 8, 16)
    runs[arm] = {
        str(L): {
            f"{lr:g}": [dict(seed=s, cls="trained" if k < 6 or s else "diverged",
                             final_loss=None if k == 6 and not s else 3.6 + 0.1 * (k - 3) ** 2 + 0.01 * L + 0.01 * s)
                        for s in (0, 1)]  # fmt: skip
            for k, lr in enumerate(lrs)
        }
        for L in depths
    }
    optima[arm] = {str(L): {"lr": 1.2e-2 * (1 + 0.05 * i) * L**-0.1, "edge": False} for L in depths}
  shifts = {"SP": [-0.218, -0.423, -0.0758], "CompleteP": [-0.425, -0.609, -0.288], "Depth-µP": [0.248, 0.0753, 0.363],
            "|CompleteP| − |SP|": [0.207, -0.0678, 0.461], "|Depth-µP| − |SP|": [0.03, -0.282, 0.225]}  # fmt: skip
  sharpness = {a: {str(L): dict(mean=12.0 * L**e, std=0.5 * L**e, seeds=[11.5 * L**e, 12.5 * L**e], max=30.0 * L**e)
                    for L in ((2, 16) if a == "Depth-µP" else (2, 4, 8, 16))}
               for a, e in (("SP", 0.4), ("CompleteP", 0.1), ("Depth-µP", 0.0))}  # fmt: skip
  slopes = {"SP": [0.4, 0.31, 0.49], "CompleteP": [0.1, 0.01, 0.19], "Depth-µP": [0.0, -0.12, 0.12]}
  return dict(crashed=[], depths=[2, 4, 8, 16], runs=runs, optima=optima, shifts=shifts, ref_lr=[1e-2],
              sharpness=sharpness, slopes=slopes)  # fmt: skip


def test_depth_figure_labels_each_lr_of_the_grid_and_fits_its_titles(kept, tmp_path):  # noqa: F811
  """Study 13's figure (it once overprinted its lr axes' minor labels and cut panel (d)'s title at the right edge):
  the grid's lrs each labelled once, log axes, nothing overprinted or cut, the arms' legend clear of the data."""
  from experiments.claims import depth  # noqa: PLC0415

  assert depth.figure(_depth_measured(), None, str(tmp_path), LONG_SETTINGS) == ["depth.png"]
  (fig,) = kept
  assert_readable(fig)
  loss_panels = [
      ax for ax in fig.axes if ax.get_xscale() == "log" and ax.get_yscale() == "log" and "loss" in ax.get_title()
  ]
  assert len(loss_panels) == 3
  for ax in loss_panels:
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels == ["1.25e-3", "2.5e-3", "5e-3", "1e-2", "2e-2", "4e-2", "8e-2"], labels
  (optima,) = [ax for ax in fig.axes if ax.get_xscale() == "log" and "optimal lr" in ax.get_title()]
  low, high = optima.get_ylim()
  shown = [
      t for t, label in zip(optima.get_yticks(), optima.get_yticklabels()) if low <= t <= high and label.get_text()
  ]
  assert len(shown) >= 3, shown  # the optima span 0.15 decades: round values between, not a lone 1e-2
  (sharp,) = [ax for ax in fig.axes if "sharpness vs depth" in ax.get_title()]  # the reported sharpness, log-log
  assert sharp.get_xscale() == sharp.get_yscale() == "log" and len(sharp.get_legend().get_texts()) == 3
  for ax in loss_panels:  # the losses span 0.2 decades: at least 3 labelled values
    low, high = ax.get_ylim()
    assert sum(low <= t <= high and bool(lab.get_text()) for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())) >= 3


@pytest.mark.slow
def test_width_figure_reads(kept, tmp_path):  # noqa: F811
  """Study 12's figure on hand-made runs (tests/test_claim_width.py's: µP flat, SP's sharpness growing with d and
  its optimum moving a grid step per width doubling; NTK and the embedding arm between): log axes, the grid's lrs
  each labelled, nothing overprinted."""
  from experiments.claims import width  # noqa: PLC0415
  from tests.test_claim_width import _fake_sweep  # noqa: PLC0415

  arms = ((width.MU, 0.0, 0.0), (width.SP, 1.0, -1.0), (width.NTK, 0.5, 0.0), (width.EMB, 0.5, -0.5))
  m = width.measure(_fake_sweep(tmp_path, arms=arms))  # the cpu design's four arms, their names as long as there
  assert width.figure(m, None, str(tmp_path), LONG_SETTINGS) == ["width.png"]
  (fig,) = kept
  assert_readable(fig)
  loss_panels = [ax for ax in fig.axes if "final loss vs lr" in ax.get_title()]
  assert loss_panels and all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in loss_panels)
  for ax in loss_panels:
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels == [figure_kit.short_e(2.0**k) for k in range(-12, -5)], labels
