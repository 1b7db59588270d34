"""Logical axes of the parameters: the names every parameter declares where it is created, and how to read them.

Every parameter of the model is created through an initializer wrapped by `models.roles.declare`: Flax's logical
partitioning metadata (an `nn.LogicallyPartitioned` box, as in the Flax lm1b/wmt examples and MaxText) that also
carries the parameter's role. Each of its axes is named with one of `LOGICAL_AXES`:

| parameter                                  | shape      | logical axes                 |
|--------------------------------------------|------------|------------------------------|
| token embedding                            | [V, D]     | ("vocab", "embed")           |
| learned positions                          | [L, D]     | ("position", "embed")        |
| attention query / key / value kernel       | [D, H, K]  | ("embed", "heads", "kv")     |
| attention query / key / value bias         | [H, K]     | ("heads", "kv")              |
| attention output kernel / bias             | [H, K, D]  | ("heads", "kv", "embed") / ("embed",) |
| MLP in kernel / bias                       | [D, F]     | ("embed", "mlp") / ("mlp",)  |
| MLP out kernel / bias                      | [F, D]     | ("mlp", "embed") / ("embed",) |
| untied readout kernel / bias               | [D, V]     | ("embed", "vocab") / ("vocab",) |
| MLM transform kernel / bias                | [D, D]     | ("embed", "hidden") / ("hidden",) |
| MLM output bias                            | [V]        | ("vocab",)                   |
| norm scale and bias, Admin's ω             | [D]        | ("embed",)                   |
| ReZero / SkipInit α                        | []         | ()                           |

The parameter pytree the project sees stays plain arrays: `Transformer.init` strips the metadata (`nn.unbox`), so
init schemes, roles, Hessians and checkpoints never meet a box. `logical_axes(model)` reads the names back, without
computing anything (`jax.eval_shape`), as a pytree of `PartitionSpec`s of logical names shaped like the params;
`train.step` maps them to mesh axes with the rules of `config.mesh`.
"""

from typing import Any

import flax.linen as nn

from models import roles

LOGICAL_AXES = ("vocab", "position", "embed", "heads", "kv", "mlp", "hidden")


def logical_axes(model: Any) -> Any:
  """The logical `PartitionSpec` of every parameter of `model`, as a pytree shaped like its `params`.

  Args:
    model: a `models.Transformer` or its `ModelConfig` (with `vocab_size` set).

  Returns:
    A pytree like `params` whose leaves are `jax.sharding.PartitionSpec`s of names from `LOGICAL_AXES`, one entry
    per axis of the parameter (P() for a scalar). Read from the boxes of the abstract init `models.roles` traces
    once per config for the roles (`roles.boxed_param_shapes`), so it computes and traces nothing more.
  """
  return nn.get_partition_spec(roles.boxed_param_shapes(getattr(model, "config", model)))
