"""Gemma 2.
"""

from crosslayer.models.adapters.gemma3 import Gemma3TextAdapter


class Gemma2Adapter(Gemma3TextAdapter):
    """Gemma 2: Gemma 3's block (sandwich norms, GeGLU) without q/k norms; its attention
    soft-capping acts on query-key logits, which one token's attention does not depend on."""

    model_type = "gemma2"
