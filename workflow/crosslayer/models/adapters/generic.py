"""The generic path: a causal decoder transformers knows and no adapter describes.
"""

import re

import torch

from crosslayer.models.adapters.base import FamilyAdapter, Geometry, Source, head_counts

__all__ = ["GenericAdapter"]


# Standard transformers projection names (Llama and most of its descendants), as
# ``<layer stem>.<i>.<suffix>``; what a family without an adapter is read by.
_STANDARD_SUFFIXES = {
    "q": "self_attn.q_proj.weight", "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight", "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}


_PER_LAYER_INPUTS = (
    "not supported: its blocks take per-layer inputs that depend on the token and AltUp/Laurel branches with no "
    "adapter here, so the generic path (which reruns a block with one recorded call's arguments) would be wrong")

#: Families transformers can run that the generic path must not: a wrong Jacobian would look right.
REFUSED = dict.fromkeys(("gemma3n", "gemma3n_text"), _PER_LAYER_INPUTS)


class GenericAdapter(FamilyAdapter):
    """A causal decoder family transformers can load but no adapter here describes.

    Blocks are found as the model's ``nn.ModuleList`` of ``num_hidden_layers`` modules; the
    single-token Jacobians are autograd of the real block (:attr:`closed_form` is False: exact,
    slower); the pre-MLP residual stream is not known (only the block inputs are recorded, so the
    topology stages cannot run); weights are read under the standard projection names
    (``self_attn.q_proj`` ... ``mlp.down_proj``) where the checkpoint has them
    (:meth:`bind_keys`), and the others are reported absent.
    """

    model_type = "generic"
    layer_key = "layers.{layer}"
    closed_form = False
    pre_mlp_stream = False
    limits = "has no adapter here: the generic path records no pre-MLP residual stream"

    def __init__(self, config):
        super().__init__(config)
        self.model_type = self.config.model_type
        self._present = dict(_STANDARD_SUFFIXES)

    @staticmethod
    def accepts(config) -> bool:
        """A transformers causal LM with the standard size fields of a transformer decoder."""
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        text = config.get_text_config()
        return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and all(
            isinstance(getattr(text, key, None), int) for key in ("hidden_size", "num_hidden_layers",
                                                                  "num_attention_heads"))

    def _geometry(self, c):
        nh, nkv, hd = head_counts(c)
        d_ff = getattr(c, "intermediate_size", None) or 4 * c.hidden_size
        activation = getattr(c, "hidden_act", None) or getattr(c, "hidden_activation", None) or "unknown"
        # gated / parallel are not in a config's standard fields: False, and the gate is read if stored
        return Geometry(c.model_type, c.num_hidden_layers, c.hidden_size, d_ff, nh, nkv, hd, str(activation),
                        False, False)

    def sources(self):
        g = self.geometry
        d, q, kv = g.d_model, g.n_heads * g.head_dim, g.n_kv_heads * g.head_dim
        shapes = {"q": (q, d), "k": (kv, d), "v": (kv, d), "o": (d, q), "gate": (g.d_ff, d), "up": (g.d_ff, d),
                  "down": (d, g.d_ff)}
        return {name: Source(key, shapes[name]) for name, key in self._present.items()}

    def bind_keys(self, keys) -> list[str]:
        """Find the layer stem among a checkpoint's tensor names (the one numbered 0 .. L - 1 that
        holds the most standard projections) and keep the projections stored under it.

        Returns
        -------
        list of str
            The canonical projections the checkpoint lacks under the standard names.
        """
        found = {}  # stem -> {layer index -> suffixes}
        for key in keys:
            match = re.match(r"^(.*?)\.(\d+)\.(.+)$", key)
            if match:
                found.setdefault(match[1], {}).setdefault(int(match[2]), set()).add(match[3])
        n = self.geometry.n_layers
        stems = [stem for stem, layers in found.items() if sorted(layers) == list(range(n))]
        if not stems:
            raise NotImplementedError(f"{self.model_type}: no tensors numbered by layer 0..{n - 1} found")
        stem = max(stems, key=lambda s: len(set(_STANDARD_SUFFIXES.values()) & found[s][0]))
        self.layer_key = stem + ".{layer}"
        self._present = {name: key for name, key in _STANDARD_SUFFIXES.items() if key in found[stem][0]}
        if not self._present:
            raise NotImplementedError(
                f"{self.model_type} has no adapter here, and its layers hold no tensor under the standard projection "
                f"names ({', '.join(_STANDARD_SUFFIXES.values())})")
        return [name for name in _STANDARD_SUFFIXES if name not in self._present]

    def blocks(self, model):
        """The model's one ``nn.ModuleList`` of ``num_hidden_layers`` blocks."""
        n = self.geometry.n_layers
        lists = [m for _, m in self._decoder(model).named_modules()
                 if isinstance(m, torch.nn.ModuleList) and len(m) == n]
        if len(lists) != 1:
            raise NotImplementedError(
                f"{self.model_type}: {len(lists)} module lists of {n} layers in the model; cannot tell the blocks")
        return list(lists[0])

    def pre_mlp_residual_module(self, block):
        """Not known for a family without an adapter: None (only block inputs are recorded)."""
        return None
