"""Does Post-LN need warmup where Pre-LN does not (Xiong et al. 2020, Fig. 2)? A laptop-sized sweep: warmup 0 vs
100 steps × Post-LN vs Pre-LN on configs/xavier_postln.py's settings (Xavier init, Adam, linear warmup), the `mini`
preset on the embedded translation task, 300 steps at a learning rate high enough for warmup to matter.

    python main.py --config=configs/sweeps/warmup.py --config.sweep.seeds=3
    python main.py --config=configs/sweeps/warmup.py --config.sweep.grid='optim.warmup_steps=0,50,200'

Outputs in runs/warmup/ (or --workdir): results.jsonl, results.md, curves.png, final_metric.png, cells/.
"""

from configs import xavier_postln


def get_config():
  config = xavier_postln.get_config()
  config.mode = "sweep"
  config.model.preset = "mini"
  config.optim.learning_rate = 3e-3
  config.data.batch_size = config.data.eval_batch_size = 32
  config.data.embedded.num_train, config.data.embedded.num_eval = 10_000, 256
  t = config.train
  t.num_steps, t.log_every, t.eval_every, t.checkpoint_every = 300, 20, 100, 100
  t.num_decode_examples = 64
  config.sweep.grid = "optim.warmup_steps=0,100;model.norm_position=post,pre"
  config.sweep.seeds = 2
  config.sweep.metric = "eval/loss"
  return config
