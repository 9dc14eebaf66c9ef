"""BERT (encoder).
"""

from crosslayer.models.adapters.base import FamilyAdapter, Geometry, head_counts, linear_source


class BertAdapter(FamilyAdapter):
    """BERT encoder blocks (post-norm, sequential)."""

    model_type = "bert"
    layer_key = "encoder.layer.{layer}"
    causal = False
    limits = "has no causal residual stream"

    def _geometry(self, c):
        nh, _, hd = head_counts(c)
        return Geometry("bert", c.num_hidden_layers, c.hidden_size, c.intermediate_size,
                        nh, nh, hd, c.hidden_act, False, False)

    def sources(self):
        g = self.geometry
        d, width = g.d_model, g.n_heads * g.head_dim
        return {
            "q": linear_source("attention.self.query.weight", width, d),
            "k": linear_source("attention.self.key.weight", width, d),
            "v": linear_source("attention.self.value.weight", width, d),
            "o": linear_source("attention.output.dense.weight", d, width),
            "up": linear_source("intermediate.dense.weight", g.d_ff, d),
            "down": linear_source("output.dense.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        raise NotImplementedError(
            "bert: single-token block Jacobians are not implemented for post-norm encoder blocks "
            "(every supported decoder family has them)")
