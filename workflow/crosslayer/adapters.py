"""Read each layer's projection matrices straight from a saved checkpoint.

No model is built: tensors are read one at a time from memory-mapped safetensors
(or ``pytorch_model.bin`` as a fallback) and sliced into a canonical form that is
the same for every architecture family, so callers never branch on the family.

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

Example
-------
>>> with open_checkpoint("checkpoints/pythia-70m/step1000") as reader:  # doctest: +SKIP
...     w = reader.projections(3, names=("q", "k"))
...     up, down = reader.mlp(3)
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from crosslayer.blocks import block_calls
from crosslayer.errors import CheckpointError

log = logging.getLogger(__name__)

__all__ = [
    "SUPPORTED_MODEL_TYPES", "WEIGHT_FILES", "BlockParts", "GateParts", "GenericAdapter", "Geometry", "NormParts",
    "WeightReader", "adapter_for", "checkpoint_adapter",
    "open_checkpoint", "read_geometry", "tensor_shapes",
]

PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")
#: (shard index, single file) per weight format, in the order they are looked for.
WEIGHT_FILES = (("model.safetensors.index.json", "model.safetensors"),
                ("pytorch_model.bin.index.json", "pytorch_model.bin"))


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


def _activation(name, model_type):
    if name not in _ACTIVATIONS:
        raise NotImplementedError(
            f"{model_type}: MLP activation '{name}' has no closed-form Jacobian here; "
            f"supported: {', '.join(sorted(_ACTIVATIONS))}")
    return _ACTIVATIONS[name]


def _t(tensor):
    """A parameter as a detached float32 tensor (None stays None)."""
    return None if tensor is None else tensor.detach().to(torch.float32)


def _layernorm(module):
    return NormParts("layernorm", _t(module.weight), _t(module.bias), float(module.eps))


def _rmsnorm(module):
    eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        eps = module.eps
    return NormParts("rmsnorm", _t(module.weight), None, float(eps))


def _gemma_rmsnorm(module):
    """Gemma's RMSNorm multiplies by ``1 + weight`` (its weights are stored around zero)."""
    return NormParts("rmsnorm", 1.0 + _t(module.weight), None, float(module.eps))


def _linear_parts(module):
    return _t(module.weight), _t(module.bias)


def _conv1d_parts(module):
    """GPT-2 ``Conv1D``: ``y = x @ W + b`` with ``W`` stored ``(in, out)``."""
    return _t(module.weight).T.contiguous(), _t(module.bias)


# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class _Source:
    """Where one canonical projection lives and how to cut it out.

    ``key`` is relative to the layer (``attention.dense.weight``), ``shape`` is the
    stored shape (checked before slicing), ``take`` maps the stored float32 tensor
    to the canonical ``(out, in)`` matrix.
    """

    key: str
    shape: tuple[int, ...]
    take: Callable[[torch.Tensor], torch.Tensor] = lambda w: w


def _linear(key, out_features, in_features):
    """An ``nn.Linear`` weight: stored ``(out, in)`` already."""
    return _Source(key, (out_features, in_features))


def _conv1d(key, out_features, in_features):
    """A GPT-2 ``Conv1D`` weight: stored ``(in, out)``, so transpose."""
    return _Source(key, (in_features, out_features), lambda w: w.T)


def _fused_per_head(key, g, part):
    """Fused QKV with rows ordered ``(n_heads, 3, head_dim)`` (GPT-NeoX, BLOOM)."""
    nh, hd, d = g.n_heads, g.head_dim, g.d_model
    return _Source(key, (3 * nh * hd, d), lambda w: w.view(nh, 3, hd, d)[:, part].reshape(nh * hd, d))


def _rows(key, shape, start, stop):
    """Rows ``start:stop`` of a fused ``nn.Linear`` weight whose parts are stacked along the
    output dimension (Phi-3 ``qkv_proj`` and ``gate_up_proj``, MPT ``Wqkv``)."""
    return _Source(key, shape, lambda w: w[start:stop])


def _fused_conv1d(key, g, part):
    """GPT-2 ``c_attn``: stored ``(d, 3 d)`` with q, k, v contiguous along columns."""
    width = g.n_heads * g.head_dim
    return _Source(key, (g.d_model, 3 * width), lambda w: w[:, part * width : (part + 1) * width].T)


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

    #: The workflow's per-model stages this family supports, and why not the others.
    analyses: tuple[str, ...] = ("alignment", "continuity", "coupling", "dynamics", "topology")
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

    def _geometry(self, config) -> Geometry:
        raise NotImplementedError

    def sources(self) -> dict[str, _Source]:
        """Canonical name -> stored tensor, for every projection this family has."""
        raise NotImplementedError

    def layer_sources(self, layer) -> dict[str, _Source]:
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


def _attention_parts(w_v, b_v, w_o, b_o, g):
    return dict(d_model=g.d_model, n_heads=g.n_heads, n_kv_heads=g.n_kv_heads, head_dim=g.head_dim,
                w_v=w_v, b_v=b_v, w_o=w_o, b_o=b_o)


def _ungated(g, value, out, up, down, **rest):
    """:class:`BlockParts` of a block with a non-gated MLP, from the ``(weight, bias)`` pairs of
    its value, attention output, MLP input and MLP output projections."""
    return BlockParts(**_attention_parts(*value, *out, g), w_up=up[0], b_up=up[1], w_down=down[0], b_down=down[1],
                      **rest)


def _heads(config):
    """(n_heads, n_kv_heads, head_dim) with the usual transformers defaults."""
    nh = config.num_attention_heads
    nkv = getattr(config, "num_key_value_heads", None) or nh
    hd = getattr(config, "head_dim", None) or config.hidden_size // nh
    return nh, nkv, hd


class GPTNeoXAdapter(FamilyAdapter):
    """Pythia and other GPT-NeoX: fused, head-interleaved QKV; parallel residual."""

    model_type = "gpt_neox"
    layer_key = "layers.{layer}"
    attention = "attention"  # module holding query_key_value and dense

    def _geometry(self, c):
        nh, _, hd = _heads(c)
        return Geometry("gpt_neox", c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nh, hd, c.hidden_act, False, bool(c.use_parallel_residual))

    def sources(self):
        g, qkv = self.geometry, f"{self.attention}.query_key_value.weight"
        return {
            "q": _fused_per_head(qkv, g, 0),
            "k": _fused_per_head(qkv, g, 1),
            "v": _fused_per_head(qkv, g, 2),
            "o": _linear(f"{self.attention}.dense.weight", g.d_model, g.n_heads * g.head_dim),
            "up": _linear("mlp.dense_h_to_4h.weight", g.d_ff, g.d_model),
            "down": _linear("mlp.dense_4h_to_h.weight", g.d_model, g.d_ff),
        }

    def _fused_v(self, attention):
        """Value rows of the fused per-head QKV (weight and bias)."""
        g = self.geometry
        nh, hd, d = g.n_heads, g.head_dim, g.d_model
        w, b = _linear_parts(attention.query_key_value)
        w_v = w.view(nh, 3, hd, d)[:, 2].reshape(nh * hd, d)
        b_v = None if b is None else b.view(nh, 3, hd)[:, 2].reshape(nh * hd)
        return w_v, b_v

    def block_parts(self, block):
        return _ungated(
            self.geometry, self._fused_v(block.attention), _linear_parts(block.attention.dense),
            _linear_parts(block.mlp.dense_h_to_4h), _linear_parts(block.mlp.dense_4h_to_h),
            activation=_activation(self.config.hidden_act, self.model_type),
            attn_pre_norm=_layernorm(block.input_layernorm), mlp_pre_norm=_layernorm(block.post_attention_layernorm),
            parallel=bool(block.use_parallel_residual))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` normalises the MLP input: it reads ``x + attn(x)``
        in sequential blocks and the block input ``x`` under ``use_parallel_residual``."""
        return block.post_attention_layernorm


class LlamaAdapter(FamilyAdapter):
    """Llama, TinyLlama, SmolLM: separate q/k/v (GQA), SwiGLU MLP."""

    model_type = "llama"
    layer_key = "layers.{layer}"

    def _geometry(self, c):
        nh, nkv, hd = _heads(c)
        return Geometry(self.model_type, c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nkv, hd, self._mlp_activation(c), True, False)

    def _mlp_activation(self, c):
        return c.hidden_act

    def sources(self):
        g = self.geometry
        d, q_width, kv_width = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        return {
            "q": _linear("self_attn.q_proj.weight", q_width, d),
            "k": _linear("self_attn.k_proj.weight", kv_width, d),
            "v": _linear("self_attn.v_proj.weight", kv_width, d),
            "o": _linear("self_attn.o_proj.weight", d, q_width),
            "gate": _linear("mlp.gate_proj.weight", g.d_ff, d),
            "up": _linear("mlp.up_proj.weight", g.d_ff, d),
            "down": _linear("mlp.down_proj.weight", d, g.d_ff),
        }

    def _value_gate_up(self, block):
        """``(w_v, b_v), (w_gate, b_gate), (w_up, b_up)`` of a loaded block."""
        attn, mlp = block.self_attn, block.mlp
        return _linear_parts(attn.v_proj), _linear_parts(mlp.gate_proj), _linear_parts(mlp.up_proj)

    def _weights(self, block):
        (w_v, b_v), (w_gate, b_gate), (w_up, b_up) = self._value_gate_up(block)
        w_o, b_o = _linear_parts(block.self_attn.o_proj)
        w_down, b_down = _linear_parts(block.mlp.down_proj)
        return dict(**_attention_parts(w_v, b_v, w_o, b_o, self.geometry), w_gate=w_gate, b_gate=b_gate,
                    w_up=w_up, b_up=b_up, w_down=w_down, b_down=b_down,
                    activation=_activation(self.geometry.mlp_activation, self.model_type))

    def block_parts(self, block):
        """Pre-norm RMSNorm before attention (``input_layernorm``) and before the MLP
        (``post_attention_layernorm``, despite its name)."""
        return BlockParts(**self._weights(block), attn_pre_norm=_rmsnorm(block.input_layernorm),
                          mlp_pre_norm=_rmsnorm(block.post_attention_layernorm))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` is the MLP's pre-norm; it reads ``x + attn(x)``."""
        return block.post_attention_layernorm


class Olmo2Adapter(LlamaAdapter):
    """OLMo 2: Llama projection names; its q_norm/k_norm act after q/k (not read yet)."""

    model_type = "olmo2"

    def block_parts(self, block):
        """No input norms: RMSNorm on each sublayer's *output* before the residual add
        (``post_attention_layernorm``, ``post_feedforward_layernorm``). q_norm/k_norm do
        not matter for one token."""
        return BlockParts(**self._weights(block), attn_post_norm=_rmsnorm(block.post_attention_layernorm),
                          mlp_post_norm=_rmsnorm(block.post_feedforward_layernorm))

    def pre_mlp_residual_module(self, block):
        """No MLP pre-norm: the MLP itself reads ``x + post_attention_layernorm(attn(x))``."""
        return block.mlp


class Olmo3Adapter(Olmo2Adapter):
    """OLMo 3: OLMo 2's block (post-sublayer RMSNorm inside the residual, q_norm/k_norm) and
    weight names. Three of every four layers use sliding-window attention and the rotary
    embedding may differ per layer type (YaRN on full-attention layers after long-context
    training); neither changes a one-token sequence, where softmax over one key is 1."""

    model_type = "olmo3"


class BloomAdapter(GPTNeoXAdapter):
    """BLOOM: GPT-NeoX's fused per-head QKV and MLP names, sequential blocks, 4d GELU MLP
    (tanh approximation, no config field)."""

    model_type = "bloom"
    layer_key = "h.{layer}"
    attention = "self_attention"

    def _geometry(self, c):
        nh, _, hd = _heads(c)
        d = c.hidden_size
        return Geometry("bloom", c.num_hidden_layers, d, 4 * d, nh, nh, hd, "gelu_new", False, False)

    def block_parts(self, block):
        """Pre-norm LayerNorms, sequential; GELU tanh approximation (``bloom_gelu_forward``)."""
        if block.apply_residual_connection_post_layernorm:
            raise NotImplementedError(
                "bloom: apply_residual_connection_post_layernorm=True (residual taken after the norm) "
                "is not supported for single-token Jacobians")
        return _ungated(
            self.geometry, self._fused_v(block.self_attention), _linear_parts(block.self_attention.dense),
            _linear_parts(block.mlp.dense_h_to_4h), _linear_parts(block.mlp.dense_4h_to_h), activation="gelu_tanh",
            attn_pre_norm=_layernorm(block.input_layernorm), mlp_pre_norm=_layernorm(block.post_attention_layernorm))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` reads ``self_attention``'s output, which already
        includes the residual add (``dropout_add``)."""
        if block.apply_residual_connection_post_layernorm:
            raise NotImplementedError(
                "bloom: apply_residual_connection_post_layernorm=True (residual taken after the norm) "
                "has no pre-MLP residual stream")
        return block.post_attention_layernorm


class GPT2Adapter(FamilyAdapter):
    """GPT-2: Conv1D weights stored ``(in, out)``; ``c_attn`` holds q, k, v side by side."""

    model_type = "gpt2"
    layer_key = "h.{layer}"

    def _geometry(self, c):
        nh, _, hd = _heads(c)
        d = c.hidden_size
        return Geometry("gpt2", c.num_hidden_layers, d, c.n_inner or 4 * d, nh, nh, hd,
                        c.activation_function, False, False)

    def sources(self):
        g, qkv = self.geometry, "attn.c_attn.weight"
        return {
            "q": _fused_conv1d(qkv, g, 0),
            "k": _fused_conv1d(qkv, g, 1),
            "v": _fused_conv1d(qkv, g, 2),
            "o": _conv1d("attn.c_proj.weight", g.d_model, g.n_heads * g.head_dim),
            "up": _conv1d("mlp.c_fc.weight", g.d_ff, g.d_model),
            "down": _conv1d("mlp.c_proj.weight", g.d_model, g.d_ff),
        }

    def block_parts(self, block):
        """Pre-norm LayerNorms ``ln_1``/``ln_2``, sequential; Conv1D weights transposed."""
        g = self.geometry
        width = g.n_heads * g.head_dim
        w_qkv, b_qkv = _conv1d_parts(block.attn.c_attn)  # (3 width, d): q, k, v stacked
        value = w_qkv[2 * width:], None if b_qkv is None else b_qkv[2 * width:]
        return _ungated(
            g, value, _conv1d_parts(block.attn.c_proj), _conv1d_parts(block.mlp.c_fc), _conv1d_parts(block.mlp.c_proj),
            activation=_activation(self.config.activation_function, self.model_type),
            attn_pre_norm=_layernorm(block.ln_1), mlp_pre_norm=_layernorm(block.ln_2))

    def pre_mlp_residual_module(self, block):
        """``ln_2`` normalises the MLP input ``x + attn(x)`` (no cross-attention in decoders)."""
        if getattr(block, "crossattention", None) is not None:
            raise NotImplementedError("gpt2: blocks with cross-attention are not supported")
        return block.ln_2


class MistralAdapter(LlamaAdapter):
    """Mistral: Llama's block and names; sliding-window attention does not change one token."""

    model_type = "mistral"


class Qwen2Adapter(LlamaAdapter):
    """Qwen2 / Qwen2.5: Llama's block and names, with q/k/v biases (read with the weights)."""

    model_type = "qwen2"


class Qwen3Adapter(LlamaAdapter):
    """Qwen3: Llama's block and names, explicit ``head_dim``; its q_norm/k_norm act on queries
    and keys only, which one token's attention does not depend on."""

    model_type = "qwen3"


class Phi3Adapter(LlamaAdapter):
    """Phi-3: Llama's pre-norm block with fused ``qkv_proj`` (q, k, v stacked by rows) and
    ``gate_up_proj`` (gate rows first: ``up * act(gate)`` after ``chunk(2)``)."""

    model_type = "phi3"

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        qkv, qkv_shape = "self_attn.qkv_proj.weight", (q + 2 * kv, d)
        gate_up, gate_up_shape = "mlp.gate_up_proj.weight", (2 * g.d_ff, d)
        return {
            "q": _rows(qkv, qkv_shape, 0, q),
            "k": _rows(qkv, qkv_shape, q, q + kv),
            "v": _rows(qkv, qkv_shape, q + kv, q + 2 * kv),
            "o": _linear("self_attn.o_proj.weight", d, q),
            "gate": _rows(gate_up, gate_up_shape, 0, g.d_ff),
            "up": _rows(gate_up, gate_up_shape, g.d_ff, 2 * g.d_ff),
            "down": _linear("mlp.down_proj.weight", d, g.d_ff),
        }

    def _value_gate_up(self, block):
        g = self.geometry
        start = (g.n_heads + g.n_kv_heads) * g.head_dim  # value rows follow the queries and keys
        w_qkv, b_qkv = _linear_parts(block.self_attn.qkv_proj)
        w_gu, b_gu = _linear_parts(block.mlp.gate_up_proj)
        cut = lambda t, a, b: None if t is None else t[a:b]  # noqa: E731
        return ((w_qkv[start:], cut(b_qkv, start, None)), (w_gu[: g.d_ff], cut(b_gu, 0, g.d_ff)),
                (w_gu[g.d_ff:], cut(b_gu, g.d_ff, None)))


class Exaone4Adapter(Olmo2Adapter):
    """EXAONE 4.0: OLMo 2's block (RMSNorm on each sublayer's output inside the residual,
    q_norm/k_norm) and Llama names; its global layers drop RoPE, which one token never sees."""

    model_type = "exaone4"


class GemmaAdapter(LlamaAdapter):
    """Gemma (1): Llama's pre-norm block and names with GeGLU and RMSNorms scaling by
    ``1 + weight``; the embedding scale ``sqrt(d)`` acts before the first block."""

    model_type = "gemma"

    def block_parts(self, block):
        return BlockParts(**self._weights(block), attn_pre_norm=_gemma_rmsnorm(block.input_layernorm),
                          mlp_pre_norm=_gemma_rmsnorm(block.post_attention_layernorm))


class Gemma3TextAdapter(LlamaAdapter):
    """Gemma 3 text decoders: Llama names, GeGLU (tanh GELU gate) and "sandwich" RMSNorms
    around both sublayers (``input_layernorm`` / ``post_attention_layernorm``,
    ``pre_feedforward_layernorm`` / ``post_feedforward_layernorm``), each scaling by
    ``1 + weight``. The embedding scale ``sqrt(d)`` acts before the first block, q/k norms,
    attention soft-capping and sliding windows on queries and keys only, and the final
    logit soft-capping after the last block: none enters a block's one-token Jacobian."""

    model_type = "gemma3_text"

    def _mlp_activation(self, c):
        return c.hidden_activation

    def block_parts(self, block):
        return BlockParts(**self._weights(block), attn_pre_norm=_gemma_rmsnorm(block.input_layernorm),
                          attn_post_norm=_gemma_rmsnorm(block.post_attention_layernorm),
                          mlp_pre_norm=_gemma_rmsnorm(block.pre_feedforward_layernorm),
                          mlp_post_norm=_gemma_rmsnorm(block.post_feedforward_layernorm))

    def pre_mlp_residual_module(self, block):
        """``pre_feedforward_layernorm`` reads ``x + post_attention_layernorm(attn(x))``."""
        return block.pre_feedforward_layernorm


class Gemma2Adapter(Gemma3TextAdapter):
    """Gemma 2: Gemma 3's block (sandwich norms, GeGLU) without q/k norms; its attention
    soft-capping acts on query-key logits, which one token's attention does not depend on."""

    model_type = "gemma2"


class Gemma3Adapter(Gemma3TextAdapter):
    """Gemma 3 (4B and up) as released: the text decoder inside a vision-language model; only
    the language model's blocks are read (the vision tower has layers of the same names)."""

    model_type = "gemma3"
    prefix_filter = "language_model"

    def _decoder(self, model):
        return model.base_model.language_model


def _kv_sharing_modes(config):
    """Gemma 4's per-layer KV sharing: None (own keys and values), "store" (the last such layer of
    its attention type, read by the shared layers) or "reuse" (the last ``num_kv_shared_layers``).
    The config's own list from transformers 5.23 on; before, the rule its modeling code follows."""
    if hasattr(type(config), "kv_sharing_modes"):
        return config.kv_sharing_modes
    n, first = config.num_hidden_layers, config.num_hidden_layers - config.num_kv_shared_layers
    modes = [None if i < first else "reuse" for i in range(n)]
    for kind in set(config.layer_types[:first]):
        modes[max(i for i in range(first) if config.layer_types[i] == kind)] = "store"
    return modes


class Gemma4TextAdapter(LlamaAdapter):
    """Gemma 4 text decoders: Gemma 3's sandwich norms (RMSNorms scaling by ``weight`` itself),
    q/k norms and a scale-free RMSNorm on the values, a learned ``layer_scalar`` on each block's
    output, and on the E-series a per-layer input: a token's own embedding slice, gated by the
    block's output and added back (so it is recorded per sample, :attr:`token_input_width`).

    Layers differ in shape (:meth:`layer_sources`): full-attention layers have wider heads
    (``global_head_dim``) and may read values through the key projection (``attention_k_eq_v``);
    KV-shared layers (the last ``num_kv_shared_layers``) have no key/value projections, attend to
    an earlier layer's keys and values and may have a double-wide MLP. One token's attention in a
    KV-shared layer reads nothing of its own input, so that sublayer adds nothing to the block's
    Jacobian. Jacobians are autograd of the real block (no closed form for the value norm and the
    per-layer input); continuity (shapes change across layers) and coupling are not offered.
    Mixture-of-experts variants (``enable_moe_block``) are refused."""

    model_type = "gemma4_text"
    closed_form = False
    analyses = ("alignment", "dynamics", "topology")
    limits = ("its projections change shape across layers (wider global heads, KV-shared layers without keys and "
              "values, double-wide MLPs), so continuity does not apply; coupling is not offered for its KV-shared "
              "attention")

    def __init__(self, config):
        text = config.get_text_config()
        if getattr(text, "enable_moe_block", False):
            raise NotImplementedError(f"{config.model_type}: mixture-of-experts blocks (enable_moe_block) are not "
                                      "supported")
        if getattr(text, "use_bidirectional_attention", None) == "all":
            raise NotImplementedError(f"{config.model_type}: bidirectional attention has no causal residual stream")
        super().__init__(config)
        self.token_input_width = int(text.hidden_size_per_layer_input or 0)

    def _geometry(self, c):
        first = c.per_layer_config[0]  # head width and KV heads are per layer: the first layer's stand for all
        return Geometry(self.model_type, c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        c.num_attention_heads, first.num_key_value_heads, first.head_dim, c.hidden_activation, True,
                        False)

    def layer_sources(self, layer):
        c, d = self.config, self.geometry.d_model
        heads = c.per_layer_config[layer]
        q_width, kv_width = c.num_attention_heads * heads.head_dim, heads.num_key_value_heads * heads.head_dim
        shared = _kv_sharing_modes(c)[layer] == "reuse"
        d_ff = c.intermediate_size * (2 if c.use_double_wide_mlp and shared else 1)
        sources = {
            "q": _linear("self_attn.q_proj.weight", q_width, d),
            "o": _linear("self_attn.o_proj.weight", d, q_width),
            "gate": _linear("mlp.gate_proj.weight", d_ff, d),
            "up": _linear("mlp.up_proj.weight", d_ff, d),
            "down": _linear("mlp.down_proj.weight", d, d_ff),
        }
        if not shared:
            sources["k"] = _linear("self_attn.k_proj.weight", kv_width, d)
            k_is_v = c.attention_k_eq_v and c.layer_types[layer] != "sliding_attention"
            sources["v"] = sources["k"] if k_is_v else _linear("self_attn.v_proj.weight", kv_width, d)
        return sources

    def sources(self):
        return self.layer_sources(0)

    def gate_parts(self, block):
        mlp = block.mlp
        return GateParts(_rmsnorm(block.pre_feedforward_layernorm), _t(mlp.gate_proj.weight), None,
                         _t(mlp.up_proj.weight), _t(mlp.down_proj.weight),
                         _activation(self.geometry.mlp_activation, self.model_type))

    def pre_mlp_residual_module(self, block):
        """``pre_feedforward_layernorm`` reads ``x + post_attention_layernorm(attn(x))``."""
        return block.pre_feedforward_layernorm

    def token_input(self, args, kwargs):
        """The per-layer input (the decoder passes it positionally after the hidden states)."""
        return args[1] if len(args) > 1 else kwargs.get("per_layer_input")

    def _kv_source(self, layer):
        """The layer whose keys and values a KV-shared `layer` reads, or None."""
        c, modes = self.config, _kv_sharing_modes(self.config)
        if modes[layer] != "reuse":
            return None
        return max(i for i, mode in enumerate(modes) if mode == "store" and c.layer_types[i] == c.layer_types[layer])

    def jacobian_inputs(self, layer, acts, token_inputs):
        """The sample's per-layer input; for a KV-shared layer also the input and per-layer input of
        the layer whose values it reads (one token's attention output there is that layer's value of
        the same token, which moves where the MLP's Jacobian is taken)."""
        parts = [token_inputs[:, layer]] if self.token_input_width else []
        source = self._kv_source(layer)
        if source is not None:
            parts.append(acts[:, 2 * source])
            if self.token_input_width:
                parts.append(token_inputs[:, source])
        return np.concatenate(parts, axis=1) if parts else None

    def single_token_forward(self, model, block):
        """The model's one-token call of `block` with the sample's own per-layer input and, for a
        KV-shared layer, the keys and values its source layer computes on the sample's input there."""
        import dataclasses

        layer = self._layer_of(model, block)
        source = self._kv_source(layer)
        calls = block_calls(model, self.blocks(model), [0], layers=[layer] if source is None else [layer, source])
        e, d = self.token_input_width, self.geometry.d_model

        def run(call, h, ple, states):
            args = (ple.reshape(1, 1, -1), *call.args[1:]) if e else call.args
            kwargs = call.kwargs if states is None else {**call.kwargs, "shared_kv_states": states}
            return dataclasses.replace(call, args=args, kwargs=kwargs)(h.reshape(1, -1))

        def forward(h, extra):
            states = None
            if source is not None:
                states = type(calls[source].kwargs["shared_kv_states"])()
                run(calls[source], extra[e : e + d], extra[e + d :], states)  # stores its keys and values
            return run(calls[layer], h[0], extra[:e], states)[None]

        return forward


class Gemma4Adapter(Gemma4TextAdapter):
    """Gemma 4 as released (E2B, E4B, 31B): the text decoder inside a multimodal model; only the
    language model's blocks are read."""

    model_type = "gemma4"
    prefix_filter = "language_model"

    def _decoder(self, model):
        return model.base_model.language_model


class PhiAdapter(FamilyAdapter):
    """Phi-1, Phi-1.5, Phi-2: one LayerNorm feeds attention and MLP in parallel
    (``out = x + attn(ln(x)) + mlp(ln(x))``); separate biased q/k/v, ``dense``, ``fc1``/``fc2``."""

    model_type = "phi"
    layer_key = "layers.{layer}"

    def _geometry(self, c):
        nh, nkv, hd = _heads(c)
        return Geometry("phi", c.num_hidden_layers, c.hidden_size, c.intermediate_size, nh, nkv, hd,
                        c.hidden_act, False, True)

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        return {
            "q": _linear("self_attn.q_proj.weight", q, d),
            "k": _linear("self_attn.k_proj.weight", kv, d),
            "v": _linear("self_attn.v_proj.weight", kv, d),
            "o": _linear("self_attn.dense.weight", d, q),
            "up": _linear("mlp.fc1.weight", g.d_ff, d),
            "down": _linear("mlp.fc2.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        norm = _layernorm(block.input_layernorm)
        return _ungated(
            self.geometry, _linear_parts(block.self_attn.v_proj), _linear_parts(block.self_attn.dense),
            _linear_parts(block.mlp.fc1), _linear_parts(block.mlp.fc2),
            activation=_activation(self.config.hidden_act, self.model_type), attn_pre_norm=norm, mlp_pre_norm=norm,
            parallel=True)

    def pre_mlp_residual_module(self, block):
        """Parallel block: the MLP reads the block input, which ``input_layernorm`` receives."""
        return block.input_layernorm


class GPTNeoAdapter(FamilyAdapter):
    """GPT-Neo: GPT-2's pre-norm sequential block with ``nn.Linear`` weights (q/k/v without
    bias) under ``attn.attention``; local-attention layers differ only beyond one token."""

    model_type = "gpt_neo"
    layer_key = "h.{layer}"

    def _geometry(self, c):
        nh, _, hd = _heads(c)
        d = c.hidden_size
        return Geometry("gpt_neo", c.num_layers, d, c.intermediate_size or 4 * d, nh, nh, hd,
                        c.activation_function, False, False)

    def sources(self):
        g = self.geometry
        d, width = g.d_model, g.n_heads * g.head_dim
        return {
            "q": _linear("attn.attention.q_proj.weight", width, d),
            "k": _linear("attn.attention.k_proj.weight", width, d),
            "v": _linear("attn.attention.v_proj.weight", width, d),
            "o": _linear("attn.attention.out_proj.weight", d, width),
            "up": _linear("mlp.c_fc.weight", g.d_ff, d),
            "down": _linear("mlp.c_proj.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        attn = block.attn.attention
        return _ungated(
            self.geometry, _linear_parts(attn.v_proj), _linear_parts(attn.out_proj), _linear_parts(block.mlp.c_fc),
            _linear_parts(block.mlp.c_proj), activation=_activation(self.config.activation_function, self.model_type),
            attn_pre_norm=_layernorm(block.ln_1), mlp_pre_norm=_layernorm(block.ln_2))

    def pre_mlp_residual_module(self, block):
        """``ln_2`` normalises the MLP input ``x + attn(x)``."""
        return block.ln_2


class MptAdapter(FamilyAdapter):
    """MPT: pre-norm sequential blocks, LayerNorms without bias, fused ``Wqkv`` (q, k, v stacked
    by rows), bias-free ``4 d`` exact-GELU MLP, ALiBi (no positions in one token's Jacobian)."""

    model_type = "mpt"
    layer_key = "blocks.{layer}"

    def _geometry(self, c):
        d, nh = c.d_model, c.n_heads
        return Geometry("mpt", c.n_layers, d, int(c.expansion_ratio * d), nh, nh, d // nh, "gelu", False, False)

    def sources(self):
        g = self.geometry
        d = g.d_model
        return {
            "q": _rows("attn.Wqkv.weight", (3 * d, d), 0, d),
            "k": _rows("attn.Wqkv.weight", (3 * d, d), d, 2 * d),
            "v": _rows("attn.Wqkv.weight", (3 * d, d), 2 * d, 3 * d),
            "o": _linear("attn.out_proj.weight", d, d),
            "up": _linear("ffn.up_proj.weight", g.d_ff, d),
            "down": _linear("ffn.down_proj.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        d = self.geometry.d_model
        w_qkv, b_qkv = _linear_parts(block.attn.Wqkv)  # (3 d, d): q, k, v stacked
        value = w_qkv[2 * d:], None if b_qkv is None else b_qkv[2 * d:]
        return _ungated(
            self.geometry, value, _linear_parts(block.attn.out_proj), _linear_parts(block.ffn.up_proj),
            _linear_parts(block.ffn.down_proj), activation="gelu", attn_pre_norm=_layernorm(block.norm_1),
            mlp_pre_norm=_layernorm(block.norm_2))

    def pre_mlp_residual_module(self, block):
        """``norm_2`` reads ``x + attn(x)``."""
        return block.norm_2


class FalconAdapter(FamilyAdapter):
    """Falcon: fused ``query_key_value`` in one of three layouts (per-head q, k, v; multi-query
    with one shared key/value head; grouped ``new_decoder_architecture``), parallel attention
    and MLP (one shared LayerNorm, or ``ln_attn``/``ln_mlp``) or sequential blocks."""

    model_type = "falcon"
    layer_key = "h.{layer}"

    def _geometry(self, c):
        nh, d = c.num_attention_heads, c.hidden_size
        if c.new_decoder_architecture and not c.parallel_attn:
            raise NotImplementedError("falcon: new_decoder_architecture with parallel_attn=False is not supported")
        nkv = c.num_kv_heads if c.new_decoder_architecture else 1 if c.multi_query else nh
        parallel = bool(c.parallel_attn or c.new_decoder_architecture)
        return Geometry("falcon", c.num_hidden_layers, d, c.ffn_hidden_size, nh, nkv, d // nh, c.activation,
                        False, parallel)

    def _split_qkv(self, w):
        """``(q, k, v)`` rows of the fused weight (or, 1-D, bias) in canonical head order."""
        g, c = self.geometry, self.config
        nh, nkv, hd = g.n_heads, g.n_kv_heads, g.head_dim
        rest = w.shape[1:]
        if c.new_decoder_architecture:  # per key/value group: its query heads, then k, then v
            w = w.reshape(nkv, nh // nkv + 2, hd, *rest)
            return w[:, :-2].reshape(nh * hd, *rest), w[:, -2].reshape(nkv * hd, *rest), w[:, -1].reshape(nkv * hd, *rest)
        if c.multi_query:  # all query heads, then the one key head, then the one value head
            w = w.reshape(nh + 2, hd, *rest)
            return w[:nh].reshape(nh * hd, *rest), w[nh], w[nh + 1]
        w = w.reshape(nh, 3, hd, *rest)  # per head: q, k, v
        return tuple(w[:, i].reshape(nh * hd, *rest) for i in range(3))

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        key, shape = "self_attention.query_key_value.weight", (q + 2 * kv, d)
        return {
            **{name: _Source(key, shape, lambda w, i=i: self._split_qkv(w)[i]) for i, name in enumerate("qkv")},
            "o": _linear("self_attention.dense.weight", d, q),
            "up": _linear("mlp.dense_h_to_4h.weight", g.d_ff, d),
            "down": _linear("mlp.dense_4h_to_h.weight", d, g.d_ff),
        }

    def _norms(self, block):
        """``(attention's pre-norm, MLP's pre-norm)`` as the block applies them."""
        if self.geometry.parallel_attn_mlp and hasattr(block, "ln_attn"):
            return _layernorm(block.ln_attn), _layernorm(block.ln_mlp)
        if self.geometry.parallel_attn_mlp:
            return (_layernorm(block.input_layernorm),) * 2
        return _layernorm(block.input_layernorm), _layernorm(block.post_attention_layernorm)

    def block_parts(self, block):
        w_qkv, b_qkv = _linear_parts(block.self_attention.query_key_value)
        value = self._split_qkv(w_qkv)[2], None if b_qkv is None else self._split_qkv(b_qkv)[2]
        attn_pre, mlp_pre = self._norms(block)
        return _ungated(
            self.geometry, value, _linear_parts(block.self_attention.dense), _linear_parts(block.mlp.dense_h_to_4h),
            _linear_parts(block.mlp.dense_4h_to_h), activation=_activation(self.config.activation, self.model_type),
            attn_pre_norm=attn_pre, mlp_pre_norm=mlp_pre, parallel=self.geometry.parallel_attn_mlp)

    def pre_mlp_residual_module(self, block):
        """Parallel: the block input, which the attention norm receives; sequential:
        ``post_attention_layernorm`` reads ``x + attn(x)``."""
        if not self.geometry.parallel_attn_mlp:
            return block.post_attention_layernorm
        return block.ln_attn if hasattr(block, "ln_attn") else block.input_layernorm


class BertAdapter(FamilyAdapter):
    """BERT encoder blocks (post-norm, sequential)."""

    model_type = "bert"
    layer_key = "encoder.layer.{layer}"
    causal = False
    analyses = ("alignment", "continuity")
    limits = "has no causal residual stream"

    def _geometry(self, c):
        nh, _, hd = _heads(c)
        return Geometry("bert", c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nh, hd, c.hidden_act, False, False)

    def sources(self):
        g = self.geometry
        d, width = g.d_model, g.n_heads * g.head_dim
        return {
            "q": _linear("attention.self.query.weight", width, d),
            "k": _linear("attention.self.key.weight", width, d),
            "v": _linear("attention.self.value.weight", width, d),
            "o": _linear("attention.output.dense.weight", d, width),
            "up": _linear("intermediate.dense.weight", g.d_ff, d),
            "down": _linear("output.dense.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        raise NotImplementedError(
            "bert: single-token block Jacobians are not implemented for post-norm encoder blocks "
            "(every supported decoder family has them)")


# Standard transformers projection names (Llama and most of its descendants), as
# ``<layer stem>.<i>.<suffix>``; what a family without an adapter is read by.
_STANDARD_SUFFIXES = {
    "q": "self_attn.q_proj.weight", "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight", "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}


_PER_LAYER_INPUTS = (
    "not supported: its blocks take per-layer inputs that depend on the token and AltUp/Laurel branches with no "
    "adapter here, so the generic path (which reruns a block with one recorded call's arguments) would be wrong")
#: Families transformers can run that the generic path must not: a wrong Jacobian would look right.
_REFUSED = dict.fromkeys(("gemma3n", "gemma3n_text"), _PER_LAYER_INPUTS)


class GenericAdapter(FamilyAdapter):
    """A causal decoder family transformers can load but no adapter here describes.

    Blocks are found as the model's ``nn.ModuleList`` of ``num_hidden_layers`` modules; the
    single-token Jacobians are autograd of the real block (:attr:`closed_form` is False: exact,
    slower); the pre-MLP residual stream is not known (only the block inputs are recorded, so the
    topology stages cannot run); weights are read under the standard projection names
    (``self_attn.q_proj`` ... ``mlp.down_proj``) where the checkpoint has them
    (:meth:`bind_keys`), and the others are reported absent.
    """

    model_type = "generic"
    layer_key = "layers.{layer}"
    closed_form = False
    analyses = ("alignment", "continuity", "coupling", "dynamics")
    limits = "has no adapter here: the generic path records no pre-MLP residual stream"

    def __init__(self, config):
        super().__init__(config)
        self.model_type = self.config.model_type
        self._present = dict(_STANDARD_SUFFIXES)

    @staticmethod
    def accepts(config) -> bool:
        """A transformers causal LM with the standard size fields of a transformer decoder."""
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        text = config.get_text_config()
        return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and all(
            isinstance(getattr(text, key, None), int) for key in ("hidden_size", "num_hidden_layers",
                                                                  "num_attention_heads"))

    def _geometry(self, c):
        nh, nkv, hd = _heads(c)
        d_ff = getattr(c, "intermediate_size", None) or 4 * c.hidden_size
        activation = getattr(c, "hidden_act", None) or getattr(c, "hidden_activation", None) or "unknown"
        # gated / parallel are not in a config's standard fields: False, and the gate is read if stored
        return Geometry(c.model_type, c.num_hidden_layers, c.hidden_size, d_ff, nh, nkv, hd, str(activation),
                        False, False)

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        shapes = {"q": (q, d), "k": (kv, d), "v": (kv, d), "o": (d, q), "gate": (g.d_ff, d), "up": (g.d_ff, d),
                  "down": (d, g.d_ff)}
        return {name: _Source(key, shapes[name]) for name, key in self._present.items()}

    def bind_keys(self, keys) -> list[str]:
        """Find the layer stem among a checkpoint's tensor names (the one numbered 0 .. L - 1 that
        holds the most standard projections) and keep the projections stored under it.

        Returns
        -------
        list of str
            The canonical projections the checkpoint lacks under the standard names.
        """
        import re

        found = {}  # stem -> {layer index -> suffixes}
        for key in keys:
            match = re.match(r"^(.*?)\.(\d+)\.(.+)$", key)
            if match:
                found.setdefault(match[1], {}).setdefault(int(match[2]), set()).add(match[3])
        n = self.geometry.n_layers
        stems = [stem for stem, layers in found.items() if sorted(layers) == list(range(n))]
        if not stems:
            raise NotImplementedError(f"{self.model_type}: no tensors numbered by layer 0..{n - 1} found")
        stem = max(stems, key=lambda s: len(set(_STANDARD_SUFFIXES.values()) & found[s][0]))
        self.layer_key = stem + ".{layer}"
        self._present = {name: key for name, key in _STANDARD_SUFFIXES.items() if key in found[stem][0]}
        if not self._present:
            raise NotImplementedError(
                f"{self.model_type} has no adapter here, and its layers hold no tensor under the standard projection "
                f"names ({', '.join(_STANDARD_SUFFIXES.values())})")
        return [name for name in _STANDARD_SUFFIXES if name not in self._present]

    def blocks(self, model):
        """The model's one ``nn.ModuleList`` of ``num_hidden_layers`` blocks."""
        n = self.geometry.n_layers
        lists = [m for _, m in self._decoder(model).named_modules()
                 if isinstance(m, torch.nn.ModuleList) and len(m) == n]
        if len(lists) != 1:
            raise NotImplementedError(
                f"{self.model_type}: {len(lists)} module lists of {n} layers in the model; cannot tell the blocks")
        return list(lists[0])

    def pre_mlp_residual_module(self, block):
        """Not known for a family without an adapter: None (only block inputs are recorded)."""
        return None


ADAPTERS: dict[str, type[FamilyAdapter]] = {
    a.model_type: a
    for a in (GPTNeoXAdapter, LlamaAdapter, Olmo2Adapter, Olmo3Adapter, BloomAdapter, GPT2Adapter, MistralAdapter,
              Qwen2Adapter, Qwen3Adapter, Phi3Adapter, Exaone4Adapter, GemmaAdapter, Gemma2Adapter, Gemma3TextAdapter,
              Gemma3Adapter, Gemma4TextAdapter, Gemma4Adapter, PhiAdapter,
              GPTNeoAdapter, MptAdapter, FalconAdapter, BertAdapter)
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(ADAPTERS)


def adapter_for(model_or_config) -> FamilyAdapter:
    """The :class:`FamilyAdapter` of a loaded transformers model or of its config.

    A causal decoder transformers knows but no adapter describes gets the
    :class:`GenericAdapter`.

    Raises
    ------
    NotImplementedError
        ``model_type`` is neither in ``SUPPORTED_MODEL_TYPES`` nor a transformers causal decoder.
    """
    config = getattr(model_or_config, "config", model_or_config)
    model_type = getattr(config, "model_type", None)
    if model_type in ADAPTERS:
        return ADAPTERS[model_type](config)
    if model_type in _REFUSED:
        raise NotImplementedError(f"{model_type}: {_REFUSED[model_type]}")
    if model_type is not None and GenericAdapter.accepts(config):
        return GenericAdapter(config)
    raise NotImplementedError(
        f"unsupported model_type '{model_type}': no adapter (supported: {', '.join(SUPPORTED_MODEL_TYPES)}) and "
        "not a transformers causal decoder the generic path can run")


# --------------------------------------------------------------------------- storage


class _TensorStore:
    """Tensors by full key across one file or shards, opened lazily, never all loaded.

    Safetensors shards are read with ``safe_open`` (memory-mapped, one tensor per
    ``get_tensor``); ``.bin`` shards with ``torch.load(mmap=True)`` so that only the
    pages of requested tensors are touched.
    """

    def __init__(self, directory, *, context):
        self.directory, self.context = Path(directory), context
        self._open: dict[str, object] = {}
        for index, single in WEIGHT_FILES:
            if (self.directory / index).is_file():
                self.source = index  # named in "not found" errors
                try:
                    weight_map = json.loads((self.directory / index).read_text())["weight_map"]
                except (OSError, ValueError, KeyError) as e:
                    raise CheckpointError(f"unreadable shard index: {e}", **context, file=index) from e
                self.file_of = dict(weight_map)
                return
            if (self.directory / single).is_file():
                self.source = single
                self.file_of = dict.fromkeys(self._handle(single).keys(), single)
                return
        raise CheckpointError(
            "no weight files found (looked for model.safetensors[.index.json] and "
            f"pytorch_model.bin[.index.json] in {self.directory}){_gguf_hint(self.directory)}", **context)

    def _handle(self, name):
        if name not in self._open:
            path = self.directory / name
            try:
                if name.endswith(".safetensors"):
                    from safetensors import safe_open

                    self._open[name] = safe_open(str(path), framework="pt", device="cpu")
                else:
                    self._open[name] = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception as e:  # corrupt or missing shard: say which one
                raise CheckpointError(f"cannot open weight file: {e}", **self.context, file=name) from e
        return self._open[name]

    def keys(self):
        return self.file_of.keys()

    def _locate(self, key):
        name = self.file_of.get(key)
        handle = self._handle(name) if name is not None else None
        if handle is None or key not in handle.keys():
            raise CheckpointError(f"tensor '{key}' not found", **self.context, file=name or self.source)
        return name, handle

    def shape(self, key) -> tuple[int, ...]:
        name, handle = self._locate(key)
        if name.endswith(".safetensors"):
            return tuple(handle.get_slice(key).get_shape())  # header only, no data read
        return tuple(handle[key].shape)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, from each weight file's header (safetensors) or its memory map
        (``.bin``): no tensor data read. A tensor a shard index names but its shard lacks, or a
        shard that cannot be opened, is a :class:`CheckpointError` naming the file."""
        shapes = {}
        for name in sorted(set(self.file_of.values())):
            handle = self._handle(name)
            keys = set(handle.keys())
            absent = sorted(k for k, f in self.file_of.items() if f == name and k not in keys)
            if absent:
                raise CheckpointError(f"tensor '{absent[0]}' is listed in {self.source} but not stored in {name}"
                                      f" ({len(absent)} such)", **self.context, file=name)
            for key in keys:
                shapes[key] = (tuple(handle.get_slice(key).get_shape()) if name.endswith(".safetensors")
                               else tuple(handle[key].shape))
        return shapes

    def get(self, key) -> torch.Tensor:
        """Load one tensor as float32 (fp16/bf16 converted after loading just it)."""
        name, handle = self._locate(key)
        tensor = handle.get_tensor(key) if name.endswith(".safetensors") else handle[key]
        return tensor.to(torch.float32)

    def close(self):
        for handle in self._open.values():
            if hasattr(handle, "__exit__"):
                handle.__exit__(None, None, None)
        self._open.clear()


def _discover_prefix(keys, adapter, context):
    """The key prefix in front of the layer stem, e.g. ``"gpt_neox."`` or ``""``.

    Hub checkpoints differ: the original ``gpt2`` and ``bigscience/bloom-*`` files
    drop ``transformer.``, head models add ``bert.``. So look for any layer-0 key.
    """
    stem = adapter.layer_key.format(layer=0)
    suffixes = {f"{stem}.{s.key}" for s in adapter.sources().values()}
    prefixes = {k[: -len(s)] for k in keys for s in suffixes if k == s or k.endswith("." + s)}
    if adapter.prefix_filter is not None:
        prefixes = {p for p in prefixes if adapter.prefix_filter in p}
    if len(prefixes) == 1:
        return prefixes.pop()
    if not prefixes:
        raise CheckpointError(
            f"no layer-0 tensor of a {adapter.model_type} checkpoint found "
            f"(looked for keys ending in {sorted(suffixes)[0]!r} and similar)", **context)
    raise CheckpointError(f"ambiguous key prefixes {sorted(prefixes)} for layer tensors", **context)


# --------------------------------------------------------------------------- reader


class WeightReader:
    """Per-layer canonical projections of one saved checkpoint; a context manager.

    Use :func:`open_checkpoint` to create one. Only the tensors of the requested
    layer and projections are loaded, and none are kept between calls.

    Parameters
    ----------
    path : str or Path
        Directory with ``config.json`` and the weight file(s).
    model, revision : str, optional
        Named in error messages.

    Attributes
    ----------
    geometry : Geometry
    """

    def __init__(self, path, *, model=None, revision=None):
        self.path = Path(path)
        self._context = {"model": model, "revision": revision}
        self.adapter = _adapter(_read_config(self.path, self._context), self._context)
        self.geometry = self.adapter.geometry
        self._store = _TensorStore(self.path, context=self._context)
        if isinstance(self.adapter, GenericAdapter):
            try:
                missing = self.adapter.bind_keys(self._store.keys())
            except NotImplementedError as e:
                self._store.close()
                raise CheckpointError(str(e), **self._context, file=self._store.source) from None
            if missing:
                log.warning("%s (no adapter): no tensors under the standard names for %s; reported absent",
                            self.adapter.model_type, ", ".join(missing))
        try:
            self._prefix = _discover_prefix(self._store.keys(), self.adapter, self._context)
        except CheckpointError as e:
            self._store.close()
            raise e.with_context(file=self._store.source) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Release the memory-mapped files."""
        self._store.close()

    def __repr__(self):
        return f"WeightReader({str(self.path)!r}, {self.geometry})"

    def projections(self, layer, names=PROJECTIONS) -> dict[str, torch.Tensor]:
        """Canonical projection matrices of one layer.

        Parameters
        ----------
        layer : int
            Block index, ``0 <= layer < geometry.n_layers``.
        names : iterable of str
            Subset of ``("q", "k", "v", "o", "gate", "up", "down")``. ``"gate"``
            is silently left out for non-gated MLPs.

        Returns
        -------
        dict of str to torch.Tensor
            float32 CPU tensors in ``(out, in)`` layout: ``q`` ``(n_heads*head_dim, d)``,
            ``k``/``v`` ``(n_kv_heads*head_dim, d)``, ``o`` ``(d, n_heads*head_dim)``,
            ``gate``/``up`` ``(d_ff, d)``, ``down`` ``(d, d_ff)``.

        Raises
        ------
        CheckpointError
            A tensor is missing, has an unexpected shape, or holds NaN/Inf.
        """
        names = tuple(names)
        unknown = set(names) - set(PROJECTIONS)
        if unknown:
            raise ValueError(f"unknown projection(s) {sorted(unknown)}; choose from {PROJECTIONS}")
        if not 0 <= layer < self.geometry.n_layers:
            raise IndexError(f"layer {layer} out of range for {self.geometry.n_layers} layers")
        stem = self._prefix + self.adapter.layer_key.format(layer=layer)
        sources = self.adapter.layer_sources(layer)
        loaded = {}  # fused QKV is read once even when q, k and v are all asked for
        out = {}
        for name in names:
            if name not in sources:
                continue  # "gate" of a non-gated MLP; Gemma 4's KV-shared layers have no k, v
            source = sources[name]
            key = f"{stem}.{source.key}"
            if key not in loaded:
                loaded[key] = self._load(key, source.shape)
            matrix = source.take(loaded[key]).contiguous()
            if not torch.isfinite(matrix).all():
                bad = int((~torch.isfinite(matrix)).sum())
                raise CheckpointError(
                    f"layer {layer} projection '{name}' (tensor '{key}') has {bad} non-finite "
                    "value(s) (NaN/Inf)", **self._context, file=self._store.file_of.get(key))
            out[name] = matrix
        return out

    def mlp(self, layer) -> tuple[torch.Tensor, torch.Tensor]:
        """``(up, down)`` of one layer, shapes ``(d_ff, d)`` and ``(d, d_ff)``."""
        w = self.projections(layer, names=("up", "down"))
        if len(w) < 2:
            raise CheckpointError(f"no MLP {' and '.join(n for n in ('up', 'down') if n not in w)} projection "
                                  f"under the names this family is read by", **self._context, file=self._store.source)
        return w["up"], w["down"]

    def _load(self, key, expected):
        actual = self._store.shape(key)
        if actual != expected:
            raise CheckpointError(
                f"tensor '{key}' has shape {actual}, expected {expected}",
                **self._context, file=self._store.file_of.get(key))
        return self._store.get(key)


def _gguf_hint(path):
    """How to convert a GGUF-only checkpoint directory, or "" when it holds no GGUF file."""
    ggufs = sorted(p.name for p in Path(path).glob("*.gguf"))
    if not ggufs:
        return ""
    return (f"; it holds GGUF ({', '.join(ggufs[:3])}), which is read only as safetensors: convert it once with "
            f"transformers, AutoModelForCausalLM.from_pretrained(dir, gguf_file={ggufs[0]!r}, "
            "dtype=torch.float32).save_pretrained(new_dir), plus the tokenizer, and point the model at new_dir "
            "(quantized GGUF weights are dequantized, so the numbers describe the quantized model)")


def _read_config(path, context):
    """The checkpoint's transformers config (defaults filled in, no remote code)."""
    config_file = path / "config.json"
    try:
        raw = json.loads(config_file.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"config.json missing in {path}{_gguf_hint(path)}", **context) from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"unreadable config: {e}", **context, file="config.json") from e
    model_type = raw.get("model_type")
    from transformers import AutoConfig  # imported late: slow, and only needed here
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type not in ADAPTERS and model_type not in CONFIG_MAPPING_NAMES:
        remote = (f"; its config.json points to custom code (auto_map: {sorted(raw['auto_map'])}), which this "
                  "workflow never runs (trust_remote_code is off): use a checkpoint of a transformers architecture "
                  "(many hub repos of such models have one, often under another revision or repo)"
                  if raw.get("auto_map") else "")
        raise CheckpointError(
            f"unsupported model_type '{model_type}': no adapter (supported: {', '.join(SUPPORTED_MODEL_TYPES)}) and "
            f"unknown to the installed transformers{remote}", **context, file="config.json")
    try:
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False, local_files_only=True)
    except Exception as e:
        raise CheckpointError(f"cannot parse config: {e}", **context, file="config.json") from e


def _adapter(config, context):
    """The family adapter of a checkpoint's config; a variant it does not support is named."""
    try:
        return adapter_for(config)
    except NotImplementedError as e:
        raise CheckpointError(str(e), **context, file="config.json") from None


def checkpoint_adapter(path, *, model=None, revision=None) -> FamilyAdapter:
    """The family adapter of a saved checkpoint, from its config.json alone (no weights read).

    Raises
    ------
    CheckpointError
        config.json missing or unreadable, or a family neither adapted nor generic.
    """
    context = {"model": model, "revision": revision}
    return _adapter(_read_config(Path(path), context), context)


def tensor_shapes(path, *, model=None, revision=None) -> dict[str, tuple[int, ...]]:
    """Every tensor a saved checkpoint's weight files hold, by key, with its shape; read from the
    files' headers, no tensor data loaded (see ``_TensorStore.shapes``).

    Raises
    ------
    CheckpointError
        No weight files, an unreadable shard index or shard, or a tensor the index lists that its
        shard lacks.
    """
    store = _TensorStore(Path(path), context={"model": model, "revision": revision})
    try:
        return store.shapes()
    finally:
        store.close()


def read_geometry(path, *, model=None, revision=None) -> Geometry:
    """The :class:`Geometry` of a saved checkpoint, from its config.json alone (no weights read).

    Raises
    ------
    CheckpointError
        config.json missing or unreadable, or ``model_type`` not in ``SUPPORTED_MODEL_TYPES``.
    """
    return checkpoint_adapter(path, model=model, revision=revision).geometry


def open_checkpoint(path, *, model=None, revision=None) -> WeightReader:
    """Open a saved checkpoint directory for per-layer reading.

    Parameters
    ----------
    path : str or Path
        Directory with ``config.json`` and ``model.safetensors`` (or its sharded
        index), falling back to ``pytorch_model.bin`` (or its index).
    model, revision : str, optional
        Named in every error message.

    Returns
    -------
    WeightReader
        Use as a context manager, or call ``close()``.

    Raises
    ------
    CheckpointError
        config.json missing, ``model_type`` not in ``SUPPORTED_MODEL_TYPES``, or no
        weight files.
    """
    return WeightReader(path, model=model, revision=revision)
