"""Phi (1, 1.5, 2).
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    _activation,
    _heads,
    _layernorm,
    _linear,
    _linear_parts,
    _ungated,
)


class PhiAdapter(FamilyAdapter):
    """Phi-1, Phi-1.5, Phi-2: one LayerNorm feeds attention and MLP in parallel
    (``out = x + attn(ln(x)) + mlp(ln(x))``); separate biased q/k/v, ``dense``, ``fc1``/``fc2``."""

    model_type = "phi"
    layer_key = "layers.{layer}"

    def _geometry(self, c):
        nh, nkv, hd = _heads(c)
        return Geometry("phi", c.num_hidden_layers, c.hidden_size, c.intermediate_size, nh, nkv, hd,
                        c.hidden_act, False, True)

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        return {
            "q": _linear("self_attn.q_proj.weight", q, d),
            "k": _linear("self_attn.k_proj.weight", kv, d),
            "v": _linear("self_attn.v_proj.weight", kv, d),
            "o": _linear("self_attn.dense.weight", d, q),
            "up": _linear("mlp.fc1.weight", g.d_ff, d),
            "down": _linear("mlp.fc2.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        norm = _layernorm(block.input_layernorm)
        return _ungated(
            self.geometry, _linear_parts(block.self_attn.v_proj), _linear_parts(block.self_attn.dense),
            _linear_parts(block.mlp.fc1), _linear_parts(block.mlp.fc2),
            activation=_activation(self.config.hidden_act, self.model_type), attn_pre_norm=norm, mlp_pre_norm=norm,
            parallel=True)

    def pre_mlp_residual_module(self, block):
        """Parallel block: the MLP reads the block input, which ``input_layernorm`` receives."""
        return block.input_layernorm
