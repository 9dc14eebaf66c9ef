"""OLMo 3.
"""

from crosslayer.models.adapters.olmo2 import Olmo2Adapter


class Olmo3Adapter(Olmo2Adapter):
    """OLMo 3: OLMo 2's block (post-sublayer RMSNorm inside the residual, q_norm/k_norm) and
    weight names. Three of every four layers use sliding-window attention and the rotary
    embedding may differ per layer type (YaRN on full-attention layers after long-context
    training); neither changes a one-token sequence, where softmax over one key is 1."""

    model_type = "olmo3"
