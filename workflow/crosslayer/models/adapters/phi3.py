"""Phi-3.
"""

from crosslayer.models.adapters.base import _linear, _linear_parts, _rows
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
            "q": _rows(qkv, qkv_shape, 0, q),
            "k": _rows(qkv, qkv_shape, q, q + kv),
            "v": _rows(qkv, qkv_shape, q + kv, q + 2 * kv),
            "o": _linear("self_attn.o_proj.weight", d, q),
            "gate": _rows(gate_up, gate_up_shape, 0, g.d_ff),
            "up": _rows(gate_up, gate_up_shape, g.d_ff, 2 * g.d_ff),
            "down": _linear("mlp.down_proj.weight", d, g.d_ff),
        }

    def _value_gate_up(self, block):
        g = self.geometry
        start = (g.n_heads + g.n_kv_heads) * g.head_dim  # value rows follow the queries and keys
        w_qkv, b_qkv = _linear_parts(block.self_attn.qkv_proj)
        w_gu, b_gu = _linear_parts(block.mlp.gate_up_proj)
        cut = lambda t, a, b: None if t is None else t[a:b]  # noqa: E731
        return ((w_qkv[start:], cut(b_qkv, start, None)), (w_gu[: g.d_ff], cut(b_gu, 0, g.d_ff)),
                (w_gu[g.d_ff:], cut(b_gu, g.d_ff, None)))
