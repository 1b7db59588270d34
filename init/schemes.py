"""Whole-model initialization schemes: a parameter's role (models.param_roles) + the ModelConfig -> an initializer.

Contract: `get_scheme(name)` returns a `Scheme`; `scheme.rule(role, model_config, hparams)` returns the `Rule`
(a name in `init.initializers.INITIALIZERS` plus its hyper-parameters) for one parameter, and
`scheme.target_std(...)` the std that rule realizes (0 for constants), so tests compare a built model with the
papers' tables. Rules depend only on `ParamRole` fields (role, stack, layer, sublayer, fans), never on paths;
`scheme.procedure` names a post-init procedure of `init.procedures` (Admin's profiling pass) or is None.

Shared by every scheme: norm gains 1, norm biases and all dense/MLM biases 0; DyT's / Derf's α and s as the model
creates them (`models.norms.alpha_init`, `model.derf_shift_init`); residual scalars and vectors as the model itself
initializes them (`residual_scale_rule`: ReZero α = 0, SkipInit α = model.skipinit_alpha, LayerScale λ = ε, Admin
ω = 1 before profiling). The `head` role covers the untied readout (sublayer "head") and BERT's MLM transform
(sublayer "mlm_transform", a d×d hidden matrix, treated as a hidden projection). "d^{-1/2}" is d_model^{-1/2}.

The per-role targets (realized std; Xavier = √(2/(fan_in+fan_out)), fans of `ParamRole`), each with its paper, are
the docstrings of the rule functions below (`_xavier`, `_bert`, …; docs/science.md §1–7). Every scheme but ntk and mup
requires parameterization='standard': a parameterization fixes its init table.

Gates: the third matrices of the decoder-LM blocks (`models.blocks.gate_roles`: `mlp_gate`, a gated MLP's W;
`attn_gate`, gated attention's W_θ) take each scheme's rule for their role, a d → d_ff or d → H·d_k input projection
like mlp_in and W_k (t5: fan_in^{-1/2}, T5.1.1's wi_0 and wi_1 alike; dsinit: its α/√l; mitchell: 1/√d, OLMo's fused
ff_proj; mup: hidden, N(0, 1/fan_in)). tfixup, deepnet and fixup refuse them (`Scheme.gates`): their depth factors
are solved for a branch whose signal path is a product of two matrices (W_v·W_o, W₁·W₂), and a gate makes it three
(the gated MLP) or multiplies it by a learned σ(·) (gated attention); the papers give no factor for that branch.
"""

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional

from configs import schema
from configs.schema import Section, contradiction, invalid
from init import initializers
from init.math import deepnorm_constants, dsinit_bound, fixup_scale, tfixup_scales
from models import ModelConfig, ParamRole
from models.blocks import gate_roles
from models.norms import alpha_init
from models.residual import layerscale_init

AUTO = schema.AUTO  # init.scheme derived from the model config (`derived_scheme`)
KERNEL_ROLES = ("attn_q", "attn_k", "attn_v", "attn_out", "attn_gate", "mlp_in", "mlp_gate", "mlp_out")
GATE_ROLES = ("attn_gate", "mlp_gate")
# Why the two-matrix depth schemes refuse a third matrix (module docstring; `Scheme.gates`).
_TWO_MATRIX = (
    "{paper} is solved for a branch whose signal path is two matrices, and a gate (model.mlp='swiglu'/'geglu', "
    "model.attention_gate) adds a third matrix the paper gives no factor for"
)


class Rule(NamedTuple):
  """One parameter's initializer: a key of `init.initializers.INITIALIZERS` and its hyper-parameters."""

  initializer: str
  hparams: tuple[tuple[str, Any], ...] = ()

  def make(self) -> initializers.Initializer:
    return initializers.get_initializer(self.initializer, **dict(self.hparams))

  def std(self, role: ParamRole) -> float:
    return initializers.realized_std(self.initializer, fan_in=role.fan_in, fan_out=role.fan_out, **dict(self.hparams))


def _r(name: str, **hparams) -> Rule:
  return Rule(name, tuple(sorted(hparams.items())))


def residual_scale_rule(mc: ModelConfig, stack: str = "decoder") -> Rule:
  """The model's own init of its residual scalars and vectors in `stack` (models.residual.Residual), so schemes leave
  them as is."""
  if mc.residual == "layerscale":  # Touvron et al. 2021 §2.2: ε by the stack's depth
    return _r("constant", value=layerscale_init(mc, stack))
  if mc.residual == "rezero":
    return _r("zeros")
  if mc.residual == "skipinit":
    return _r("constant", value=mc.skipinit_alpha)
  if mc.residual == "admin":
    return _r("ones")  # ω = 1 before Admin's profiling pass
  raise ValueError(f"model.residual={mc.residual!r} has no residual_scale parameters")


def _fixed_rule(role: ParamRole, mc: ModelConfig) -> Optional[Rule]:
  if role.role == "norm_scale":
    return _r("ones")
  if role.role == "norm_alpha":  # DyT's / Derf's α₀, as the model creates it (models.norms.alpha_init)
    return _r("constant", value=alpha_init(mc, role.sublayer))
  if role.role == "norm_shift":  # Derf's s₀
    return _r("constant", value=mc.derf_shift_init)
  if role.role in ("norm_bias", "bias"):
    return _r("zeros")
  if role.role == "residual_scale":
    return residual_scale_rule(mc, role.stack)
  return None


def _is_readout(role: ParamRole) -> bool:
  return role.role == "head" and role.sublayer == "head"


def residual_layers(mc: ModelConfig, stack: str) -> int:
  """Residual branches in a stack: self-attention + MLP per layer, plus cross-attention in an enc-dec decoder."""
  per_layer = 3 if (stack == "decoder" and mc.arch == "encoder_decoder") else 2
  return per_layer * mc.num_layers(stack)


def _embedding_std(mc: ModelConfig) -> float:
  return mc.d_model**-0.5


# --- per-scheme matrix rules: (role, model config, hparams) -> Rule, for embedding/position/kernels/head ---


def _xavier(role, mc, hp) -> Rule:
  """xavier (Glorot & Bengio 2010, Eq. 16): every kernel and the untied head xavier_uniform; token and learned position
  embeddings N(0, d^{-1/2}) — fairseq's and Vaswani et al.'s embedding init (the Post-LN/Pre-LN Hessian experiment of
  Zhang & Mackey 2022, docs/science.md §9, ran fairseq), because a Xavier table [V, d] would make the tied readout
  depend on V.
  """
  if role.role in ("embedding", "position"):
    return _r("normal", std=_embedding_std(mc))
  return _r("xavier_uniform")


def _bert(role, mc, hp) -> Rule:
  """bert (Devlin et al. 2019, `initializer_range`): truncated_normal_tf(std=0.02) for every matrix incl. the
  embeddings, positions, MLM transform and head: realized 0.8796·0.02 = 0.017593.
  """
  return _r("truncated_normal_tf", std=hp["std"])


def _t5(role, mc, hp) -> Rule:
  """t5 (Raffel et al. 2020; Mesh TF; docs/science.md §4): N(0, ·) with W_q (d·d_k)^{-1/2}, W_k, W_v d^{-1/2}, W_o
  (H·d_k)^{-1/2}, mlp_in d^{-1/2}, mlp_out d_ff^{-1/2}, embeddings/positions 1.0, untied head and MLM transform
  fan_in^{-1/2} (Mesh TF's dense default). Meant for attention_logit_scale='none' (the 1/√d_k sits in W_q) and
  tied_readout_scale='rsqrt_d'; neither is forced.
  """
  if role.role in ("embedding", "position"):
    return _r("normal", std=1.0)
  if role.role == "attn_q":
    return _r("normal", std=(mc.d_model * mc.qkv_head_dim) ** -0.5)
  # k, v, o, mlp_in, mlp_out, head: all std fan_in^{-1/2} (d, d, H·d_k, d, d_ff, d).
  return _r("normal", std=role.fan_in**-0.5)


def _gpt2(role, mc, hp) -> Rule:
  """gpt2 (Radford et al. 2019, §2.3; nanoGPT): N(0, 0.02²) for every matrix; the residual-output projections attn_out
  (self and cross) and mlp_out × 1/√R, R = the number of residual layers of that stack (the paper's "N residual layers";
  2·layers, 3·layers for the decoder of an encoder-decoder, which has cross-attention).

  megatron (Shoeybi et al. 2019, Megatron-LM's `init_method_normal(σ)` and `scaled_init_method_normal(σ, L)` = σ/√(2L)
  on the output projections): an alias of gpt2, the same rule (`_gpt2`). Decoder-only and encoder stacks have 2L
  branches, so σ/√(2L) is GPT-2's 1/√R; in an encoder-decoder's decoder the project counts the cross-attention branch (R
  = 3L) where Megatron's T5 code keeps 2·num_layers.
  """
  std = hp["std"]
  if role.role in ("attn_out", "mlp_out"):
    # GPT-2 §2.3: "scale the weights of residual layers at initialization by 1/√N, N the number of residual
    # layers" — each branch adds its variance to the stream, so R branches sum to the variance of one.
    std /= math.sqrt(residual_layers(mc, role.stack))
  return _r("normal", std=std)


def _tfixup_factors(mc: ModelConfig) -> dict[str, float]:
  n = mc.num_encoder_layers if "encoder" in mc.stacks else mc.num_decoder_layers
  m = mc.num_decoder_layers if "decoder" in mc.stacks else mc.num_encoder_layers
  scales = tfixup_scales(n, m)
  return {"encoder": scales["encoder"], "decoder": scales["decoder"], "embedding": scales["decoder"]}


def _tfixup(role, mc, hp) -> Rule:
  """tfixup (Huang et al. 2020, §3 "T-Fixup" initialization steps; docs/science.md §7): xavier's table; then in the
  decoder attn_v, attn_out (self and cross), mlp_in, mlp_out × (9M)^{-1/4}, in the encoder the same roles ×
  0.67·N^{-1/4}, and the input embeddings × (9M)^{-1/4}. "N(0, d^{-1/2})" is read as std d^{-1/2}: T-Fixup is built on
  fairseq, whose Embedding draws `normal_(std=d**-0.5)` (a variance d^{-1/2} would be std d^{-1/4}, an init nobody
  uses). The token table is shared by encoder and decoder, so it takes the decoder's factor (public T-Fixup code scales
  it by the decoder depth); an encoder-only model uses its own depth in (9N)^{-1/4}, the literal reading of step 3
  ("input embeddings x and y ... by (9N)^{-1/4}").
  """
  factors = _tfixup_factors(mc)
  if role.role == "embedding":
    return _r("normal", std=_embedding_std(mc) * factors["embedding"])
  if role.role in ("attn_v", "attn_out", "mlp_in", "mlp_out"):
    return _r("xavier_uniform", gain=factors[role.stack])
  return _xavier(role, mc, hp)


def _dsinit(role, mc, hp) -> Rule:
  """dsinit (Zhang, Titov & Sennrich 2019, §3 "Depth-Scaled Initialization"): every kernel of layer l (1-based, per
  stack) U(±γα/√l), γ = √(6/(fan_in+fan_out)): realized xavier·α/√l. Embeddings and head as xavier.
  """
  if role.role in KERNEL_ROLES:
    return _r("uniform", bound=dsinit_bound(role.fan_in, role.fan_out, role.layer + 1, hp["dsinit_alpha"]))
  return _xavier(role, mc, hp)


def _deepnet(role, mc, hp) -> Rule:
  """deepnet (Wang et al. 2022, Fig. 2 pseudo-code): xavier_normal with gain β_stack (`deepnorm_constants`) for attn_v,
  attn_out, mlp_in, mlp_out; gain 1 for attn_q, attn_k, head, MLM transform; embeddings N(0, d^{-1/2}). Requires
  model.residual='deepnorm' (the model applies α).
  """
  if role.role in ("embedding", "position"):
    return _r("normal", std=_embedding_std(mc))
  if role.role in ("attn_v", "attn_out", "mlp_in", "mlp_out"):
    beta = deepnorm_constants(mc.arch, mc.num_encoder_layers, mc.num_decoder_layers)[role.stack][1]
    return _r("xavier_normal", gain=beta)
  return _r("xavier_normal")


def _fixup(role, mc, hp) -> Rule:
  """fixup (Zhang, Dauphin & Ma 2019, §3 rules 1-2), adapted: each residual branch has m = 2 matrices on its signal path
  — W_v then W_o for attention (W_q, W_k only shape the softmax weights), mlp_in then mlp_out. The last (attn_out,
  mlp_out) and the untied classifier start at 0; attn_v and mlp_in are xavier × L^{-1/2} (`fixup_scale(L, 2)`), L =
  residual branches of that stack. A tied head is the token table and cannot be zeroed; Fixup's scalar
  multipliers/biases are not added (use residual='rezero'/'skipinit' for those).
  """
  if role.role in ("attn_out", "mlp_out") or _is_readout(role):
    return _r("zeros")
  if role.role in ("attn_v", "mlp_in"):
    return _r("xavier_uniform", gain=fixup_scale(residual_layers(mc, role.stack), 2))
  return _xavier(role, mc, hp)


def _mitchell(role, mc, hp) -> Rule:
  """mitchell (Groeneveld et al. 2024, OLMo 1's `init_fn='mitchell'`, olmo/initialization.py and the blocks'
  `reset_parameters`): every matrix truncated_normal_3sigma (N(0, σ²) cut at ±3σ, realized 0.98658·σ) with σ = 1/√d for
  the token and position embeddings, the untied head, the MLM transform, W_q, W_k, W_v (OLMo's fused `att_proj`), mlp_in
  and mlp_gate (its fused `ff_proj`, gate and value halves alike) and attn_gate (an input projection like `att_proj`;
  OLMo has none); σ = 1/√(2·d·(l+1)) for attn_out (OLMo's `attn_out`, d = d_model) and σ = 1/√(2·d_ff·(l+1)) for mlp_out
  (`ff_out`, d = its fan-in), l the 0-based layer in its stack.
  """
  if role.role == "attn_out":
    return _r("truncated_normal_3sigma", std=(2.0 * mc.d_model * (role.layer + 1)) ** -0.5)
  if role.role == "mlp_out":
    return _r("truncated_normal_3sigma", std=(2.0 * mc.d_ff * (role.layer + 1)) ** -0.5)
  return _r("truncated_normal_3sigma", std=mc.d_model**-0.5)


def _olmo2(role, mc, hp) -> Rule:
  """olmo2 (OLMo Team 2025, "2 OLMo 2 Furious", §3 "Initialization"): every matrix, embeddings included,
  truncated_normal_3sigma(init.std = 0.02): realized 0.98658·0.02 = 0.019732, no depth or width factor.
  """
  return _r("truncated_normal_3sigma", std=hp["std"])


def _small_init(role, mc, hp) -> Rule:
  """small_init (Nguyen & Salazar 2019, "Transformers without Tears", §2; GPT-NeoX's `small_init`): every matrix,
  embeddings included, N(0, 2/(5d)) — Xavier's 2/(fan_in + fan_out) of a d×4d FFN matrix, applied everywhere.
  """
  return _r("normal", std=math.sqrt(2.0 / (5.0 * mc.d_model)))


def _ntk(role, mc, hp) -> Rule:
  """ntk (Jacot et al. 2018; Park et al. 2019; docs/science.md §3): every matrix incl. embeddings N(0, 1); the model's
  1/√fan_in multipliers give the SP function. Requires parameterization='ntk'.
  """
  return _r("normal", std=1.0)


def _mup(role, mc, hp) -> Rule:
  """mup (Yang et al. 2022, Tensor Programs V, Table 3 in the `mup` package's readout-multiplier form): hidden matrices
  (attn_*, mlp_*, MLM transform) N(0, 1/fan_in); embeddings/positions N(0, 1); untied readout 0 if `mup_readout_zero`
  else N(0, 1/fan_in); W_q 0 if `mup_query_zero` (TP5 App. D.2 recommends both zero inits). A tied readout is the
  embedding and keeps N(0, 1). Requires parameterization='mup'.
  """
  if role.role in ("embedding", "position"):
    return _r("normal", std=1.0)
  if _is_readout(role):
    return _r("zeros") if hp["mup_readout_zero"] else _r("lecun_normal")
  if role.role == "attn_q" and hp["mup_query_zero"]:
    return _r("zeros")
  return _r("lecun_normal")


# --- registry ---


@dataclasses.dataclass(frozen=True)
class InitConfig(Section):
  """The `config.init` subtree: the scheme and the hyper-parameters schemes read (`Scheme.hparams`). The defaults
  equal configs/default.py's (tests/test_config.py), so library code can write `InitConfig(scheme="admin")`."""

  KEY = "init"
  scheme: str = "auto"
  std: float = 0.02
  dsinit_alpha: float = 1.0
  mup_readout_zero: bool = True
  mup_query_zero: bool = True

  def __post_init__(self):
    if self.scheme != AUTO and self.scheme not in SCHEMES:
      raise invalid("init.scheme", self.scheme, sorted(SCHEMES) + [AUTO])
    if not (math.isfinite(self.std) and self.std > 0):
      raise invalid("init.std", self.std, "a finite number > 0")
    if not 0.0 < self.dsinit_alpha <= 1.0:
      raise invalid("init.dsinit_alpha", self.dsinit_alpha, "a number in (0, 1]")

  def hparams(self, scheme: "Scheme") -> dict[str, Any]:
    """The hyper-parameters `scheme` reads."""
    return {k: getattr(self, k) for k in scheme.hparams}


class Scheme(NamedTuple):
  """A registered scheme. `requires` maps ModelConfig fields to the values the scheme makes sense with."""

  name: str
  matrix_rule: Callable[[ParamRole, ModelConfig, Mapping[str, Any]], Rule]
  hparams: tuple[str, ...] = ()
  requires: tuple[tuple[str, tuple[str, ...]], ...] = (("parameterization", ("standard",)),)
  procedure: Optional[str] = None
  gates: Optional[str] = None  # None: the rule covers GATE_ROLES; else why the scheme refuses them

  def rule(self, role: ParamRole, mc: ModelConfig, hparams: Mapping[str, Any]) -> Rule:
    """The initializer rule of one parameter (the rule functions' docstrings give the per-role table)."""
    if self.gates is not None and role.role in GATE_ROLES:
      raise ValueError(f"init.scheme={self.name!r} has no rule for the role {role.role!r}: {self.gates}")
    fixed = _fixed_rule(role, mc)
    return fixed if fixed is not None else self.matrix_rule(role, mc, hparams)

  def target_std(self, role: ParamRole, mc: ModelConfig, hparams: Mapping[str, Any]) -> float:
    """The std the rule realizes for this parameter (0 for constants)."""
    return self.rule(role, mc, hparams).std(role)

  def check_model(self, mc: ModelConfig) -> None:
    """Raises ValueError (naming init.scheme and the model key) if the model config is one this scheme makes no
    sense with."""
    if mc.parameterization in ("ntk", "mup") and self.name != mc.parameterization:
      raise contradiction(
          "init.scheme",
          self.name,
          "model.parameterization",
          mc.parameterization,
          f"the parameterization fixes the init table; valid: init.scheme={mc.parameterization!r} " "or 'auto'",
      )
    if self.gates is not None and gate_roles(mc):
      key, value = ("model.mlp", mc.mlp) if "mlp_gate" in gate_roles(mc) else ("model.attention_gate", True)
      raise contradiction("init.scheme", self.name, key, value, f"{self.gates}; valid: a gate-free model")
    for field, allowed in self.requires:
      value = getattr(mc, field)
      if value not in allowed:
        raise contradiction(
            "init.scheme", self.name, f"model.{field}", value, f"the scheme needs model.{field} in {list(allowed)}"
        )


SCHEMES: dict[str, Scheme] = {
    "xavier": Scheme("xavier", _xavier),
    "bert": Scheme("bert", _bert, hparams=("std",)),
    "t5": Scheme("t5", _t5),
    "gpt2": Scheme("gpt2", _gpt2, hparams=("std",)),
    "tfixup": Scheme(
        "tfixup", _tfixup, gates=_TWO_MATRIX.format(paper="T-Fixup's (9N)^(-1/4) (Huang et al. 2020, §3)")
    ),
    "dsinit": Scheme("dsinit", _dsinit, hparams=("dsinit_alpha",)),
    "deepnet": Scheme(
        "deepnet",
        _deepnet,
        requires=(("parameterization", ("standard",)), ("residual", ("deepnorm",))),
        gates=_TWO_MATRIX.format(paper="DeepNet's β = (8N)^(-1/4) (Wang et al. 2022, §4)"),
    ),
    "admin": Scheme(  # Liu et al. 2020, Eq. 6: xavier's table, then the profiling procedure sets ω
        "admin",
        _xavier,
        procedure="admin_profile",
        requires=(("parameterization", ("standard",)), ("residual", ("admin",))),
    ),
    "fixup": Scheme("fixup", _fixup, gates=_TWO_MATRIX.format(paper="Fixup's L^(-1/(2m-2)) (Zhang et al. 2019, §3)")),
    "megatron": Scheme("megatron", _gpt2, hparams=("std",)),  # an alias of gpt2 (`_gpt2`)
    "mitchell": Scheme("mitchell", _mitchell),
    "olmo2": Scheme("olmo2", _olmo2, hparams=("std",)),
    "small_init": Scheme("small_init", _small_init),
    # Bachlechner et al. 2020: xavier's table; α = 0 comes from the model.
    "rezero": Scheme("rezero", _xavier, requires=(("parameterization", ("standard",)), ("residual", ("rezero",)))),
    "ntk": Scheme("ntk", _ntk, requires=(("parameterization", ("ntk",)),)),
    "mup": Scheme(
        "mup", _mup, hparams=("mup_readout_zero", "mup_query_zero"), requires=(("parameterization", ("mup",)),)
    ),
}


def derived_scheme(mc: ModelConfig) -> str:
  """`init.scheme='auto'`: the scheme the model config implies. µP and NTK fix their own tables (Yang et al. 2021,
  Tensor Programs V, Table 3; Jacot et al. 2018); DeepNorm's residual goes with DeepNet's β-scaled init (Wang et al.
  2022, Fig. 2), Admin's with its profiling pass (Liu et al. 2020, Alg. 1), ReZero with its α = 0 (Bachlechner et
  al. 2020); otherwise Xavier (Glorot & Bengio 2010), the original Transformer's."""
  if mc.parameterization in ("mup", "ntk"):
    return mc.parameterization
  return {"deepnorm": "deepnet", "admin": "admin", "rezero": "rezero"}.get(mc.residual, "xavier")


def get_scheme(name: str) -> Scheme:
  """The registered scheme `name`.

  Raises:
    ValueError: unknown name, listing the valid ones.
  """
  if name not in SCHEMES:
    raise invalid("init.scheme", name, sorted(SCHEMES) + [AUTO])
  return SCHEMES[name]
