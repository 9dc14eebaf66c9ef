"""Gemma 3 (text and multimodal).
"""

from crosslayer.models.adapters.base import BlockParts, gemma_rmsnorm_parts
from crosslayer.models.adapters.llama import LlamaAdapter


class Gemma3TextAdapter(LlamaAdapter):
    """Gemma 3 text decoders: Llama names, GeGLU (tanh GELU gate) and "sandwich" RMSNorms
    around both sublayers (``input_layernorm`` / ``post_attention_layernorm``,
    ``pre_feedforward_layernorm`` / ``post_feedforward_layernorm``), each scaling by
    ``1 + weight``. The embedding scale ``sqrt(d)`` acts before the first block, q/k norms,
    attention soft-capping and sliding windows on queries and keys only, and the final
    logit soft-capping after the last block: none enters a block's one-token Jacobian."""

    model_type = "gemma3_text"

    def _mlp_activation(self, c):
        return c.hidden_activation

    def block_parts(self, block):
        return BlockParts(**self._weights(block), attn_pre_norm=gemma_rmsnorm_parts(block.input_layernorm),
                          attn_post_norm=gemma_rmsnorm_parts(block.post_attention_layernorm),
                          mlp_pre_norm=gemma_rmsnorm_parts(block.pre_feedforward_layernorm),
                          mlp_post_norm=gemma_rmsnorm_parts(block.post_feedforward_layernorm))

    def pre_mlp_residual_module(self, block):
        """``pre_feedforward_layernorm`` reads ``x + post_attention_layernorm(attn(x))``."""
        return block.pre_feedforward_layernorm


class Gemma3Adapter(Gemma3TextAdapter):
    """Gemma 3 (4B and up) as released: the text decoder inside a vision-language model; only
    the language model's blocks are read (the vision tower has layers of the same names)."""

    model_type = "gemma3"
    prefix_filter = "language_model"

    def _decoder(self, model):
        return model.base_model.language_model
