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
  one token rather than ``T``. Where the family's block is described by its adapter's closed-form
  parts and its attention runs through transformers' attention interface, only the attention's
  query, key and value are differentiated by autograd and the rest is closed form (about half
  the generic sweep's cost, and none of its per-context-token copies).
* :func:`token_jacobians` (token-wise): for an output token ``t2``, one sweep over the ``d``
  coordinates of ``f(X)_{t2}`` gives ``J_{t1 t2}`` for every ``t1 <= t2`` at once.

:func:`released_last_token_jacobians` is the authors' released method (one backward pass per
row of the identity, through the block on the whole sequence, last token only) as the reference
of benchmarks and tests.
"""

import logging
import sys
import weakref

import torch

from crosslayer.jacobians.closed_form import DEFAULT_CHUNK_BYTES, branch_jacobian_with_attention, prepare_branch
from crosslayer.models.adapters import adapter_for
from crosslayer.models.blocks import block_calls

__all__ = ["last_token_jacobians", "released_last_token_jacobians", "token_jacobians"]


log = logging.getLogger(__name__)
_FALLBACKS_SAID = set()  # (family, reason) already logged: once per process, not per prompt


def _row_bytes(model, tokens, context):
    """Working memory of one cotangent in a reverse sweep through a block over ``tokens`` output
    positions attending to ``context`` keys: the gradient at the input and the backward
    intermediates (MLP hidden, queries/keys/values, norms, scores, the context's key/value
    gradients), in float32."""
    g = adapter_for(model).geometry
    kv = g.n_kv_heads * g.head_dim
    return 4 * (tokens * (8 * g.d_model + 3 * g.d_ff) + 2 * g.n_heads * tokens * context + 2 * context * kv)


def _sweep(out_row, inputs, chunk_bytes, row_bytes):
    """Rows of ``d out_row / d inputs`` by batched reverse sweeps: ``(d, *inputs.shape)``,
    ``chunk_bytes // row_bytes`` rows at a time."""
    d = out_row.shape[0]
    rows = max(1, min(d, chunk_bytes // max(1, row_bytes)))
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


def last_token_jacobians(model, input_ids, *, layers=None, final_norm=False, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """``J^l_{TT}`` of the residual branch of every block at the last token, context fixed.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        In eval mode; any supported family. Eager attention avoids autograd's slow batching
        fallback of fused attention kernels (``attn_implementation="eager"`` when loading).
    input_ids : (T,) sequence of int, T >= 1
    layers : iterable of int, optional
        Default: every block.
    final_norm : bool
        The last block's branch ends with the final norm, ``norm(f(x) + x) - x`` (paper 002's
        eq. 7), instead of its raw ``f(x)``.
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
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    cache = DynamicCache(config=model.config)
    if len(ids) > 1:  # the context, run once and cached; the last token then continues it
        block_calls(model, blocks, ids[:-1], cache=cache, layers=())
    calls = block_calls(model, blocks, ids[-1:], cache=cache, layers=layers)
    for layer in sorted(calls):
        call, norm = calls[layer], _final_norm(model, adapter, blocks, layer, final_norm)
        J = _split_jacobian(adapter, call, chunk_bytes) if norm is None else None
        if J is None:  # the generic sweep through the whole block
            with torch.enable_grad():
                x = call.hidden.clone().requires_grad_(True)  # (1, d): the last token
                y = call(x)
                out = (y if norm is None else norm(y))[0] - x[0]
                J = _sweep(out, x, chunk_bytes, _row_bytes(model, 1, len(ids)))[:, 0].detach()
        _check_finite(J, layer, (len(ids) - 1, len(ids) - 1))
        yield layer, J


def _final_norm(model, adapter, blocks, layer, final_norm):
    """The final norm when it closes this block's branch, else None (identity for the sweep)."""
    if final_norm and layer == len(blocks) - 1:
        return adapter.final_norm(model)
    return None


class _NotSplittable(Exception):
    """The block does not run the way :func:`_split_jacobian` needs (the generic sweep is used)."""


# Keyword arguments of the attention functions whose meaning the split form reproduces: the
# scores are scaling * q.k (+ mask), optionally soft-capped; anything else (sinks, ...) is refused.
_ATTENTION_KWARGS = {"dropout", "scaling", "softcap", "sliding_window", "position_ids", "cache_position",
                     "output_attentions", "use_cache", "position_embeddings"}


def _recorded_attention(call):
    """Rerun ``call`` on a copy of its input that requires grad, recording the attention call.

    The model's eager attention function is replaced for the duration by a wrapper that calls
    the family's own one and keeps its arguments and results; the layer's key/value cache update
    is wrapped to keep the new token's key and value before they are appended to the context.
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    cache = call.cache
    if cache is None:
        raise _NotSplittable("no key/value cache")
    cache_layer, seen = cache.layers[call.layer], {}
    update = cache_layer.update

    def recording_update(key_states, value_states, *args, **kwargs):
        seen["k_new"], seen["v_new"] = key_states, value_states
        return update(key_states, value_states, *args, **kwargs)

    def recording_attention(module, query, key, value, attention_mask, **kwargs):
        family = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if family is None or "attention" in seen or set(kwargs) - _ATTENTION_KWARGS:
            raise _NotSplittable("attention function or arguments not known here")
        out, weights = family(module, query, key, value, attention_mask, **kwargs)
        seen["attention"] = (module, query, key, value, attention_mask, kwargs, out, weights)
        return out, weights

    had_eager = "eager" in ALL_ATTENTION_FUNCTIONS._local_mapping
    ALL_ATTENTION_FUNCTIONS._local_mapping["eager"] = recording_attention
    cache_layer.update = recording_update
    try:
        with torch.enable_grad():
            x = call.hidden.clone().requires_grad_(True)
            y = call(x)[0].detach()
    finally:
        del cache_layer.update
        if not had_eager:
            del ALL_ATTENTION_FUNCTIONS._local_mapping["eager"]
    if "attention" not in seen or "k_new" not in seen:
        raise _NotSplittable("the block did not call the eager attention function and the cache")
    return x, y, seen


_CONSTANTS = weakref.WeakKeyDictionary()  # block -> (weights' identity and versions, parts, prepared, bytes)
# The prepared constants copy the MLP's input weights (norm gain folded in): 470 MB per layer of an
# 8B model. Blocks are kept while the copies fit in this budget; the others are prepared per call.
_CONSTANTS_BYTES = 1 << 30


def _block_constants(adapter, block, device):
    """The block's closed-form parts and their prepared constants, kept (within the budget) while
    its weights stay the same tensors unmodified (an in-place change bumps a tensor's version)."""
    key = (device, tuple((p.data_ptr(), p._version) for p in block.parameters()))
    cached = _CONSTANTS.pop(block, None)
    if cached is None or cached[0] != key:
        parts = adapter.block_parts(block)
        size = 4 * sum(w.numel() for w in (parts.w_gate, parts.w_up) if w is not None)
        cached = (key, parts, prepare_branch(parts, device), size)
    if cached[3] + sum(entry[3] for entry in _CONSTANTS.values()) <= _CONSTANTS_BYTES:
        _CONSTANTS[block] = cached
    return cached[1:3]


def _vjp_rows(outputs, x, cotangents, chunk_bytes):
    """``sum_i c_i^T d outputs_i / d x`` for every row of the cotangents (one per output,
    ``(N, *)`` each), by chunked batched reverse sweeps: ``(N, d)`` float32. The graph is kept."""
    n, d = cotangents[0].shape[0], x.shape[-1]
    # one row's cotangents, and the gradients through the projections and the norm
    rows = max(1, min(n, chunk_bytes // (4 * (sum(t.numel() for t in outputs) + 4 * d))))
    out = []
    for start in range(0, n, rows):
        cots = [c[start : start + rows].reshape(-1, *t.shape).to(t.dtype) for c, t in zip(cotangents, outputs)]
        (grad,) = torch.autograd.grad(outputs, x, grad_outputs=cots, retain_graph=True, is_grads_batched=True)
        out.append(grad.reshape(len(cots[0]), d).float())
    return torch.cat(out)


def _split_jacobian(adapter, call, chunk_bytes):
    """``J^l_{TT}`` of the last token, attention differentiated through its queries, keys and
    values only, the rest of the block in closed form; None where the block does not allow it.

    With context keys ``k_j`` and values ``v_j`` fixed, head ``h`` (key/value head ``g``) outputs
    ``o_h = sum_j a_hj v_gj``, ``a_h = softmax(c(l_h) + mask)``, ``l_hj = s q_h . k_gj`` (``c`` the
    soft-cap, if any), so ``d o_h = a_hT d v_gT + sum_j a_hj c'_hj (v_gj - o_h) d l_hj``. Through
    ``W_o`` the sublayer's Jacobian comes from batched reverse sweeps over the query, the new key
    and the new value only (their projections, norms and rotary embeddings stay autograd's, so
    no family is special-cased), never through the context's keys: the d rows of ``W_o`` at once,
    or, when the ``H T`` logits are fewer than d, each logit's gradient times ``W_o B``. The
    post-norm, the MLP and the residual product are the closed form of
    :func:`crosslayer.jacobians.closed_form.branch_jacobian_with_attention`. The block's own output checks
    the decomposition: a block it does not describe falls back to the generic sweep.
    """
    if not adapter.closed_form or adapter.token_input_width:
        return None  # no closed form for this family: the generic sweep is its route, not a fallback
    try:
        parts, prepared = _block_constants(adapter, call.block, call.hidden.device)
        x, y, seen = _recorded_attention(call)
    except (_NotSplittable, NotImplementedError, AttributeError, ValueError, KeyError, TypeError) as err:
        return _fall_back(adapter, call.layer, f"{type(err).__name__}: {err}")
    module, query, key, value, mask, kwargs, out, weights = seen["attention"]
    k_new, v_new = seen["k_new"], seen["v_new"]
    H, Hkv, dh = query.shape[1], key.shape[1], query.shape[-1]
    if (not torch.isfinite(y).all() or query.shape[0] != 1 or query.shape[2] != 1 or weights is None or H % Hkv
            or H * dh != parts.w_o.shape[1] or not torch.equal(key[:, :, -1:], k_new)
            or not torch.equal(value[:, :, -1:], v_new)):
        return _fall_back(adapter, call.layer, "the attention call is not one query over cached keys and values")
    with torch.no_grad():
        q = query[0, :, 0].float()  # (H, dh)
        group = torch.arange(H, device=q.device) // (H // Hkv)
        K, V = key[0].float()[group], value[0].float()[group]  # (H, T, dh) per query head
        scaling = kwargs.get("scaling") or dh ** -0.5
        logits = scaling * torch.einsum("he,hte->ht", q, K)
        cap = kwargs.get("softcap")
        slope = torch.ones_like(logits)
        if cap is not None:
            logits = cap * torch.tanh(logits / cap)
            slope = 1 - (logits / cap) ** 2
        if mask is not None:
            logits = logits + mask[0, 0, -1].float()
        a = torch.softmax(logits, -1)  # (H, T)
        o = out[0, -1].float()  # (H, dh)
        if not (torch.allclose(a, weights[0, :, -1].float(), atol=1e-5)
                and torch.allclose(o, torch.einsum("ht,hte->he", a, V), atol=1e-5 * (1 + V.abs().max()))):
            return _fall_back(adapter, call.layer, "the recorded attention is not softmax(scaled logits) times values")
        d = parts.d_model
        W_o = parts.w_o.to(device=q.device, dtype=torch.float32).reshape(d, H, dh)
        B = (a * slope)[..., None] * (V - o[:, None])  # d o_h / d l_hj, (H, T, dh)
        WB = torch.einsum("rhe,hte->rht", W_o, B)  # (d, H, T)
        cot_v = torch.zeros(d, Hkv, dh, device=q.device).index_add_(1, group, a[:, -1, None] * W_o)
        attn_out = o.reshape(-1) @ W_o.reshape(d, -1).T
        if parts.b_o is not None:
            attn_out = attn_out + parts.b_o.to(attn_out)
        # (the reverse sweeps run on the graph recorded above; no_grad only keeps these products off it)
        T, heads = K.shape[1], torch.arange(H, device=q.device)
        if H * T < d:  # each logit's gradient, then W_o B times them: H T rows instead of d
            cot_q = torch.zeros(H * T, H, dh, device=q.device)
            cot_q.view(H, T, H, dh)[heads, :, heads] = scaling * K
            cot_k = torch.zeros(H * T, Hkv, dh, device=q.device)
            cot_k.view(H, T, Hkv, dh)[heads, -1, group] = scaling * q
            logit_rows = _vjp_rows((query, k_new), x, (cot_q, cot_k), chunk_bytes)  # (H T, d)
            J_attn = torch.addmm(_vjp_rows((v_new,), x, (cot_v,), chunk_bytes), WB.reshape(d, H * T), logit_rows)
        else:  # W_o B's d rows pulled back through the queries and the new key, with the value's
            cot_q = scaling * torch.einsum("rht,hte->rhe", WB, K)
            cot_k = torch.zeros(d, Hkv, dh, device=q.device).index_add_(1, group, scaling * WB[..., -1:] * q)
            J_attn = _vjp_rows((query, k_new, v_new), x, (cot_q, cot_k, cot_v), chunk_bytes)
    J, block_out = branch_jacobian_with_attention(parts, x.detach()[0], J_attn, attn_out, prepared=prepared)
    if not torch.allclose(block_out, y.float(), rtol=1e-4, atol=1e-4 * float(y.abs().max())):
        return _fall_back(adapter, call.layer, "the closed form does not reproduce the block's output")
    return J.to(x.dtype)


def _fall_back(adapter, layer, reason):
    """None (the generic sweep, about 2x the split form's time), said once per family and reason."""
    if (adapter.model_type, reason) not in _FALLBACKS_SAID:
        _FALLBACKS_SAID.add((adapter.model_type, reason))
        log.warning("%s layer %d: the split Jacobian does not apply (%s); the generic sweep through the whole "
                    "block is used, exact but about 2x slower (said once per family and reason)",
                    adapter.model_type, layer, reason)
    return None


def token_jacobians(model, input_ids, layer, *, outputs=None, final_norm=False, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """``J^l_{t1 t2}`` of one block's residual branch for every ``t1 <= t2``, one sweep per ``t2``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    input_ids : (T,) sequence of int
    layer : int
    outputs : iterable of int, optional
        Output tokens ``t2`` (default all ``0 .. T-1``).
    final_norm : bool
        The last block's branch ends with the final norm (:func:`last_token_jacobians`).
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
    adapter = adapter_for(model)
    blocks = adapter.blocks(model)
    call, norm = block_calls(model, blocks, ids, layers=[layer])[layer], _final_norm(model, adapter, blocks, layer,
                                                                                     final_norm)
    row_bytes = _row_bytes(model, T, T)
    with torch.enable_grad():
        X = call.hidden.clone().requires_grad_(True)  # (T, d)
        Y = call(X)
        out = (Y if norm is None else norm(Y)) - X
        for t2 in outputs:
            # rows t > t2 of X cannot reach out[t2]; the sweep returns exact zeros there
            J = _sweep(out[t2], X, chunk_bytes, row_bytes)[:, : t2 + 1].transpose(0, 1).detach()  # (t2 + 1, d, d)
            _check_finite(J, layer, (f"0..{t2}", t2))
            yield t2, J


def released_last_token_jacobians(model, input_ids, *, layers=None):
    """The released code's method, for reference: the block on the whole sequence, then one
    ``torch.autograd.grad`` per row of the identity at the last token; returns ``J - I``.

    Yields ``(layer, J)`` like :func:`last_token_jacobians` (same values up to rounding).
    """
    ids = list(input_ids)
    calls = block_calls(model, adapter_for(model).blocks(model), ids, layers=layers)
    for layer in sorted(calls):
        call = calls[layer]
        with torch.enable_grad():
            X = call.hidden.clone().requires_grad_(True)
            out = call(X)[-1]
            rows = [torch.autograd.grad(out[i], X, retain_graph=True)[0][-1] for i in range(out.shape[0])]
        J = torch.stack(rows) - torch.eye(out.shape[0], device=out.device)
        yield layer, J.detach()
