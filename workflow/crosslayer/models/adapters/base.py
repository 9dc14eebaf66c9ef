"""What every model family provides (:class:`FamilyAdapter`): where its tensors live in a checkpoint and
how they slice into the canonical projections, its blocks and norms as the closed-form Jacobians
need them (:class:`BlockParts`, :class:`NormParts`, :class:`GateParts`), and its shapes
(:class:`Geometry`). One family per module beside this one; the registry is the package's
``__init__``.

Canonical projections, float32, PyTorch ``(out, in)`` layout, ``d = d_model``:

========  ==============================  ==========================================
name      shape                           meaning
========  ==============================  ==========================================
``q``     ``(n_heads * head_dim, d)``     query
``k``     ``(n_kv_heads * head_dim, d)``  key (fewer rows than ``q`` under GQA)
``v``     ``(n_kv_heads * head_dim, d)``  value
``o``     ``(d, n_heads * head_dim)``     attention output
``gate``  ``(d_ff, d)``                   SwiGLU gate; only for gated MLPs
``up``    ``(d_ff, d)``                   MLP input
``down``  ``(d, d_ff)``                   MLP output
========  ==============================  ==========================================

Rows of ``q``/``k``/``v`` and columns of ``o`` are grouped by head (head ``h``
owns ``h * head_dim : (h + 1) * head_dim``), whatever the stored layout. Biases and norm
gains are not read yet; a family adds them by declaring more sources.
"""

from dataclasses import dataclass
from typing import Callable

import torch

from crosslayer.models.blocks import block_calls

__all__ = [
    "PROJECTIONS", "BlockParts", "FamilyAdapter", "GateParts", "Geometry", "NormParts", "Source",
    # for the family modules: sources of canonical projections, and parts of loaded blocks
    "linear_source", "conv1d_source", "rows_source", "fused_per_head_source", "fused_conv1d_source", "head_counts",
    "linear_parts", "conv1d_parts", "layernorm_parts", "rmsnorm_parts", "gemma_rmsnorm_parts", "activation_name",
    "attention_parts", "ungated_parts", "float32_detached",
]

PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


@dataclass(frozen=True)
class Geometry:
    """Shapes and block structure of one checkpoint, read from its config.

    Attributes
    ----------
    model_type : str
        ``model_type`` from config.json, e.g. ``"gpt_neox"``.
    n_layers, d_model, d_ff : int
        Number of blocks, residual width, MLP hidden width.
    n_heads, n_kv_heads, head_dim : int
        Query heads, key/value heads (``< n_heads`` under GQA), width per head.
    mlp_activation : str
        Activation name as transformers spells it (``"gelu"``, ``"silu"``, ...).
    gated_mlp : bool
        True for SwiGLU-style MLPs ``down(act(gate x) * up x)``.
    parallel_attn_mlp : bool
        True when attention and MLP read the same residual (GPT-NeoX
        ``use_parallel_residual``); False for sequential blocks.
    """

    model_type: str
    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    mlp_activation: str
    gated_mlp: bool
    parallel_attn_mlp: bool


# --------------------------------------------------------------------------- block parts


@dataclass(frozen=True)
class NormParts:
    """One normalization layer, canonical.

    Attributes
    ----------
    kind : str
        ``"layernorm"`` (``gamma * (x - mean) / sqrt(var + eps) + beta``) or ``"rmsnorm"``
        (``gamma * x / sqrt(mean(x^2) + eps)``).
    weight : torch.Tensor
        ``(d,)`` gain gamma.
    bias : torch.Tensor or None
        ``(d,)`` shift beta (LayerNorm only; None when absent).
    eps : float
    """

    kind: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    eps: float


@dataclass(frozen=True)
class BlockParts:
    """What the closed-form single-token Jacobian of one block needs, for any family.

    All tensors are detached float32 in PyTorch ``(out, in)`` layout, on the block's device.
    A block computes, with ``A(v) = W_o (W_v v + b_v) + b_o`` (one-token attention: the
    softmax over a single key is exactly 1, so queries, keys and positions drop out) and
    ``M(v) = W_down act(W_up v + b_up) + b_down`` (gated: ``W_down (act(W_gate v + b_gate) *
    (W_up v + b_up)) + b_down``)::

        attn(v) = post_a(A(pre_a(v)))          mlp(v) = post_m(M(pre_m(v)))
        parallel:   out = x + attn(x) + mlp(x)
        sequential: h = x + attn(x);  out = h + mlp(h)

    where a missing norm (None) is the identity.

    Attributes
    ----------
    d_model, n_heads, n_kv_heads, head_dim : int
        Query head ``h`` reads value head ``h // (n_heads // n_kv_heads)`` (GQA).
    w_v : ``(n_kv_heads * head_dim, d)``; b_v : ``(n_kv_heads * head_dim,)`` or None
    w_o : ``(d, n_heads * head_dim)``; b_o : ``(d,)`` or None
    w_up : ``(d_ff, d)``; b_up : ``(d_ff,)`` or None
    w_gate : ``(d_ff, d)`` or None (non-gated MLP); b_gate : ``(d_ff,)`` or None
    w_down : ``(d, d_ff)``; b_down : ``(d,)`` or None
    activation : str
        Canonical name: ``"gelu"`` (exact, erf), ``"gelu_tanh"`` (tanh approximation),
        ``"silu"``, ``"relu"``.
    attn_pre_norm, attn_post_norm, mlp_pre_norm, mlp_post_norm : NormParts or None
        Norm on the sublayer's input (pre) or on its output before the residual add (post).
    parallel : bool
        Attention and MLP both read the block input (GPT-NeoX ``use_parallel_residual``).
    """

    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    w_v: torch.Tensor
    b_v: torch.Tensor | None
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    w_up: torch.Tensor
    b_up: torch.Tensor | None
    w_down: torch.Tensor
    b_down: torch.Tensor | None
    activation: str
    w_gate: torch.Tensor | None = None
    b_gate: torch.Tensor | None = None
    attn_pre_norm: NormParts | None = None
    attn_post_norm: NormParts | None = None
    mlp_pre_norm: NormParts | None = None
    mlp_post_norm: NormParts | None = None
    parallel: bool = False

    @property
    def gated(self) -> bool:
        return self.w_gate is not None

    @property
    def d_ff(self) -> int:
        return self.w_up.shape[0]


@dataclass(frozen=True)
class GateParts:
    """What the gate-conditioned MLP product needs from one block: the MLP's input norm, its
    gate, input and output projections, and the gate activation (canonical name, as in
    :class:`BlockParts`). Tensors as in :class:`BlockParts`."""

    pre_norm: NormParts | None
    w_gate: torch.Tensor
    b_gate: torch.Tensor | None
    w_up: torch.Tensor
    w_down: torch.Tensor
    activation: str


# transformers' activation names -> the canonical ones the closed form implements
_ACTIVATIONS = {
    "gelu": "gelu", "gelu_python": "gelu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_python_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "silu": "silu", "swish": "silu",
    "relu": "relu",
}


def activation_name(name, model_type):
    if name not in _ACTIVATIONS:
        raise NotImplementedError(
            f"{model_type}: MLP activation '{name}' has no closed-form Jacobian here; "
            f"supported: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[name]


def float32_detached(tensor):
    """A parameter as a detached float32 tensor (None stays None)."""
    return None if tensor is None else tensor.detach().to(torch.float32)


def layernorm_parts(module):
    return NormParts("layernorm", float32_detached(module.weight), float32_detached(module.bias), float(module.eps))


def rmsnorm_parts(module):
    eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        eps = module.eps
    return NormParts("rmsnorm", float32_detached(module.weight), None, float(eps))


def gemma_rmsnorm_parts(module):
    """Gemma's RMSNorm multiplies by ``1 + weight`` (its weights are stored around zero)."""
    return NormParts("rmsnorm", 1.0 + float32_detached(module.weight), None, float(module.eps))


def linear_parts(module):
    return float32_detached(module.weight), float32_detached(module.bias)


def conv1d_parts(module):
    """GPT-2 ``Conv1D``: ``y = x @ W + b`` with ``W`` stored ``(in, out)``."""
    return float32_detached(module.weight).T.contiguous(), float32_detached(module.bias)


# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class Source:
    """Where one canonical projection lives and how to cut it out.

    ``key`` is relative to the layer (``attention.dense.weight``), ``shape`` is the
    stored shape (checked before slicing), ``take`` maps the stored float32 tensor
    to the canonical ``(out, in)`` matrix.
    """

    key: str
    shape: tuple[int, ...]
    take: Callable[[torch.Tensor], torch.Tensor] = lambda w: w


def linear_source(key, out_features, in_features):
    """An ``nn.Linear`` weight: stored ``(out, in)`` already."""
    return Source(key, (out_features, in_features))


def conv1d_source(key, out_features, in_features):
    """A GPT-2 ``Conv1D`` weight: stored ``(in, out)``, so transpose."""
    return Source(key, (in_features, out_features), lambda w: w.T)


def fused_per_head_source(key, g, part):
    """Fused QKV with rows ordered ``(n_heads, 3, head_dim)`` (GPT-NeoX, BLOOM)."""
    nh, hd, d = g.n_heads, g.head_dim, g.d_model
    return Source(key, (3 * nh * hd, d), lambda w: w.view(nh, 3, hd, d)[:, part].reshape(nh * hd, d))


def rows_source(key, shape, start, stop):
    """Rows ``start:stop`` of a fused ``nn.Linear`` weight whose parts are stacked along the
    output dimension (Phi-3 ``qkv_proj`` and ``gate_up_proj``, MPT ``Wqkv``)."""
    return Source(key, shape, lambda w: w[start:stop])


def fused_conv1d_source(key, g, part):
    """GPT-2 ``c_attn``: stored ``(d, 3 d)`` with q, k, v contiguous along columns."""
    width = g.n_heads * g.head_dim
    return Source(key, (g.d_model, 3 * width), lambda w: w[:, part * width : (part + 1) * width].T)


class FamilyAdapter:
    """What one architecture family stores where.

    Subclasses set ``model_type`` and ``layer_key`` (the per-layer key stem below
    the model's own prefix, which is discovered from the checkpoint) and implement
    ``_geometry`` and ``sources``. Later additions (biases, block callables) belong
    here too, so that nothing outside this module branches on the family.

    Parameters
    ----------
    config : transformers.PretrainedConfig
        The checkpoint's config (never loaded with remote code).
    """

    model_type: str
    layer_key: str  # e.g. "layers.{layer}"

    #: Whether the family is a causal decoder: its residual stream, activations and block
    #: Jacobians exist (False for encoders such as BERT, which only the weight analyses read).
    causal: bool = True

    #: Whether every layer's projections have the same shapes (False: Gemma 4's wider global heads).
    uniform_layers: bool = True

    #: Whether every layer attends with keys and values of its own input (False: KV-shared layers).
    own_attention: bool = True

    #: Whether the pre-MLP residual stream of each block is recorded (False on the generic path).
    pre_mlp_stream: bool = True

    #: What the family lacks, in words, for the capabilities it does not have ("has no causal
    #: residual stream"); the stages that need them are :func:`crosslayer.stages.supported_stages`'.
    limits: str = ""

    #: Whether :meth:`block_parts` gives the closed-form Jacobian's parts; without it the
    #: Jacobians are computed by autograd of the real block (the generic path).
    closed_form: bool = True

    #: A substring every layer-key prefix must contain, for checkpoints that also hold other
    #: towers with the same layer names (Gemma 3's vision encoder); None accepts any prefix.
    prefix_filter: str | None = None

    #: Width of a block argument that depends on the token besides the hidden state (Gemma 4's
    #: per-layer input), recorded per sample beside the residual stream; 0: none.
    token_input_width: int = 0

    def __init__(self, config):
        # Multimodal configs (Gemma 3) nest the decoder's settings; text models return themselves.
        self.config = config.get_text_config()
        self.geometry = self._geometry(self.config)

    @property
    def capabilities(self) -> frozenset[str]:
        """What this architecture can do (:data:`crosslayer.stages.CAPABILITIES` names): the stages
        that can run on it follow from these (:func:`crosslayer.stages.supported_stages`)."""
        g = self.geometry
        declared = {"causal": self.causal, "closed_form": self.closed_form, "uniform_layers": self.uniform_layers,
                    "own_attention": self.own_attention, "pre_mlp_stream": self.pre_mlp_stream,
                    "token_inputs": self.token_input_width > 0, "gated_mlp": g.gated_mlp,
                    "parallel_block": g.parallel_attn_mlp}
        return frozenset(name for name, has in declared.items() if has)

    def _geometry(self, config) -> Geometry:
        raise NotImplementedError

    def sources(self) -> dict[str, Source]:
        """Canonical name -> stored tensor, for every projection this family has."""
        raise NotImplementedError

    def layer_sources(self, layer) -> dict[str, Source]:
        """:meth:`sources` of one layer, for families whose layers differ in shape."""
        return self.sources()

    # ----------------------------------------------------------------- loaded models

    def blocks(self, model) -> list:
        """The decoder blocks of a loaded transformers model (bare or with a head), in order."""
        stem = self.layer_key.rsplit(".", 1)[0]  # "layers", "h", "encoder.layer"
        module = self._decoder(model)
        for name in stem.split("."):
            module = getattr(module, name)
        return list(module)

    def _decoder(self, model):
        """The module that holds the blocks under ``layer_key``'s stem."""
        return model.base_model

    #: Attribute names of the final normalisation on the decoder, tried in order.
    final_norm_names: tuple[str, ...] = ("norm", "final_layer_norm", "ln_f", "norm_f", "final_layernorm")

    def final_norm(self, model):
        """The module the decoder applies to the last block's output (its ``last_hidden_state``
        is that module of the raw residual stream); paper 002's eq. 7 counts it in the last block."""
        decoder = self._decoder(model)
        for name in self.final_norm_names:
            if isinstance(getattr(decoder, name, None), torch.nn.Module):
                return getattr(decoder, name)
        raise NotImplementedError(f"{self.model_type}: no final norm among {list(self.final_norm_names)} on "
                                  f"{type(decoder).__name__}; set final_norm_names on its adapter")

    def block_parts(self, block) -> BlockParts:
        """The canonical :class:`BlockParts` of one loaded block (what single-token
        Jacobians need)."""
        raise NotImplementedError(
            f"{self.model_type}: single-token block Jacobians are not implemented for this family")

    def single_token_forward(self, model, block):
        """A callable ``f(h) -> out`` running ``block`` exactly as ``model`` does, on
        ``h`` of shape ``(1, 1, d)`` taken as a one-token sequence at position 0; ``out`` is
        the block's output hidden state, same shape.

        The block's other arguments (rotary position embeddings of its layer type, ALiBi,
        masks) are recorded from the model's own forward on a one-token sequence, so no family
        needs its own version."""
        layer = self._layer_of(model, block)
        call = block_calls(model, self.blocks(model), [0], layers=[layer])[layer]

        def forward(h, extra=None):
            if extra is not None:
                raise ValueError(f"{self.model_type} blocks take no per-sample inputs besides the hidden state")
            return call(h[0])[None]

        return forward

    def _layer_of(self, model, block):
        return next(i for i, b in enumerate(self.blocks(model)) if b is block)

    def token_input(self, args, kwargs):
        """The token-dependent argument of a recorded block call (``(batch, seq, width)``), or None."""
        return None

    def jacobian_inputs(self, layer, acts, token_inputs):
        """Per-sample extra inputs of block `layer`'s one-token forward (the second argument of
        :meth:`single_token_forward`'s callable), from the recorded residual stream ``acts``
        ``(N, 2L, d)`` and token inputs ``(N, L, width)`` (numpy); None for families without them."""
        return None

    def gate_parts(self, block) -> GateParts:
        """The gated MLP of one loaded block, for the gate-conditioned product."""
        p = self.block_parts(block)
        if not p.gated:
            raise ValueError(f"{self.model_type}: the MLP has no gate")
        return GateParts(p.mlp_pre_norm, p.w_gate, p.b_gate, p.w_up, p.w_down, p.activation)

    def pre_mlp_residual_module(self, block):
        """The submodule of a loaded ``block`` whose forward *input* (first argument,
        ``(batch, seq, d)``) is the residual stream entering the MLP sub-layer.

        That is ``h = x + attention branch`` for sequential blocks and the block input
        ``x`` itself for parallel ones (attention and MLP read the same residual). A
        forward pre-hook on the returned module records it without recomputing anything.
        """
        raise NotImplementedError(
            f"{self.model_type}: the pre-MLP residual stream is not implemented for this family")


def attention_parts(w_v, b_v, w_o, b_o, g):
    return dict(d_model=g.d_model, n_heads=g.n_heads, n_kv_heads=g.n_kv_heads, head_dim=g.head_dim,
                w_v=w_v, b_v=b_v, w_o=w_o, b_o=b_o)


def ungated_parts(g, value, out, up, down, **rest):
    """:class:`BlockParts` of a block with a non-gated MLP, from the ``(weight, bias)`` pairs of
    its value, attention output, MLP input and MLP output projections."""
    return BlockParts(**attention_parts(*value, *out, g), w_up=up[0], b_up=up[1], w_down=down[0], b_down=down[1],
                      **rest)


def head_counts(config):
    """(n_heads, n_kv_heads, head_dim) with the usual transformers defaults."""
    nh = config.num_attention_heads
    nkv = getattr(config, "num_key_value_heads", None) or nh
    hd = getattr(config, "head_dim", None) or config.hidden_size // nh
    return nh, nkv, hd
