"""Exact multi-token Jacobians of the residual branch of transformer blocks (paper 002).

For block ``l`` with input sequence ``X = (x_1 .. x_T)`` and output ``block_l(X)``, the residual
branch is ``f^l(X) = block_l(X) - X`` and::

    J^l_{t1 t2} = d f^l(X)_{t2} / d x_{t1}        (d x d; the other tokens held fixed)

It is zero for ``t1 > t2`` (causal attention), and ``J^l_{tt} + I`` is the Jacobian of the whole
block at token ``t``. Everything is differentiated through the real transformers block, called
exactly as the model calls it: a forward pre-hook records the block's input and keyword arguments
(position embeddings, masks, ALiBi, caches), so no family is special-cased here.

Two paths, both one forward and one batched reverse sweep (``is_grads_batched``) per output token:

* :func:`last_token_jacobians` (depth-wise): ``J^l_{TT}`` of every block. The context tokens are
  fixed, so the block is run on the last token alone against its key/value cache — the cost of
  one token rather than ``T``.
* :func:`token_jacobians` (token-wise): for an output token ``t2``, one sweep over the ``d``
  coordinates of ``f(X)_{t2}`` gives ``J_{t1 t2}`` for every ``t1 <= t2`` at once.

:func:`released_last_token_jacobians` is the authors' released method (one backward pass per
row of the identity, through the block on the whole sequence, last token only) as the reference
of benchmarks and tests.
"""

from dataclasses import dataclass, field

import torch

from crosslayer.adapters import adapter_for

__all__ = ["BlockCall", "block_calls", "last_token_jacobians", "released_last_token_jacobians", "token_jacobians"]

DEFAULT_CHUNK_BYTES = 1 << 30  # working memory of one batch of cotangents


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

    def __call__(self, X):
        """Block output ``(T, d)`` for input ``X`` ``(T, d)``."""
        cache = _cache_in(self.args, self.kwargs)
        if cache is not None:
            cache.layers[self.layer].__dict__.update(self.cache_state)
        out = self.block(X[None], *self.args, **self.kwargs)
        return (out[0] if isinstance(out, tuple) else out)[0]


def _cache_in(args, kwargs):
    """The key/value cache among a block call's arguments (GPT-2 passes it positionally)."""
    from transformers import Cache

    return next((v for v in (*args, *kwargs.values()) if isinstance(v, Cache)), None)


def block_calls(model, input_ids, *, past_key_values=None, layers=None):
    """Run the model's base on one sequence and record the call of each block.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A family :func:`crosslayer.adapters.adapter_for` supports, in eval mode.
    input_ids : (T,) sequence of int
    past_key_values : transformers.Cache, optional
        Context already run (the sequence then continues it).
    layers : iterable of int, optional
        Blocks to record (default all).

    Returns
    -------
    dict[int, BlockCall]
    """
    blocks = adapter_for(model).blocks(model)
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
            model.base_model(input_ids=ids, past_key_values=past_key_values, use_cache=past_key_values is not None)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _rows_per_chunk(d, width, chunk_bytes):
    return max(1, min(d, chunk_bytes // max(1, 4 * d * width)))


def _sweep(out_row, inputs, chunk_bytes):
    """Rows of ``d out_row / d inputs`` by batched reverse sweeps: ``(d, *inputs.shape)``."""
    d = out_row.shape[0]
    rows = _rows_per_chunk(d, inputs.numel() // inputs.shape[-1], chunk_bytes)
    eye = torch.eye(d, dtype=out_row.dtype, device=out_row.device)
    parts = []
    for start in range(0, d, rows):
        (grad,) = torch.autograd.grad(out_row, inputs, grad_outputs=eye[start : start + rows], retain_graph=True,
                                      is_grads_batched=True)
        parts.append(grad)
    return torch.cat(parts)


def _check_finite(J, layer, tokens):
    if not torch.isfinite(J).all():
        raise ValueError(f"non-finite Jacobian at layer {layer}, tokens {tokens}")


def last_token_jacobians(model, input_ids, *, layers=None, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """``J^l_{TT}`` of the residual branch of every block at the last token, context fixed.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        In eval mode; any supported family. Eager attention avoids autograd's slow batching
        fallback of fused attention kernels (``attn_implementation="eager"`` when loading).
    input_ids : (T,) sequence of int, T >= 1
    layers : iterable of int, optional
        Default: every block.
    chunk_bytes : int
        Working memory of one batch of cotangents.

    Yields
    ------
    layer : int
    J : (d, d) torch.Tensor
        float32 on the model's device; ``J[i, j] = d f^l(X)_{T,i} / d x_{T,j}``.

    Raises
    ------
    ValueError
        Empty sequence, or a non-finite Jacobian (names the layer and token).
    """
    from transformers import DynamicCache

    ids = list(input_ids)
    if not ids:
        raise ValueError("input_ids is empty")
    cache = DynamicCache(config=model.config)
    if len(ids) > 1:  # the context, run once and cached; the last token then continues it
        block_calls(model, ids[:-1], past_key_values=cache, layers=())
    calls = block_calls(model, ids[-1:], past_key_values=cache, layers=layers)
    for layer in sorted(calls):
        call = calls[layer]
        with torch.enable_grad():
            x = call.hidden.clone().requires_grad_(True)  # (1, d): the last token
            out = call(x)[0] - x[0]
            J = _sweep(out, x, chunk_bytes)[:, 0].detach()
        _check_finite(J, layer, (len(ids) - 1, len(ids) - 1))
        yield layer, J


def token_jacobians(model, input_ids, layer, *, outputs=None, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """``J^l_{t1 t2}`` of one block's residual branch for every ``t1 <= t2``, one sweep per ``t2``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    input_ids : (T,) sequence of int
    layer : int
    outputs : iterable of int, optional
        Output tokens ``t2`` (default all ``0 .. T-1``).
    chunk_bytes : int
        Working memory of one batch of cotangents.

    Yields
    ------
    t2 : int
    J : (t2 + 1, d, d) torch.Tensor
        ``J[t1] = J^l_{t1 t2}``, float32 on the model's device (``- I`` only at ``t1 = t2``).
    """
    ids = list(input_ids)
    T = len(ids)
    outputs = range(T) if outputs is None else sorted(outputs)
    if any(not 0 <= t < T for t in outputs):
        raise ValueError(f"output tokens {list(outputs)} must lie in [0, {T})")
    call = block_calls(model, ids, layers=[layer])[layer]
    with torch.enable_grad():
        X = call.hidden.clone().requires_grad_(True)  # (T, d)
        out = call(X) - X
        for t2 in outputs:
            # rows t > t2 of X cannot reach out[t2]; the sweep returns exact zeros there
            J = _sweep(out[t2], X, chunk_bytes)[:, : t2 + 1].transpose(0, 1).detach()  # (t2 + 1, d, d)
            _check_finite(J, layer, (f"0..{t2}", t2))
            yield t2, J


def released_last_token_jacobians(model, input_ids, *, layers=None):
    """The released code's method, for reference: the block on the whole sequence, then one
    ``torch.autograd.grad`` per row of the identity at the last token; returns ``J - I``.

    Yields ``(layer, J)`` like :func:`last_token_jacobians` (same values up to rounding).
    """
    ids = list(input_ids)
    calls = block_calls(model, ids, layers=layers)
    for layer in sorted(calls):
        call = calls[layer]
        with torch.enable_grad():
            X = call.hidden.clone().requires_grad_(True)
            out = call(X)[-1]
            rows = [torch.autograd.grad(out[i], X, retain_graph=True)[0][-1] for i in range(out.shape[0])]
        J = torch.stack(rows) - torch.eye(out.shape[0], device=out.device)
        yield layer, J.detach()
