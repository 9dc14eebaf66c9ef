"""Llama.
"""

from crosslayer.models.adapters.base import (
    BlockParts,
    FamilyAdapter,
    Geometry,
    _activation,
    _attention_parts,
    _heads,
    _linear,
    _linear_parts,
    _rmsnorm,
)


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
