"""Gemma.
"""

from crosslayer.models.adapters.base import BlockParts, gemma_rmsnorm_parts
from crosslayer.models.adapters.llama import LlamaAdapter


class GemmaAdapter(LlamaAdapter):
    """Gemma (1): Llama's pre-norm block and names with GeGLU and RMSNorms scaling by
    ``1 + weight``; the embedding scale ``sqrt(d)`` acts before the first block."""

    model_type = "gemma"

    def block_parts(self, block):
        return BlockParts(**self._weights(block), attn_pre_norm=gemma_rmsnorm_parts(block.input_layernorm),
                          mlp_pre_norm=gemma_rmsnorm_parts(block.post_attention_layernorm))
