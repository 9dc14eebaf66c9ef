"""BLOOM.
"""

from crosslayer.models.adapters.base import Geometry, head_counts, layernorm_parts, linear_parts, ungated_parts
from crosslayer.models.adapters.gpt_neox import GPTNeoXAdapter


class BloomAdapter(GPTNeoXAdapter):
    """BLOOM: GPT-NeoX's fused per-head QKV and MLP names, sequential blocks, 4d GELU MLP
    (tanh approximation, no config field)."""

    model_type = "bloom"
    layer_key = "h.{layer}"
    attention = "self_attention"

    def _geometry(self, c):
        nh, _, hd = head_counts(c)
        d = c.hidden_size
        return Geometry("bloom", c.num_hidden_layers, d, 4 * d, nh, nh, hd, "gelu_new", False, False)

    def block_parts(self, block):
        """Pre-norm LayerNorms, sequential; GELU tanh approximation (``bloom_gelu_forward``)."""
        if block.apply_residual_connection_post_layernorm:
            raise NotImplementedError(
                "bloom: apply_residual_connection_post_layernorm=True (residual taken after the norm) "
                "is not supported for single-token Jacobians")
        return ungated_parts(
            self.geometry, self._fused_v(block.self_attention), linear_parts(block.self_attention.dense),
            linear_parts(block.mlp.dense_h_to_4h), linear_parts(block.mlp.dense_4h_to_h), activation="gelu_tanh",
            attn_pre_norm=layernorm_parts(block.input_layernorm), mlp_pre_norm=layernorm_parts(block.post_attention_layernorm))

    def pre_mlp_residual_module(self, block):
        """``post_attention_layernorm`` reads ``self_attention``'s output, which already
        includes the residual add (``dropout_add``)."""
        if block.apply_residual_connection_post_layernorm:
            raise NotImplementedError(
                "bloom: apply_residual_connection_post_layernorm=True (residual taken after the norm) "
                "has no pre-MLP residual stream")
        return block.post_attention_layernorm
