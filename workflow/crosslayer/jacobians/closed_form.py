"""Exact single-token block Jacobians (paper 004), closed form and batched.

A block is run on its input ``x`` (the residual stream at the last token) as a one-token
sequence at position 0. With one key the attention softmax is exactly 1, so attention is the
affine map ``A(v) = W_o (W_v v + b_v) + b_o`` of its (normalized) input: queries, keys, RoPE,
q/k norms and ALiBi drop out. The Jacobian ``J = d block(x) / d x`` then has a closed form in
the canonical :class:`~crosslayer.models.adapters.base.BlockParts` (no family is named in this module)::

    parallel:   J = I + J_attn(x) + J_mlp(x)
    sequential: J = (I + J_mlp(h)) (I + J_attn(x)),   h = x + attn(x)

with ``J_attn = D_post W_ov D_pre`` (``W_ov = W_o W_v``, GQA heads grouped),
``J_mlp = D_post W_down diag(act'(z)) W_up D_pre`` (gated: ``W_down [diag(act'(g) u) W_gate
+ diag(act(g)) W_up]``) and norm Jacobians applied as rank-1/rank-2 corrections, never built
densely: LayerNorm ``diag(gamma / sigma) (I - 11^T/d - xhat xhat^T/d)``, RMSNorm
``diag(gamma / rms) (I - xhat xhat^T/d)``. Norm gains are folded into the following weights
once per layer. The MLP Jacobian is ``W_down M`` with ``M = diag(s_1) W_1 [+ diag(s_2) W_2]``
formed elementwise per sample, so a chunk of ``B`` samples costs one ``(d, d_ff) x (d_ff, B d)``
GEMM (gated or not) plus, for sequential blocks, the product ``J_mlp J_attn``: one batched
``d x d`` product, or under GQA (value width ``r <= d/2``) two thin ones through
``J_attn = (W_o) (W_v D_pre)`` of width ``r``.

Its speed against ``torch.autograd.functional.jacobian`` and the machine's GEMM throughput:
``python -m bench jacobian`` (current figures in docs/benchmarks.md).

Float32 compute on the device of ``x`` (CUDA when the input is there, same code); means are
accumulated in float64.
"""

import logging
import math
from dataclasses import dataclass

import torch

from crosslayer.models.adapters.base import BlockParts, NormParts

log = logging.getLogger(__name__)

__all__ = [
    "activation", "apply_norm", "DEFAULT_CHUNK_BYTES", "block_jacobians", "branch_jacobian_with_attention",
    "closed_form_flops", "grouped_w_o", "iter_block_jacobians", "mean_jacobian", "prepare_branch",
]

DEFAULT_CHUNK_BYTES = 1 << 30  # working memory of one chunk (of samples here, of cotangents in multi_token)


# --------------------------------------------------------------------------- one-token attention


def grouped_w_o(w_o, *, n_heads, n_kv_heads):
    """``W_o`` with the column blocks of the query heads that share a value head summed, so that
    ``grouped_w_o(W_o) @ W_v`` is the one-token attention's value-output map ``W_ov`` (d, d) under
    grouped-query attention: query head h reads value head ``h // (n_heads // n_kv_heads)``.

    Parameters
    ----------
    w_o : (d, n_heads * head_dim) torch.Tensor
    n_heads, n_kv_heads : int

    Returns
    -------
    (d, n_kv_heads * head_dim) torch.Tensor
    """
    d, width = w_o.shape
    if n_heads % n_kv_heads or width % n_heads:
        raise ValueError(f"W_o {tuple(w_o.shape)} does not split into {n_heads} query heads over {n_kv_heads} "
                         "key/value heads")
    head_dim = width // n_heads
    return w_o.reshape(d, n_kv_heads, n_heads // n_kv_heads, head_dim).sum(2).reshape(d, n_kv_heads * head_dim)


# --------------------------------------------------------------------------- activations

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def activation(name, z):
    """``act(z)`` elementwise for a canonical activation name (:class:`BlockParts.activation`)."""
    return _act_and_grad(name, z)[0]


def apply_norm(parts: NormParts | None, x):
    """``norm(x)`` over the last axis for canonical :class:`NormParts` (None: the identity), by the
    same standardization the closed form differentiates."""
    norm = _norm(parts, x.device)
    return x if norm is None else _affine(_standardize(x, norm)[0], norm)


def _act_and_grad(name, z):
    """``(act(z), act'(z))`` elementwise for a canonical activation name."""
    if name == "gelu":  # exact: z Phi(z)
        cdf = 0.5 * (1.0 + torch.erf(z * (1.0 / math.sqrt(2.0))))
        pdf = torch.exp(-0.5 * z * z) * (1.0 / math.sqrt(2.0 * math.pi))
        return z * cdf, cdf + z * pdf
    if name == "gelu_tanh":
        t = torch.tanh(_SQRT_2_OVER_PI * (z + 0.044715 * z**3))
        a = 0.5 * z * (1.0 + t)
        return a, 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * z * z)
    if name == "silu":
        sig = torch.sigmoid(z)
        return z * sig, sig * (1.0 + z * (1.0 - sig))
    if name == "relu":
        return torch.relu(z), (z > 0).to(z.dtype)
    raise NotImplementedError(f"activation '{name}' has no closed-form derivative here")


# --------------------------------------------------------------------------- per-layer precompute


@dataclass
class _Norm:
    kind: str
    gamma: torch.Tensor
    beta: torch.Tensor | None
    eps: float


@dataclass
class _Prepared:
    """Per-layer constants: norm gains folded into the weights that follow them."""

    d: int
    w_ov: torch.Tensor  # (d, d), pre-norm gain folded in
    w_o: torch.Tensor  # (d, r) with r = n_kv_heads * head_dim: W_ov = w_o @ w_v (GQA heads grouped)
    w_v: torch.Tensor  # (r, d), pre-norm gain folded in
    b_ov: torch.Tensor  # (d,)
    w_in: list  # MLP input weights (d_ff, d), gain folded: [gate, up] or [up]
    b_in: list
    w_down: torch.Tensor
    b_down: torch.Tensor
    activation: str
    attn_pre: _Norm | None
    attn_post: _Norm | None
    mlp_pre: _Norm | None
    mlp_post: _Norm | None
    parallel: bool


def _norm(parts: NormParts | None, device):
    if parts is None:
        return None
    if parts.kind not in ("layernorm", "rmsnorm"):
        raise ValueError(f"unknown norm kind '{parts.kind}'")
    f = lambda t: None if t is None else t.to(device=device, dtype=torch.float32)  # noqa: E731
    return _Norm(parts.kind, f(parts.weight), f(parts.bias), parts.eps)


def _fold(w, b, pre):
    """``W n + b`` with ``n = gamma * xhat + beta``, rewritten as ``W' xhat + b'``."""
    b = torch.zeros(w.shape[0], dtype=w.dtype, device=w.device) if b is None else b
    if pre is None:
        return w, b
    if pre.beta is not None:
        b = b + w @ pre.beta
    return w * pre.gamma, b


def _prepare(parts: BlockParts, device, attention=True) -> _Prepared:
    """Per-layer constants; ``attention=False`` skips the one-token attention's (``W_ov`` costs a
    ``d x d x r`` product) for callers that bring their own attention Jacobian."""
    f = lambda t: None if t is None else t.to(device=device, dtype=torch.float32)  # noqa: E731
    d = parts.d_model
    attn_pre, mlp_pre = _norm(parts.attn_pre_norm, device), _norm(parts.mlp_pre_norm, device)
    w_ov = w_o = w_v = b_ov = None
    if attention:
        w_o = grouped_w_o(f(parts.w_o), n_heads=parts.n_heads, n_kv_heads=parts.n_kv_heads)
        w_v, b_v = f(parts.w_v), f(parts.b_v)
        b_ov = torch.zeros(d, device=device) if b_v is None else w_o @ b_v
        if parts.b_o is not None:
            b_ov = b_ov + f(parts.b_o)
        if attn_pre is not None:  # fold the gain into W_v, the shift into the bias
            if attn_pre.beta is not None:
                b_ov = b_ov + w_o @ (w_v @ attn_pre.beta)
            w_v = w_v * attn_pre.gamma
        w_ov = (w_o @ w_v).contiguous()
        w_o, w_v = w_o.contiguous(), w_v.contiguous()
    inputs = ([(parts.w_gate, parts.b_gate)] if parts.gated else []) + [(parts.w_up, parts.b_up)]
    folded = [_fold(f(w), f(b), mlp_pre) for w, b in inputs]
    w_down = f(parts.w_down)
    b_down = torch.zeros(d, device=device) if parts.b_down is None else f(parts.b_down)
    _act_and_grad(parts.activation, torch.zeros(1, device=device))  # unknown name: fail early
    return _Prepared(d, w_ov, w_o, w_v, b_ov,
                     [w.contiguous() for w, _ in folded], [b for _, b in folded],
                     w_down.contiguous(), b_down, parts.activation, attn_pre, _norm(parts.attn_post_norm, device),
                     mlp_pre, _norm(parts.mlp_post_norm, device), parts.parallel)


# --------------------------------------------------------------------------- closed form


def _standardize(v, norm):
    """``(vhat, inv_scale)``: the norm's input before its affine part, and ``1/sigma`` or
    ``1/rms`` of shape ``(B, 1)``; ``(v, None)`` without a norm."""
    if norm is None:
        return v, None
    if norm.kind == "layernorm":
        c = v - v.mean(-1, keepdim=True)
        inv = torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + norm.eps)
        return c * inv, inv
    inv = torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + norm.eps)
    return v * inv, inv


def _affine(vhat, norm):
    y = vhat * norm.gamma
    return y if norm.beta is None else y + norm.beta


def _right_norm(K, vhat, inv, kind):
    """``K @ D`` for the standardization Jacobian ``D = inv (I - [11^T/d] - vhat vhat^T/d)``.

    ``K`` is ``(B, m, d)`` per sample or ``(m, d)`` shared by the chunk; returns ``(B, m, d)``."""
    B, d = vhat.shape
    if K.ndim == 2:
        Kv = (vhat @ K.T).unsqueeze(-1)  # (B, m, 1)
        K1 = K.sum(-1, keepdim=True).expand(B, -1, -1)
        K = K.expand(B, -1, -1)
    else:
        Kv = torch.bmm(K, vhat.unsqueeze(-1))
        K1 = K.sum(-1, keepdim=True)
    if kind == "layernorm":
        U = torch.cat([K1, Kv], -1) / d  # (B, m, 2)
        V = torch.stack([torch.ones_like(vhat), vhat], 1)  # (B, 2, d)
    else:
        U, V = Kv / d, vhat.unsqueeze(1)
    K = torch.baddbmm(K, U, V, alpha=-1)
    return K.mul_(inv.unsqueeze(-1))


def _left_norm(K, out, norm):
    """``D @ K`` for the Jacobian of ``norm`` (with its gain) at ``out``; returns the norm's
    output too. ``K`` is ``(B, d, n)`` or ``(d, n)`` shared; returns ``(B, d, n)``."""
    ohat, inv = _standardize(out, norm)
    B, d = ohat.shape
    if K.ndim == 2:
        oK = (ohat @ K).unsqueeze(1)  # (B, 1, n)
        K1 = K.sum(0, keepdim=True).expand(B, -1, -1)
        K = K.expand(B, -1, -1)
    else:
        oK = torch.bmm(ohat.unsqueeze(1), K)
        K1 = K.sum(1, keepdim=True)
    if norm.kind == "layernorm":
        U = torch.stack([torch.ones_like(ohat), ohat], -1)  # (B, d, 2)
        V = torch.cat([K1, oK], 1) / d  # (B, 2, n)
    else:
        U, V = ohat.unsqueeze(-1), oK / d
    K = torch.baddbmm(K, U, V, alpha=-1)
    return K.mul_((norm.gamma * inv).unsqueeze(-1)), _affine(ohat, norm)


def _factored(p):
    """Whether the attention Jacobian is kept as ``(B, d, r) @ (B, r, d)`` (GQA: ``r <= d/2``)."""
    return 2 * p.w_v.shape[0] <= p.d


def _attn_sublayer(p, v):
    """Jacobian of the attention sublayer at ``v`` as ``(L, R)`` with ``J_attn = L @ R`` and its
    output ``(B, d)``: ``L`` ``(B, d, r)`` and ``R`` ``(B, r, d)`` when factored (``r`` value
    width), else ``L = J_attn`` ``(B, d, d)`` and ``R = None``."""
    B = v.shape[0]
    vhat, inv = _standardize(v, p.attn_pre)
    out = torch.addmm(p.b_ov, vhat, p.w_ov.T)
    L, R = (p.w_o, p.w_v) if _factored(p) else (p.w_ov, None)  # shared (2-D) until a norm acts
    if p.attn_pre is not None:
        if R is None:
            L = _right_norm(L, vhat, inv, p.attn_pre.kind)
        else:
            R = _right_norm(R, vhat, inv, p.attn_pre.kind)
    if p.attn_post is not None:
        L, out = _left_norm(L, out, p.attn_post)
    L = L.expand(B, -1, -1) if L.ndim == 2 else L
    R = R.expand(B, -1, -1) if R is not None and R.ndim == 2 else R
    return L, R, out


_RANK_ROWS_PER_D_FF = 16  # the pre-norm's terms ride in the MLP GEMM while their rows are <= d_ff / 16


def _mlp_sublayer(p, v, want_out):
    """Jacobian ``(B, d, d)`` (and output when asked) of the MLP sublayer at ``v``."""
    B, d = v.shape
    vhat, inv = _standardize(v, p.mlp_pre)
    z = [torch.addmm(b, vhat, w.T) for w, b in zip(p.w_in, p.b_in)]  # (B, d_ff) each
    a, da = _act_and_grad(p.activation, z[0])
    if len(z) == 2:  # gated: h = act(g) * u; dh = act'(g) u dg + act(g) du
        hidden, scales = a * z[1], (da * z[1], a)
    else:
        hidden, scales = a, (da,)
    # J_mlp = W_down M D with M = sum_i diag(s_i) W_i (d_ff, d) per sample and D the pre-norm's
    # standardization Jacobian inv (I - sum_c c c^T / d), c in {vhat} (RMSNorm) or {1, vhat}
    # (LayerNorm). The M's of the chunk side by side, (d_ff, B d), so that one GEMM with the shared
    # W_down serves all samples; D rides along in the same GEMM, which no pass over the (B, d, d)
    # result could match in speed: inv is folded into the scales, and each rank-one term
    # (W_down M c) c^T / d is one extra column of W_down (its vector W_down M c costs only
    # matrix-vector products) times a row holding c^T in that sample's block.
    # The extra rows' work grows as B^2 against the GEMM's d_ff B: past d_ff / 16 rows (narrow
    # models, whose chunks hold many samples) D is applied to the result instead.
    d_ff = p.w_down.shape[1]
    cs = [] if p.mlp_pre is None else ([torch.ones_like(vhat)] if p.mlp_pre.kind == "layernorm" else []) + [vhat]
    inside = len(cs) * B * _RANK_ROWS_PER_D_FF <= d_ff  # also with no pre-norm (no rows)
    cs = cs if inside else []
    if cs:
        scales = tuple(s * inv for s in scales)
    k = d_ff + len(cs) * B
    M = torch.empty(k, B, d, dtype=v.dtype, device=v.device)
    for i, (s, w) in enumerate(zip(scales, p.w_in)):
        if i == 0:
            torch.mul(w.unsqueeze(1), s.T.unsqueeze(-1), out=M[:d_ff])
        else:
            M[:d_ff].addcmul_(w.unsqueeze(1), s.T.unsqueeze(-1))
    w_down = p.w_down
    if cs:
        samples = torch.arange(B, device=v.device)
        M[d_ff:].zero_()
        columns = []
        for j, c in enumerate(cs):
            Mc = sum(s.T * (w @ c.T) for s, w in zip(scales, p.w_in))  # (d_ff, B): M_b c_b, inv included
            columns.append(-(p.w_down @ Mc) / d)
            M[d_ff + j * B + samples, samples] = c
        w_down = torch.cat([p.w_down, *columns], 1)
    K = torch.mm(w_down, M.view(k, B * d)).view(d, B, d).transpose(0, 1)  # (B, d, d), strided
    del M
    if not inside:
        K = _right_norm(K, vhat, inv, p.mlp_pre.kind)
    out = None
    if want_out or p.mlp_post is not None:
        out = torch.addmm(p.b_down, hidden, p.w_down.T)
    if p.mlp_post is not None:
        K, out = _left_norm(K, out, p.mlp_post)
    return K, out


def _chunk_jacobians(p, x, out=None):
    """``(B, d, d)`` Jacobians of one chunk, written into ``out`` when given."""
    B, d = x.shape
    if out is None:
        out = torch.empty(B, d, d, dtype=x.dtype, device=x.device)
    L, R, attn_out = _attn_sublayer(p, x)
    if p.parallel:
        J_mlp, _ = _mlp_sublayer(p, x, want_out=False)
        J = torch.add(J_mlp, L, out=out) if R is None else torch.baddbmm(J_mlp, L, R, out=out)
    elif R is None:  # J_a + J_m J_a + J_m
        J_mlp, _ = _mlp_sublayer(p, x + attn_out, want_out=False)
        J = torch.baddbmm(L, J_mlp, L, out=out).add_(J_mlp)
    else:  # J_m + (L + J_m L) R: the product costs 4 d^2 r instead of 2 d^3 per sample
        J_mlp, _ = _mlp_sublayer(p, x + attn_out, want_out=False)
        J = torch.baddbmm(J_mlp, torch.baddbmm(L, J_mlp, L), R, out=out)
    J.diagonal(dim1=1, dim2=2).add_(1.0)
    return J


def prepare_branch(parts: BlockParts, device):
    """The constants :func:`branch_jacobian_with_attention` needs (norm gains folded into the MLP
    weights), to be reused for every token and prompt of one block while its weights stay."""
    return _prepare(parts, device, attention=False)


def branch_jacobian_with_attention(parts: BlockParts, x, attn_jacobian, attn_output, *, prepared=None):
    """The residual branch's Jacobian ``d (block(x) - x) / d x`` at one token, completed in
    closed form around an attention sublayer given from outside.

    The single-token closed form cannot see attention over a context (queries and keys then
    matter); a caller that has the attention sublayer's Jacobian and output at the token (before
    the sublayer's post-norm, if any) gets the rest here exactly as in :func:`block_jacobians`:
    the post-norm, the MLP at ``x`` (parallel) or at ``h = x + attn(x)`` (sequential), and the
    product ``(I + J_mlp)(I + J_attn)``.

    Parameters
    ----------
    parts : BlockParts
    x : (d,) torch.Tensor
        The block input at the token.
    attn_jacobian : (d, d) torch.Tensor
        ``d A / d x`` with ``A`` the attention sublayer's output before its post-norm, pre-norm
        included.
    attn_output : (d,) torch.Tensor
        ``A`` at ``x``.
    prepared : optional
        :func:`prepare_branch` of these parts on ``x``'s device.

    Returns
    -------
    J : (d, d) torch.Tensor
        float32, without the identity.
    out : (d,) torch.Tensor
        ``block(x)`` as these parts compute it (callers compare it with the live block's).
    """
    p = prepared if prepared is not None else prepare_branch(parts, x.device)
    f = lambda t: t.to(device=x.device, dtype=torch.float32)  # noqa: E731
    x, L, out = f(x).reshape(1, -1), f(attn_jacobian)[None], f(attn_output).reshape(1, -1)
    with torch.no_grad():
        if p.attn_post is not None:
            L, out = _left_norm(L, out, p.attn_post)
        if p.parallel:
            J_mlp, mlp_out = _mlp_sublayer(p, x, want_out=True)
            return (L + J_mlp)[0], (x + out + mlp_out)[0]
        h = x + out
        J_mlp, mlp_out = _mlp_sublayer(p, h, want_out=True)
        return torch.baddbmm(L, J_mlp, L).add_(J_mlp)[0], (h + mlp_out)[0]


def _bytes_per_sample(parts: BlockParts):
    d, d_ff = parts.d_model, parts.d_ff
    return 4 * (4 * d * d + d * d_ff + 4 * d_ff)


def _check_input(x, d):
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"x must have shape (B, {d}), got {tuple(x.shape)}")


def _raise_non_finite(what, bad, start, layer):
    where = "" if layer is None else f"layer {layer}, "
    index = int(torch.nonzero(bad)[0]) + start
    raise ValueError(f"non-finite {what} (NaN/Inf) at {where}sample {index} ({int(bad.sum())} sample(s) "
                     f"in samples {start}..{start + bad.numel() - 1})")


def run_in_chunks(n, step, compute, layer):
    """Yield ``(start, compute(start, stop))`` over ``range(n)`` in chunks of `step` samples,
    each checked finite. A chunk that runs out of GPU memory is retried in halves (logged), down
    to one sample: a long job finishes more slowly rather than failing."""
    start, step = 0, max(1, min(n, step))
    while start < n:
        try:
            J = compute(start, min(n, start + step))
        except torch.OutOfMemoryError:
            if step == 1:
                raise
            step = max(1, step // 2)
            log.warning("layer %s: out of GPU memory; retrying with %d samples per chunk", layer, step)
            torch.cuda.empty_cache()
            continue
        # One reduction flags a non-finite entry (or, rarely, an overflowing sum of finite ones);
        # only then the exact elementwise check.
        if not bool(torch.isfinite(J.sum((1, 2))).all()):
            bad = ~torch.isfinite(J).flatten(1).all(1)
            if bad.any():
                _raise_non_finite("Jacobian", bad, start, layer)
        yield start, J
        start += J.shape[0]


def _iter(parts, x, chunk_bytes, layer, out=None):
    d = parts.d_model
    _check_input(x, d)
    x = x.to(torch.float32)
    bad = ~torch.isfinite(x).all(1)
    if bad.any():
        _raise_non_finite("block input", bad, 0, layer)
    p = _prepare(parts, x.device)

    def compute(start, stop):
        return _chunk_jacobians(p, x[start:stop], None if out is None else out[start:stop])

    with torch.no_grad():
        yield from run_in_chunks(x.shape[0], int(chunk_bytes // _bytes_per_sample(parts)), compute, layer)


def iter_block_jacobians(parts: BlockParts, x, *, chunk_bytes=DEFAULT_CHUNK_BYTES, layer=None):
    """Closed-form single-token Jacobians, chunk by chunk.

    Parameters
    ----------
    parts : BlockParts
        The block, from ``adapter.block_parts(block)``.
    x : torch.Tensor
        ``(B, d)`` block inputs (residual stream at the token); computed in float32 on
        ``x.device``.
    chunk_bytes : int
        Working-memory budget of one chunk; at least one sample per chunk.
    layer : int, optional
        Named in errors.

    Yields
    ------
    start : int
        Index of the chunk's first sample.
    J : torch.Tensor
        ``(b, d, d)`` float32 Jacobians ``d block(x_i) / d x_i`` of samples
        ``start .. start + b - 1`` (row = output coordinate).

    Raises
    ------
    ValueError
        ``x`` has the wrong shape, or an input or Jacobian is non-finite (names the layer
        and the sample index).
    """
    yield from _iter(parts, x, chunk_bytes, layer)


def block_jacobians(parts: BlockParts, x, *, chunk_bytes=DEFAULT_CHUNK_BYTES, layer=None):
    """Closed-form single-token block Jacobians of all samples at once.

    Parameters
    ----------
    parts : BlockParts
    x : torch.Tensor
        ``(B, d)`` block inputs.
    chunk_bytes : int
        Working-memory budget per chunk (the result itself, ``4 B d^2`` bytes, comes on top).
    layer : int, optional
        Named in errors.

    Returns
    -------
    torch.Tensor
        ``(B, d, d)`` float32 on ``x.device``; ``J[i] = d block(x_i) / d x_i``.

    Raises
    ------
    ValueError
        See :func:`iter_block_jacobians`.
    """
    _check_input(x, parts.d_model)
    out = torch.empty(x.shape[0], parts.d_model, parts.d_model, dtype=torch.float32, device=x.device)
    for _ in _iter(parts, x, chunk_bytes, layer, out=out):
        pass
    return out


def mean_jacobian(parts: BlockParts, x, *, chunk_bytes=DEFAULT_CHUNK_BYTES, layer=None):
    """Mean single-token Jacobian over samples, streamed over chunks.

    Parameters
    ----------
    parts : BlockParts
    x : torch.Tensor
        ``(B, d)`` block inputs, ``B >= 1``.
    chunk_bytes : int
    layer : int, optional
        Named in errors.

    Returns
    -------
    torch.Tensor
        ``(d, d)`` float64: per-sample float32 Jacobians summed in float64, divided by ``B``.
    """
    if x.shape[0] == 0:
        raise ValueError("mean_jacobian needs at least one sample")
    total = torch.zeros(parts.d_model, parts.d_model, dtype=torch.float64, device=x.device)
    for _, J in iter_block_jacobians(parts, x, chunk_bytes=chunk_bytes, layer=layer):
        total += J.sum(0, dtype=torch.float64)
    return total / x.shape[0]


def closed_form_flops(parts: BlockParts, n_samples=1):
    """Floating-point operations of the dominant GEMMs of :func:`block_jacobians`
    (MLP Jacobian products, and ``J_mlp J_attn`` for sequential blocks)."""
    d, d_ff, r = parts.d_model, parts.d_ff, parts.n_kv_heads * parts.head_dim
    flops = 2 * d * d_ff * d
    if 2 * r <= d:  # factored attention Jacobian
        flops += (2 if parts.parallel else 4) * d * d * r
    elif not parts.parallel:
        flops += 2 * d**3
    return flops * n_samples
