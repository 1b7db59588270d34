"""Training: data, loss, optimizers, the sharded jitted step, checkpoints, metrics and the loop.

Public entry points: `train.make_loss_fn(model, variables=None)` (the loss the analyses differentiate),
`train.loop.setup(config, workdir)`, `train.loop.train_and_evaluate(experiment)`.
"""

from train.loss import make_loss_fn

__all__ = ["make_loss_fn"]
