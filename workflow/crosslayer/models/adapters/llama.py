"""Llama.
"""

from crosslayer.models.adapters.base import (
    BlockParts,
    FamilyAdapter,
    Geometry,
    activation_name,
    attention_parts,
    head_counts,
    linear_parts,
    linear_source,
    rmsnorm_parts,
)


class LlamaAdapter(FamilyAdapter):
    """Llama, TinyLlama, SmolLM: separate q/k/v (GQA), SwiGLU MLP."""

    model_type = "llama"
    layer_key = "layers.{layer}"

    def _geometry(self, c):
        nh, nkv, hd = head_counts(c)
        return Geometry(self.model_type, c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nkv, hd, self._mlp_activation(c), True, False)

    def _mlp_activation(self, c):
        return c.hidden_act

    def sources(self):
        g = self.geometry
        d, q_width, kv_width = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        return {
            "q": linear_source("self_attn.q_proj.weight", q_width, d),
            "k": linear_source("self_attn.k_proj.weight", kv_width, d),
            "v": linear_source("self_attn.v_proj.weight", kv_width, d),
            "o": linear_source("self_attn.o_proj.weight", d, q_width),
            "gate": linear_source("mlp.gate_proj.weight", g.d_ff, d),
            "up": linear_source("mlp.up_proj.weight", g.d_ff, d),
            "down": linear_source("mlp.down_proj.weight", d, g.d_ff),
        }

    def _value_gate_up(self, block):
        """``(w_v, b_v), (w_gate, b_gate), (w_up, b_up)`` of a loaded block."""
        attn, mlp = block.self_attn, block.mlp
        return linear_parts(attn.v_proj), linear_parts(mlp.gate_proj), linear_parts(mlp.up_proj)

    def _weights(self, block):
        (w_v, b_v), (w_gate, b_gate), (w_up, b_up) = self._value_gate_up(block)
        w_o, b_o = linear_parts(block.self_attn.o_proj)
        w_down, b_down = linear_parts(block.mlp.down_proj)
        return dict(**attention_parts(w_v, b_v, w_o, b_o, self.geometry), w_gate=w_gate, b_gate=b_gate,
                    w_up=w_up, b_up=b_up, w_down=w_down, b_down=b_down,
                    activation=activation_name(self.geometry.mlp_activation, self.model_type))

    def block_parts(self, block):
        """Pre-norm RMSNorm before attention (``input_layernorm``) and before the MLP
        (``post_attention_layernorm``, despite its name)."""
        return BlockParts(**self._weights(block), attn_pre_norm=rmsnorm_parts(block.input_layernorm),
                          mlp_pre_norm=rmsnorm_parts(block.post_attention_layernorm))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` is the MLP's pre-norm; it reads ``x + attn(x)``."""
        return block.post_attention_layernorm
