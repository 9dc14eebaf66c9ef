"""GPT-Neo.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    activation_name,
    head_counts,
    layernorm_parts,
    linear_parts,
    linear_source,
    ungated_parts,
)


class GPTNeoAdapter(FamilyAdapter):
    """GPT-Neo: GPT-2's pre-norm sequential block with ``nn.Linear`` weights (q/k/v without
    bias) under ``attn.attention``; local-attention layers differ only beyond one token."""

    model_type = "gpt_neo"
    layer_key = "h.{layer}"

    def _geometry(self, c):
        nh, _, hd = head_counts(c)
        d = c.hidden_size
        return Geometry("gpt_neo", c.num_layers, d, c.intermediate_size or 4 * d, nh, nh, hd,
                        c.activation_function, False, False)

    def sources(self):
        g = self.geometry
        d, width = g.d_model, g.n_heads * g.head_dim
        return {
            "q": linear_source("attn.attention.q_proj.weight", width, d),
            "k": linear_source("attn.attention.k_proj.weight", width, d),
            "v": linear_source("attn.attention.v_proj.weight", width, d),
            "o": linear_source("attn.attention.out_proj.weight", d, width),
            "up": linear_source("mlp.c_fc.weight", g.d_ff, d),
            "down": linear_source("mlp.c_proj.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        attn = block.attn.attention
        return ungated_parts(
            self.geometry, linear_parts(attn.v_proj), linear_parts(attn.out_proj), linear_parts(block.mlp.c_fc),
            linear_parts(block.mlp.c_proj), activation=activation_name(self.config.activation_function, self.model_type),
            attn_pre_norm=layernorm_parts(block.ln_1), mlp_pre_norm=layernorm_parts(block.ln_2))

    def pre_mlp_residual_module(self, block):
        """``ln_2`` normalises the MLP input ``x + attn(x)``."""
        return block.ln_2
