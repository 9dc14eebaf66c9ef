"""GPT-2: Conv1D layers, fused QKV.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    _activation,
    _conv1d,
    _conv1d_parts,
    _fused_conv1d,
    _heads,
    _layernorm,
    _ungated,
)


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
