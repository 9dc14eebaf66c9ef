"""MPT.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    layernorm_parts,
    linear_parts,
    linear_source,
    rows_source,
    ungated_parts,
)


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
            "q": rows_source("attn.Wqkv.weight", (3 * d, d), 0, d),
            "k": rows_source("attn.Wqkv.weight", (3 * d, d), d, 2 * d),
            "v": rows_source("attn.Wqkv.weight", (3 * d, d), 2 * d, 3 * d),
            "o": linear_source("attn.out_proj.weight", d, d),
            "up": linear_source("ffn.up_proj.weight", g.d_ff, d),
            "down": linear_source("ffn.down_proj.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        d = self.geometry.d_model
        w_qkv, b_qkv = linear_parts(block.attn.Wqkv)  # (3 d, d): q, k, v stacked
        value = w_qkv[2 * d:], None if b_qkv is None else b_qkv[2 * d:]
        return ungated_parts(
            self.geometry, value, linear_parts(block.attn.out_proj), linear_parts(block.ffn.up_proj),
            linear_parts(block.ffn.down_proj), activation="gelu", attn_pre_norm=layernorm_parts(block.norm_1),
            mlp_pre_norm=layernorm_parts(block.norm_2))

    def pre_mlp_residual_module(self, block):
        """``norm_2`` reads ``x + attn(x)``."""
        return block.norm_2
