"""experiments/atlas/length.py: the training-length probe's gap curve, step count and config."""

from configs import atlas
from experiments import grid as grid_lib
from experiments.atlas import length


def test_steps_needed_is_where_the_gap_stays_within_the_margin():
  post = {100: 5.0, 200: 4.1, 300: 3.9, 400: 3.75, 500: 3.7}
  pre = {100: 4.0, 200: 3.8, 300: 3.8, 400: 3.6, 500: 3.6, 600: 3.5}  # 600: Post-LN has no eval there
  curve = length.gap_curve(post, pre)
  assert [t for t, _ in curve] == [100, 200, 300, 400, 500]
  assert [round(g, 6) for _, g in curve] == [1.0, 0.3, 0.1, 0.15, 0.1]
  assert length.steps_needed(curve) == 300
  # A gap that opens again resets the count; one that never closes gives None.
  assert length.steps_needed([(1, 0.1), (2, 0.5), (3, 0.2), (4, 0.05)]) == 3
  assert length.steps_needed([(1, 0.3), (2, 0.25)]) is None and length.steps_needed([]) is None


def test_probe_config_is_the_two_arms_at_the_probe_lr():
  config = length.probe_config(atlas.get_config("cpu"))
  cells = grid_lib.cells(config)
  assert [c.name for c in cells] == [
      "model.norm_position=post__init.scheme=xavier__optim.warmup_steps=20",
      "model.norm_position=pre__init.scheme=xavier__optim.warmup_steps=0",
  ]
  assert config.optim.learning_rate == 1e-3 and config.sweep.seeds == 1 and not config.sweep.analysis_at_init
  assert (config.train.num_steps, config.train.eval_every, config.train.checkpoint_every) == (2000, 100, 500)


def test_markdown_and_figure_state_the_probe(tmp_path):
  m = {
      "curve": [(100, 1.0), (200, 0.3), (300, 0.1)],
      "steps_needed": 300,
      "post": [(100, 5.0), (200, 4.1), (300, 3.9)],
      "pre": [(100, 4.0), (200, 3.8), (300, 3.8)],
      "steps": 400,
      "lr": 1e-3,
      "warmup": 20,
      "close": 0.2,
  }
  text = length.markdown(m, grid_steps=200)
  assert "300 of 400 steps evaluated (running)" in text and "within 0.2 nats from step 300" in text
  assert "at the grid's 200 steps it is +0.300 nats" in text
  assert "never stayed" in length.markdown({**m, "steps_needed": None}, grid_steps=200)
  assert length.markdown(None, 200).startswith("Training-length probe: not run yet")
  assert (tmp_path / "length_probe.png").exists() is False
  path = length.figure(m, str(tmp_path))
  assert path.endswith("length_probe.png") and (tmp_path / "length_probe.png").stat().st_size > 10_000
