"""Phi (1, 1.5, 2).
"""

from crosslayer.models.adapters.base import (
    FamilyAdapter,
    Geometry,
    activation_name,
    head_counts,
    layernorm_parts,
    linear_parts,
    linear_source,
    ungated_parts,
)


class PhiAdapter(FamilyAdapter):
    """Phi-1, Phi-1.5, Phi-2: one LayerNorm feeds attention and MLP in parallel
    (``out = x + attn(ln(x)) + mlp(ln(x))``); separate biased q/k/v, ``dense``, ``fc1``/``fc2``."""

    model_type = "phi"
    layer_key = "layers.{layer}"

    def _geometry(self, c):
        nh, nkv, hd = head_counts(c)
        return Geometry("phi", c.num_hidden_layers, c.hidden_size, c.intermediate_size, nh, nkv, hd,
                        c.hidden_act, False, True)

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        return {
            "q": linear_source("self_attn.q_proj.weight", q, d),
            "k": linear_source("self_attn.k_proj.weight", kv, d),
            "v": linear_source("self_attn.v_proj.weight", kv, d),
            "o": linear_source("self_attn.dense.weight", d, q),
            "up": linear_source("mlp.fc1.weight", g.d_ff, d),
            "down": linear_source("mlp.fc2.weight", d, g.d_ff),
        }

    def block_parts(self, block):
        norm = layernorm_parts(block.input_layernorm)
        return ungated_parts(
            self.geometry, linear_parts(block.self_attn.v_proj), linear_parts(block.self_attn.dense),
            linear_parts(block.mlp.fc1), linear_parts(block.mlp.fc2),
            activation=activation_name(self.config.hidden_act, self.model_type), attn_pre_norm=norm, mlp_pre_norm=norm,
            parallel=True)

    def pre_mlp_residual_module(self, block):
        """Parallel block: the MLP reads the block input, which ``input_layernorm`` receives."""
        return block.input_layernorm
