"""Mistral.
"""

from crosslayer.models.adapters.llama import LlamaAdapter


class MistralAdapter(LlamaAdapter):
    """Mistral: Llama's block and names; sliding-window attention does not change one token."""

    model_type = "mistral"
