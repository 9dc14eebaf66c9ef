"""Qwen 2.
"""

from crosslayer.models.adapters.llama import LlamaAdapter


class Qwen2Adapter(LlamaAdapter):
    """Qwen2 / Qwen2.5: Llama's block and names, with q/k/v biases (read with the weights)."""

    model_type = "qwen2"
