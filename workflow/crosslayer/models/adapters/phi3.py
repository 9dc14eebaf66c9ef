"""Phi-3.
"""

from crosslayer.models.adapters.base import linear_parts, linear_source, rows_source
from crosslayer.models.adapters.llama import LlamaAdapter


class Phi3Adapter(LlamaAdapter):
    """Phi-3: Llama's pre-norm block with fused ``qkv_proj`` (q, k, v stacked by rows) and
    ``gate_up_proj`` (gate rows first: ``up * act(gate)`` after ``chunk(2)``)."""

    model_type = "phi3"

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        qkv, qkv_shape = "self_attn.qkv_proj.weight", (q + 2 * kv, d)
        gate_up, gate_up_shape = "mlp.gate_up_proj.weight", (2 * g.d_ff, d)
        return {
            "q": rows_source(qkv, qkv_shape, 0, q),
            "k": rows_source(qkv, qkv_shape, q, q + kv),
            "v": rows_source(qkv, qkv_shape, q + kv, q + 2 * kv),
            "o": linear_source("self_attn.o_proj.weight", d, q),
            "gate": rows_source(gate_up, gate_up_shape, 0, g.d_ff),
            "up": rows_source(gate_up, gate_up_shape, g.d_ff, 2 * g.d_ff),
            "down": linear_source("mlp.down_proj.weight", d, g.d_ff),
        }

    def _value_gate_up(self, block):
        g = self.geometry
        start = (g.n_heads + g.n_kv_heads) * g.head_dim  # value rows follow the queries and keys
        w_qkv, b_qkv = linear_parts(block.self_attn.qkv_proj)
        w_gu, b_gu = linear_parts(block.mlp.gate_up_proj)
        cut = lambda t, a, b: None if t is None else t[a:b]  # noqa: E731
        return ((w_qkv[start:], cut(b_qkv, start, None)), (w_gu[: g.d_ff], cut(b_gu, 0, g.d_ff)),
                (w_gu[g.d_ff:], cut(b_gu, g.d_ff, None)))
