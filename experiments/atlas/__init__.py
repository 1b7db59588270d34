"""The learning-rate × warmup × step-0 curvature atlas (issue 15) over the sweep layer.

    python -m experiments.atlas --config=configs/atlas.py:cpu --config.data.dir=<Multi30k folder> --workdir=runs/atlas

`cells` reads the atlas config into its two sweeps (the at-init arms, the training grid by method, warmup and lr);
`measures` holds the rules, the predictions and their thresholds (pure functions, fixed before any run); `collect`
reads the sweeps' folders and measures them; `figures` and `report` write reports/ATLAS.md; `run` is the resumable
driver (`__main__` its command line). Above `experiments.sweep`; imported by nothing but its command line and tests.
"""
