"""GPT-NeoX (Pythia): fused per-head QKV.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    _activation,
    _fused_per_head,
    _heads,
    _layernorm,
    _linear,
    _linear_parts,
    _ungated,
)


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
