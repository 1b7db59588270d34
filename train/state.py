"""The train state: one pytree holding everything a resumed run needs to continue bitwise.

`TrainState(step, params, opt_state, variables, rng)`: `variables` holds the model's non-parameter collections
(e.g. the scheduled residual's α, which is state, not a learned parameter); `rng` is the run's base key, from
which every step derives its own with `jax.random.fold_in(rng, step)`.
"""

from typing import Any

import flax.struct
import jax


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
