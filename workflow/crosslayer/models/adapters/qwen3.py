"""Qwen 3.
"""

from crosslayer.models.adapters.llama import LlamaAdapter


class Qwen3Adapter(LlamaAdapter):
    """Qwen3: Llama's block and names, explicit ``head_dim``; its q_norm/k_norm act on queries
    and keys only, which one token's attention does not depend on."""

    model_type = "qwen3"
