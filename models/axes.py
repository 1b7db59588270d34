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
init schemes, roles, Hessians and checkpoints never meet a box. `models.inventory.logical_axes(model)` reads the names
back, without computing anything (`jax.eval_shape`), as a pytree of `PartitionSpec`s of logical names shaped like the
params; `train.step` maps them to mesh axes with the rules of `config.mesh`. This module only names the axes, so it
sits at the bottom of `models/` with `models.roles`.
"""

LOGICAL_AXES = ("vocab", "position", "embed", "heads", "kv", "mlp", "hidden")
