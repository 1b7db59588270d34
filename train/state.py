"""The train state: one pytree holding everything a resumed run needs to continue bitwise.

`TrainState(step, params, opt_state, variables, rng)`: `variables` holds the model's non-parameter collections
(e.g. the scheduled residual's α, which is state, not a learned parameter); `rng` is the run's base key, from
which every step derives its own with `jax.random.fold_in(rng, step)`.

`params` are the parameters the train step differentiates at; `eval_variables()` gives the ones to evaluate, the same
except under schedule-free learning, whose evaluation point x is derived from `params` (y) and the optimizer's z
(`train.schedule_free`).
"""

from typing import Any

import flax.struct
import jax

from train.schedule_free import eval_params


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: Any
  opt_state: Any
  variables: Any
  rng: jax.Array

  def model_variables(self) -> dict:
    """The `variables` argument of `model.apply`."""
    return {"params": self.params, **self.variables}

  def eval_variables(self) -> dict:
    """The `variables` of `model.apply` for evaluation and decoding: `model_variables()` with the parameters to
    evaluate (`train.schedule_free.eval_params`: x under schedule-free learning, `params` otherwise)."""
    return {"params": eval_params(self.opt_state, self.params), **self.variables}
