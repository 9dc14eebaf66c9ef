"""GPT-2: Conv1D layers, fused QKV.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    activation_name,
    conv1d_parts,
    conv1d_source,
    fused_conv1d_source,
    head_counts,
    layernorm_parts,
    ungated_parts,
)


class GPT2Adapter(FamilyAdapter):
    """GPT-2: Conv1D weights stored ``(in, out)``; ``c_attn`` holds q, k, v side by side."""

    model_type = "gpt2"
    layer_key = "h.{layer}"

    def _geometry(self, c):
        nh, _, hd = head_counts(c)
        d = c.hidden_size
        return Geometry("gpt2", c.num_hidden_layers, d, c.n_inner or 4 * d, nh, nh, hd,
                        c.activation_function, False, False)

    def sources(self):
        g, qkv = self.geometry, "attn.c_attn.weight"
        return {
            "q": fused_conv1d_source(qkv, g, 0),
            "k": fused_conv1d_source(qkv, g, 1),
            "v": fused_conv1d_source(qkv, g, 2),
            "o": conv1d_source("attn.c_proj.weight", g.d_model, g.n_heads * g.head_dim),
            "up": conv1d_source("mlp.c_fc.weight", g.d_ff, g.d_model),
            "down": conv1d_source("mlp.c_proj.weight", g.d_model, g.d_ff),
        }

    def block_parts(self, block):
        """Pre-norm LayerNorms ``ln_1``/``ln_2``, sequential; Conv1D weights transposed."""
        g = self.geometry
        width = g.n_heads * g.head_dim
        w_qkv, b_qkv = conv1d_parts(block.attn.c_attn)  # (3 width, d): q, k, v stacked
        value = w_qkv[2 * width:], None if b_qkv is None else b_qkv[2 * width:]
        return ungated_parts(
            g, value, conv1d_parts(block.attn.c_proj), conv1d_parts(block.mlp.c_fc), conv1d_parts(block.mlp.c_proj),
            activation=activation_name(self.config.activation_function, self.model_type),
            attn_pre_norm=layernorm_parts(block.ln_1), mlp_pre_norm=layernorm_parts(block.ln_2))

    def pre_mlp_residual_module(self, block):
        """``ln_2`` normalises the MLP input ``x + attn(x)`` (no cross-attention in decoders)."""
        if getattr(block, "crossattention", None) is not None:
            raise NotImplementedError("gpt2: blocks with cross-attention are not supported")
        return block.ln_2
