"""OLMo 2.
"""

from crosslayer.models.adapters.base import BlockParts, rmsnorm_parts
from crosslayer.models.adapters.llama import LlamaAdapter


class Olmo2Adapter(LlamaAdapter):
    """OLMo 2: Llama projection names; its q_norm/k_norm act after q/k (not read yet)."""

    model_type = "olmo2"

    def block_parts(self, block):
        """No input norms: RMSNorm on each sublayer's *output* before the residual add
        (``post_attention_layernorm``, ``post_feedforward_layernorm``). q_norm/k_norm do
        not matter for one token."""
        return BlockParts(**self._weights(block), attn_post_norm=rmsnorm_parts(block.post_attention_layernorm),
                          mlp_post_norm=rmsnorm_parts(block.post_feedforward_layernorm))

    def pre_mlp_residual_module(self, block):
        """No MLP pre-norm: the MLP itself reads ``x + post_attention_layernorm(attn(x))``."""
        return block.mlp
