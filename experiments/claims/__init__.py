"""The studies: the papers' claims and the atlas's questions, one module each (`CLAIM = study.Study(...)`, listed in
experiments/registry.py), and `shared/`, the rules several studies share. A study imports no other study
(tests/test_study_imports.py); it is run by experiments/run.py.

    python main.py --config=configs/claims/warmup.py:cpu --config.data.dir=<folder with Multi30k's .gz files>
    python main.py --config=configs/claims/identity_path.py:tiny          # seconds, on the synthetic task
"""
