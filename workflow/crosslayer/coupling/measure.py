"""Transformer block coupling (paper 002): how well the top singular vectors of one Jacobian
diagonalize another.

For Jacobians ``J`` (layer l) and ``J'`` (layer l') with ``J' = U' S' V'^T``, the coupling matrix on
the top ``K`` singular vectors is ``A = U'_K^T J V'_K`` (K x K). Metrics (functions named
``*_miscoupling`` return a float; coupling is its negative):

``paper``
    ``||A - Diag A||_F / ||A||_F`` in [0, 1]: 0 when ``J'``'s singular vectors diagonalize ``J``.
``released_l2`` / ``released_trace``
    The authors' released code: ``|| |A| - diag(s_K) ||_F`` over ``||s_K||_2`` or over
    ``sum s_K``, with ``s_K`` the top singular values of ``J`` itself. Also 0 when ``J`` and ``J'``
    share singular vectors, but it penalises a diagonal that differs from ``J``'s spectrum too.

A depth-wise matrix ``M[l, l'] = m(U_{l'}^T J^l V_{l'})`` is not symmetric; its diagonal is 0 for
every metric (each Jacobian is diagonalized by its own singular vectors).
"""

import numpy as np
import torch

from crosslayer.linalg.topk import top_singular

__all__ = ["METRICS", "coupling_matrices", "depthwise_miscoupling", "miscoupling", "tokenwise_miscoupling"]

METRICS = ("paper", "released_l2", "released_trace")


def coupling_matrices(J, bases):
    """``A = U'^T J V'`` for every basis: ``(n_bases, K, K)``, on ``J``'s device."""
    U = torch.stack([b.U for b in bases])  # (B, d, K)
    V = torch.stack([b.V for b in bases])
    return U.transpose(1, 2) @ J @ V


def miscoupling(A, *, metric="paper", s=None):
    """Mis-coupling of coupling matrices.

    Parameters
    ----------
    A : (..., K, K) array_like
    metric : {"paper", "released_l2", "released_trace"}
    s : (..., K) array_like
        Top singular values of the projected Jacobian (the released metrics only).

    Returns
    -------
    m : ndarray of shape ``A.shape[:-2]`` (float64)
        ``paper`` lies in [0, 1] (NaN where A = 0); the released metrics are >= 0.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"`A` must be (..., K, K), got shape {A.shape}")
    if metric == "paper":
        off = A.copy()
        idx = np.arange(A.shape[-1])
        off[..., idx, idx] = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.linalg.norm(off, axis=(-2, -1)) / np.linalg.norm(A, axis=(-2, -1))
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
    if s is None:
        raise ValueError(f"metric {metric!r} needs `s`, the projected Jacobian's top singular values")
    s = np.asarray(s, dtype=np.float64)
    diff = np.linalg.norm(np.abs(A) - s[..., :, None] * np.eye(A.shape[-1]), axis=(-2, -1))
    scale = np.linalg.norm(s, axis=-1) if metric == "released_l2" else s.sum(axis=-1)
    return diff / scale


def depthwise_miscoupling(jacobian, n_layers, Ks, *, metrics=METRICS, hold_bytes=0, progress=None):
    """Depth-wise mis-coupling matrices of one prompt, streaming one Jacobian at a time.

    Two passes over the layers: the first takes each Jacobian's top-``max(Ks)`` singular
    triplets, the second projects each Jacobian on every layer's basis. Only the bases
    (``L x d x K`` per side) are held between passes; the Jacobians are computed again, unless
    all of them fit in `hold_bytes`.

    Parameters
    ----------
    jacobian : callable
        ``jacobian(layer) -> (d, d) torch.Tensor``; called twice per layer.
    n_layers : int
    Ks : sequence of int
        Subspace sizes; each ``A`` at ``K`` is the top-left block of ``A`` at ``max(Ks)``.
    metrics : sequence of str
    hold_bytes : int, default=0
        Keep the first pass's Jacobians (where they were computed) when ``L * d^2`` of them fit
        in this many bytes, and skip the second computation.
    progress : callable, optional
        Wraps each pass's layer iterator.

    Returns
    -------
    result : dict
        ``miscoupling`` (n_metrics, n_K, L, L) float64, ``M[m, k, l, l']`` for ``J^l`` on layer
        ``l'``'s basis; ``singular_values`` (L, max K); ``abs_coupling`` (L, L, K, K) float32,
        ``|A|`` at ``max(Ks)`` for the figures.
    """
    Ks = sorted(set(int(k) for k in Ks))
    layers = range(n_layers)
    wrap = progress or (lambda it: it)
    held, bases = {}, []
    for l in wrap(layers):
        J = jacobian(l)
        if n_layers * J.numel() * J.element_size() <= hold_bytes:
            held[l] = J
        bases.append(top_singular(J, Ks[-1]))
    A = np.empty((n_layers, n_layers, Ks[-1], Ks[-1]))
    for l in wrap(layers):
        A[l] = coupling_matrices(held.pop(l) if l in held else jacobian(l), bases).double().cpu().numpy()
    s = np.stack([b.s.double().cpu().numpy() for b in bases])  # (L, K)
    out = _all_miscouplings(A, s[:, None], Ks, metrics)
    return {"miscoupling": out, "singular_values": s, "abs_coupling": np.abs(A).astype(np.float32)}


def _all_miscouplings(A, s, Ks, metrics):
    """(n_metrics, n_K, *A.shape[:-2]) mis-couplings of coupling matrices at every K."""
    return np.stack([np.stack([miscoupling(A[..., :K, :K], metric=metric, s=s[..., :K]) for K in Ks])
                     for metric in metrics])


def tokenwise_miscoupling(sweep, sweep_basis, n_tokens, Ks, *, metrics=METRICS, figure_K=None, hold_bytes=0):
    """Token-wise mis-coupling of two layers ``l`` (projected) and ``l'`` (bases) on one prompt.

    For every pair ``t1 <= t2`` the Jacobian ``J^l_{t1 t2}`` is projected on the top singular
    vectors of ``J^{l'}``:

    * self coupling: ``J^l_{tt}`` on ``J^{l'}_{t't'}``, every ``t, t'``;
    * fixed input token: ``J^l_{t1 t2}`` on ``J^{l'}_{t1 t2'}``, every ``t2, t2' >= t1``;
    * fixed output token: ``J^l_{t1 t2}`` on ``J^{l'}_{t1' t2}``, every ``t1, t1' <= t2``.

    Two passes like :func:`depthwise_miscoupling`: the first keeps the top-``max(Ks)`` bases of
    ``l'``, the second projects ``l``; one output token's Jacobians are held at a time unless
    all of them fit in `hold_bytes`.

    Parameters
    ----------
    sweep, sweep_basis : callable
        ``sweep() -> iterator of (t2, (t2 + 1, d, d) tensor)`` for layers ``l`` and ``l'``, every
        ``t2`` in ``0 .. n_tokens - 1`` in order (:func:`crosslayer.jacobians.multi_token.token_jacobians`).
        The same callable twice when ``l = l'``.
    n_tokens : int
    Ks : sequence of int
    metrics : sequence of str
    figure_K : int, optional
        Size of the ``|A|`` blocks returned for figures (default ``min(Ks)``).
    hold_bytes : int

    Returns
    -------
    result : dict
        ``self`` (n_metrics, n_K, T, T) ``[t, t']``; ``fixed_input`` (n_metrics, n_K, T, T, T)
        ``[t1, t2, t2']``; ``fixed_output`` (n_metrics, n_K, T, T, T) ``[t2, t1, t1']``, NaN where
        a token pair does not exist (``t1 > t2``). ``abs_self`` (T, T, k, k), ``abs_fixed_input``
        ``[t2, t2']`` at ``t1 = 0`` and ``abs_fixed_output`` ``[t1, t1']`` at ``t2 = T - 1``, both
        (T, T, k, k), ``|A|`` at ``k = figure_K`` (zero where the pair does not exist).
    """
    Ks = sorted(set(int(k) for k in Ks))
    T, Kmax, k = n_tokens, Ks[-1], figure_K or Ks[0]
    held = {}

    def jacobians(source, keep):
        count = 0
        for t2, J in source():
            count += 1
            if keep and T * (T + 1) // 2 * J[0].numel() * J.element_size() <= hold_bytes:
                held[t2] = J
            yield t2, J
        if count != T:
            raise ValueError(f"the sweep gave {count} output tokens, expected n_tokens = {T}")

    bases = {}  # (t1, t2) -> Basis of J^{l'}_{t1 t2}
    for t2, J in jacobians(sweep_basis, keep=sweep is sweep_basis):
        for t1 in range(t2 + 1):
            bases[t1, t2] = top_singular(J[t1], Kmax)
    shape = (len(metrics), len(Ks), T)
    out = {"self": np.full(shape + (T,), np.nan), "fixed_input": np.full(shape + (T, T), np.nan),
           "fixed_output": np.full(shape + (T, T), np.nan)}
    figures = {name: np.zeros((T, T, k, k), np.float32) for name in ("abs_self", "abs_fixed_input", "abs_fixed_output")}
    second = ((t2, held.pop(t2)) for t2 in range(T)) if held else jacobians(sweep, keep=False)
    for t2, J2 in second:
        for t1 in range(t2 + 1):
            J = J2[t1]
            s = torch.linalg.svdvals(J)[:Kmax].double().cpu().numpy()
            # name -> (basis tokens along the row, their (t1, t2) keys, the row's index, drawn in the figure?)
            groups = {"fixed_output": (range(t2 + 1), [(u, t2) for u in range(t2 + 1)], (t2, t1), t2 == T - 1),
                      "fixed_input": (range(t1, T), [(t1, u) for u in range(t1, T)], (t1, t2), t1 == 0)}
            if t1 == t2:
                groups["self"] = (range(T), [(u, u) for u in range(T)], (t1,), True)
            for name, (index, keys, row, drawn) in groups.items():
                index = list(index)
                A = coupling_matrices(J, [bases[key] for key in keys]).double().cpu().numpy()  # (n, Kmax, Kmax)
                out[name][(..., *row, index)] = _all_miscouplings(A, s, Ks, metrics)  # (n_metrics, n_K, n)
                if drawn:  # the figure's grid is indexed by the row's last token and the basis token
                    figures[f"abs_{name}"][row[-1], index] = np.abs(A[:, :k, :k])
    return {**out, **figures}
