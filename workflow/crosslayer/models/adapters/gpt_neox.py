"""GPT-NeoX (Pythia): fused per-head QKV.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    activation_name,
    fused_per_head_source,
    head_counts,
    layernorm_parts,
    linear_parts,
    linear_source,
    ungated_parts,
)


class GPTNeoXAdapter(FamilyAdapter):
    """Pythia and other GPT-NeoX: fused, head-interleaved QKV; parallel residual."""

    model_type = "gpt_neox"
    layer_key = "layers.{layer}"
    attention = "attention"  # module holding query_key_value and dense

    def _geometry(self, c):
        nh, _, hd = head_counts(c)
        return Geometry("gpt_neox", c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nh, hd, c.hidden_act, False, bool(c.use_parallel_residual))

    def sources(self):
        g, qkv = self.geometry, f"{self.attention}.query_key_value.weight"
        return {
            "q": fused_per_head_source(qkv, g, 0),
            "k": fused_per_head_source(qkv, g, 1),
            "v": fused_per_head_source(qkv, g, 2),
            "o": linear_source(f"{self.attention}.dense.weight", g.d_model, g.n_heads * g.head_dim),
            "up": linear_source("mlp.dense_h_to_4h.weight", g.d_ff, g.d_model),
            "down": linear_source("mlp.dense_4h_to_h.weight", g.d_model, g.d_ff),
        }

    def _fused_v(self, attention):
        """Value rows of the fused per-head QKV (weight and bias)."""
        g = self.geometry
        nh, hd, d = g.n_heads, g.head_dim, g.d_model
        w, b = linear_parts(attention.query_key_value)
        w_v = w.view(nh, 3, hd, d)[:, 2].reshape(nh * hd, d)
        b_v = None if b is None else b.view(nh, 3, hd)[:, 2].reshape(nh * hd)
        return w_v, b_v

    def block_parts(self, block):
        return ungated_parts(
            self.geometry, self._fused_v(block.attention), linear_parts(block.attention.dense),
            linear_parts(block.mlp.dense_h_to_4h), linear_parts(block.mlp.dense_4h_to_h),
            activation=activation_name(self.config.hidden_act, self.model_type),
            attn_pre_norm=layernorm_parts(block.input_layernorm), mlp_pre_norm=layernorm_parts(block.post_attention_layernorm),
            parallel=bool(block.use_parallel_residual))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` normalises the MLP input: it reads ``x + attn(x)``
        in sequential blocks and the block input ``x`` under ``use_parallel_residual``."""
        return block.post_attention_layernorm
