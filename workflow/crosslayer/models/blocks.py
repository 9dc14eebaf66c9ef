"""Recorded block calls: how a model calls each decoder block, so that the block can be run again
on another input exactly as the model runs it (position embeddings, masks, ALiBi, the key/value
cache). Model access, beneath the family adapters and the Jacobians: nothing else of crosslayer
is imported here.
"""

import inspect
from dataclasses import dataclass, field

import torch

__all__ = ["BlockCall", "block_calls"]


@dataclass
class BlockCall:
    """One recorded call of a decoder block: ``call(X)`` reruns it on another input ``X``.

    Attributes
    ----------
    layer : int
    block : torch.nn.Module
    hidden : (T, d) torch.Tensor
        The block's recorded input (detached).
    args, kwargs
        The other arguments the model passed (hidden states removed).
    cache_state : dict or None
        The state of this layer's key/value cache before the call; restored before every rerun,
        so that a rerun sees the context exactly as the recorded call did.
    """

    layer: int
    block: torch.nn.Module
    hidden: torch.Tensor
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    cache_state: dict | None = None

    @property
    def cache(self):
        """The key/value cache among the call's arguments, or None."""
        return _cache_in(self.args, self.kwargs)

    def __call__(self, X):
        """Block output ``(T, d)`` for input ``X`` ``(T, d)``."""
        cache = self.cache
        if cache is not None:
            cache.layers[self.layer].__dict__.update(self.cache_state)
        out = self.block(X[None], *self.args, **self.kwargs)
        return (out[0] if isinstance(out, tuple) else out)[0]


def _cache_in(args, kwargs):
    """The key/value cache among a block call's arguments (GPT-2 passes it positionally)."""
    from transformers import Cache

    return next((v for v in (*args, *kwargs.values()) if isinstance(v, Cache)), None)


def block_calls(model, blocks, input_ids, *, cache=None, layers=None):
    """Run the model's base on one sequence and record the call of each block.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        In eval mode.
    blocks : sequence of torch.nn.Module
        Its decoder blocks in order (``crosslayer.models.adapters.adapter_for(model).blocks(model)``).
    input_ids : (T,) sequence of int
    cache : transformers.Cache, optional
        Context already run (the sequence then continues it).
    layers : iterable of int, optional
        Blocks to record (default all).

    Returns
    -------
    dict[int, BlockCall]
    """
    wanted = set(range(len(blocks)) if layers is None else layers)
    calls = {}

    def recorder(layer):
        def hook(module, args, kwargs):
            kwargs = dict(kwargs)
            hidden = args[0] if args else kwargs.pop("hidden_states")
            cache = _cache_in(args, kwargs)
            state = dict(cache.layers[layer].__dict__) if cache is not None else None
            calls[layer] = BlockCall(layer, module, hidden.detach()[0], tuple(args[1:]), kwargs, state)
        return hook

    device = next(model.parameters()).device
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)[None]
    handles = [b.register_forward_pre_hook(recorder(l), with_kwargs=True) for l, b in enumerate(blocks) if l in wanted]
    try:
        with torch.no_grad():
            model.base_model(input_ids=ids, use_cache=cache is not None, **{_cache_argument(model.base_model): cache})
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _cache_argument(module):
    """The name under which `module`'s forward takes the key/value cache: ``cache`` from transformers
    5.2x on, ``past_key_values`` before (a name that then warns, and goes in 5.40)."""
    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"
