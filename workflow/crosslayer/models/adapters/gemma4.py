"""Gemma 4 (text and multimodal).
"""

import dataclasses

import numpy as np

from crosslayer.models.adapters.base import (
    GateParts,
    Geometry,
    activation_name,
    float32_detached,
    linear_source,
    rmsnorm_parts,
)
from crosslayer.models.adapters.llama import LlamaAdapter
from crosslayer.models.blocks import block_calls


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
    uniform_layers = False
    own_attention = False
    limits = ("has projections that change shape across layers (wider global heads, KV-shared layers without keys "
              "and values, double-wide MLPs), and KV-shared layers that attend to an earlier layer's keys and values")

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
            "q": linear_source("self_attn.q_proj.weight", q_width, d),
            "o": linear_source("self_attn.o_proj.weight", d, q_width),
            "gate": linear_source("mlp.gate_proj.weight", d_ff, d),
            "up": linear_source("mlp.up_proj.weight", d_ff, d),
            "down": linear_source("mlp.down_proj.weight", d, d_ff),
        }
        if not shared:
            sources["k"] = linear_source("self_attn.k_proj.weight", kv_width, d)
            k_is_v = c.attention_k_eq_v and c.layer_types[layer] != "sliding_attention"
            sources["v"] = sources["k"] if k_is_v else linear_source("self_attn.v_proj.weight", kv_width, d)
        return sources

    def sources(self):
        return self.layer_sources(0)

    def gate_parts(self, block):
        mlp = block.mlp
        return GateParts(rmsnorm_parts(block.pre_feedforward_layernorm), float32_detached(mlp.gate_proj.weight), None,
                         float32_detached(mlp.up_proj.weight), float32_detached(mlp.down_proj.weight),
                         activation_name(self.geometry.mlp_activation, self.model_type))

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
