"""Logical axes of the parameters: the names every parameter declares where it is created, and how to read them.

Every parameter is created through an initializer wrapped by `models.roles.declare`: Flax's logical partitioning
metadata (`nn.LogicallyPartitioned`, as in Flax lm1b/wmt and MaxText) carrying its role and one of `LOGICAL_AXES` per
axis:

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

The parameter pytree stays plain arrays (`Transformer.init` strips the metadata with `nn.unbox`), so init schemes,
Hessians and checkpoints never meet a box. `models.inventory.logical_axes(model)` reads the names back as a pytree of
`PartitionSpec`s (`jax.eval_shape`: nothing computed); `train.step` maps them to mesh axes by `config.mesh`'s rules.
"""

LOGICAL_AXES = ("vocab", "position", "embed", "heads", "kv", "mlp", "hidden")
