"""Falcon.
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    Source,
    activation_name,
    layernorm_parts,
    linear_parts,
    linear_source,
    ungated_parts,
)


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
            **{name: Source(key, shape, lambda w, i=i: self._split_qkv(w)[i]) for i, name in enumerate("qkv")},
            "o": linear_source("self_attention.dense.weight", d, q),
            "up": linear_source("mlp.dense_h_to_4h.weight", g.d_ff, d),
            "down": linear_source("mlp.dense_4h_to_h.weight", d, g.d_ff),
        }

    def _norms(self, block):
        """``(attention's pre-norm, MLP's pre-norm)`` as the block applies them."""
        if self.geometry.parallel_attn_mlp and hasattr(block, "ln_attn"):
            return layernorm_parts(block.ln_attn), layernorm_parts(block.ln_mlp)
        if self.geometry.parallel_attn_mlp:
            return (layernorm_parts(block.input_layernorm),) * 2
        return layernorm_parts(block.input_layernorm), layernorm_parts(block.post_attention_layernorm)

    def block_parts(self, block):
        w_qkv, b_qkv = linear_parts(block.self_attention.query_key_value)
        value = self._split_qkv(w_qkv)[2], None if b_qkv is None else self._split_qkv(b_qkv)[2]
        attn_pre, mlp_pre = self._norms(block)
        return ungated_parts(
            self.geometry, value, linear_parts(block.self_attention.dense), linear_parts(block.mlp.dense_h_to_4h),
            linear_parts(block.mlp.dense_4h_to_h), activation=activation_name(self.config.activation, self.model_type),
            attn_pre_norm=attn_pre, mlp_pre_norm=mlp_pre, parallel=self.geometry.parallel_attn_mlp)

    def pre_mlp_residual_module(self, block):
        """Parallel: the block input, which the attention norm receives; sequential:
        ``post_attention_layernorm`` reads ``x + attn(x)``."""
        if not self.geometry.parallel_attn_mlp:
            return block.post_attention_layernorm
        return block.ln_attn if hasattr(block, "ln_attn") else block.input_layernorm
