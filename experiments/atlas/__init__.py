"""The learning-rate × warmup × step-0 curvature atlas (issue 15) over the sweep layer.

    python main.py --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas

`cells` reads the atlas config into its two first sweeps (the at-init arms, the training grid by method, warmup and
lr); `axes` into the axis parts' sweeps (trace, width, depth, transfer: `config.atlas.<part>`); `measures` and
`axis_measures` hold the rules, the predictions and their thresholds (pure functions, fixed before any run);
`collect` and `axis_collect` read the sweeps' folders and measure them; `figures`, `axis_figures`, `report` and
`axis_report` write reports/ATLAS.md; `edge` holds issue 28's cell-by-cell rules (early and final outcomes per
cell, each step-0 predictor's threshold, the scores against the lr alone and the majority class, the warmup-rescue
question; fixed before its runs); `run` is the resumable driver, main.py's atlas mode (`atlas.parts`: the parts to run). Above `experiments.sweep`; imported by
main.py and the tests.
"""
