"""EXAONE 4.
"""

from crosslayer.models.adapters.olmo2 import Olmo2Adapter


class Exaone4Adapter(Olmo2Adapter):
    """EXAONE 4.0: OLMo 2's block (RMSNorm on each sublayer's output inside the residual,
    q_norm/k_norm) and Llama names; its global layers drop RoPE, which one token never sees."""

    model_type = "exaone4"
