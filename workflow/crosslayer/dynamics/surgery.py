"""Schur surgery (paper 004): split a Jacobian into its normal part and the strictly upper triangle of
its Schur form, scale the non-normal part by ``alpha``, and measure the dose response of the
cumulative effective rank, with two random controls (a random strictly upper triangle of the same
norm, and a Haar-random unitary basis).
"""

import ctypes
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import scipy.linalg
from scipy.stats import unitary_group
from threadpoolctl import threadpool_limits

from crosslayer.linalg.arrays import check_square, check_stack, strip_identity
from crosslayer.linalg.effective_rank import (
    TORCH_MIN_WIDTH,
    SchurProduct,
    check_power,
    check_rank,
    effective_rank,
    torch_of,
    triangle_svd,
)

__all__ = [
    "DEFAULT_ALPHAS", "SCHUR_MODES", "schur_parts", "schur_recompose", "random_strict_upper", "haar_unitary",
    "schur_dose_response", "schur_dose_responses", "dose_response_table", "fold_bottleneck",
]

DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)

SCHUR_MODES = ("J", "J - I")


# --------------------------------------------------------------------------- Schur surgery


def schur_parts(J, *, mode="J"):
    """Complex Schur split ``J = Q (D + N) Q^H`` (or of ``J - I`` for mode "J - I").

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    mode : {"J", "J - I"}, default="J"
        Which operator is factorized.

    Returns
    -------
    Q : (d, d) complex ndarray
        Unitary Schur basis.
    D : (d,) complex ndarray
        Eigenvalues of the factorized operator (the Schur diagonal).
    N : (d, d) complex ndarray
        Strictly upper-triangular non-normal part; ``||N||_F`` is the Henrici numerator.
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    J = check_square("J", J)
    T, Q = scipy.linalg.schur(strip_identity(J, mode == "J - I"), output="complex")
    return Q, np.diagonal(T).copy(), np.triu(T, 1)


def schur_recompose(Q, D, N, alpha, *, mode="J"):
    """``Q (diag(D) + alpha N) Q^H``, plus I for mode "J - I".

    Parameters
    ----------
    Q : (d, d) array_like
        Unitary basis.
    D : (d,) array_like
        Diagonal (eigenvalues).
    N : (d, d) array_like
        Strictly upper-triangular part.
    alpha : float
        Dose: 0 gives the normal matrix with eigenvalues D, 1 the original.
    mode : {"J", "J - I"}, default="J"

    Returns
    -------
    J_alpha : (d, d) complex ndarray
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    Q = np.asarray(Q, dtype=complex)
    d = Q.shape[0]
    if Q.shape != (d, d):
        raise ValueError(f"`Q` must be square (d, d), got shape {Q.shape}")
    D, N = np.asarray(D, dtype=complex), np.asarray(N, dtype=complex)
    if D.shape != (d,):
        raise ValueError(f"`D` must have shape ({d},), got {D.shape}")
    if N.shape != (d, d):
        raise ValueError(f"`N` must have shape ({d}, {d}), got {N.shape}")
    out = Q @ _schur_triangle(D, N, alpha) @ Q.conj().T
    if mode == "J - I":
        out[np.diag_indices(d)] += 1.0
    return out


def _schur_triangle(D, N, alpha, mode="J"):
    """The upper-triangular ``diag(D) + alpha N`` of a Schur form at dose alpha (a new array),
    plus I in mode "J - I" (``Q T Q^H + I = Q (T + I) Q^H``)."""
    T = alpha * N
    shift = D + (1 if mode == "J - I" else 0)
    if isinstance(T, np.ndarray):
        T[np.diag_indices(T.shape[0])] += shift
    else:  # a tensor, on its device
        T.diagonal().add_(shift)
    return T


def random_strict_upper(N, rng):
    """i.i.d. complex Gaussian strictly upper-triangular matrix with ``||.||_F = ||N||_F``.

    Parameters
    ----------
    N : (d, d) array_like
        Matrix whose Frobenius norm is matched.
    rng : numpy.random.Generator or int
        Source of the draw.

    Returns
    -------
    R : (d, d) complex ndarray
        Strictly upper triangular, ``||R||_F = ||N||_F`` (0 if N = 0 or d = 1).
    """
    N = np.asarray(N)
    if N.ndim != 2 or N.shape[0] != N.shape[1]:
        raise ValueError(f"`N` must be square (d, d), got shape {N.shape}")
    rng = np.random.default_rng(rng)
    d = N.shape[0]
    R = np.triu(rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d)), 1)
    norm_R, norm_N = np.linalg.norm(R), np.linalg.norm(N)
    return R * (norm_N / norm_R) if norm_R > 0 else R


def haar_unitary(d, rng, device=None):
    """Haar-random d x d unitary matrix (``scipy.stats.unitary_group``), complex ndarray.

    With a torch `device`, a complex128 tensor there: the same Gaussian draws as scipy's (taken
    from `rng` on the host, in the same order), their QR and phase correction on the device, so
    it equals scipy's matrix to rounding."""
    if d < 1:
        raise ValueError(f"`d` must be >= 1, got {d}")
    rng = np.random.default_rng(rng)
    if device is None or d == 1:
        W = (np.exp(2j * np.pi * rng.random()).reshape(1, 1) if d == 1 else unitary_group.rvs(d, random_state=rng))
        return W if device is None else torch_of(W).to(device)
    import torch

    real, imag = rng.normal(size=(d, d)), rng.normal(size=(d, d))  # scipy's draws, in its order
    Z = torch.complex(torch.from_numpy(real), torch.from_numpy(imag)).to(device) / math.sqrt(2)
    Q, R = torch.linalg.qr(Z)
    diagonal = R.diagonal()
    return Q * (diagonal / diagonal.abs())[None, :]


def schur_dose_response(Js, *, alphas=DEFAULT_ALPHAS, mode="J", rank=None, power=1, draws=4, seed=0):
    """Cumulative effective rank after scaling the non-normal Schur part of every layer.

    For each layer ``J_l = Q (D + N) Q^H`` (complex Schur form) and each dose alpha:

    * dose: ``J_alpha = Q (D + alpha N) Q^H`` - eigenvalues and basis kept, non-normal part
      scaled (alpha = 0 normal, alpha = 1 the original);
    * control A: ``Q (D + alpha R) Q^H`` with R i.i.d. complex Gaussian strictly upper
      triangular, ``||R||_F = ||N||_F`` - keeps the eigenvalues, the basis and the Frobenius mass
      (hence the Henrici departure) but not the structure of N;
    * control B: ``W (D + alpha N) W^H`` with W Haar-random unitary - unitarily similar to
      ``J_alpha``, so it keeps the eigenvalues, the singular values, ``||.||_F`` and the Henrici
      departure of every layer, and replaces only the basis (how layers line up).

    The stack is recomposed and :func:`cumulative_effective_rank` computed from every start
    layer. Random matrices are drawn per (draw, layer) from ``default_rng([seed, draw, layer])``
    and reused across the alpha grid.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians (real).
    alphas : sequence of float, default=(0, 0.25, 0.5, 0.75, 1, 1.5)
    mode : {"J", "J - I"}, default="J"
        "J - I": factorize the residual operator ``J - I = Q (D + N) Q^H``, scale N and add I
        back. In exact arithmetic this is the same as mode "J" (J and J - I share Q and N);
        it differs only through the non-uniqueness of the numerical Schur form (eigenvalue
        order), which changes N for alpha not in {0, 1}.
    rank : int, optional
        Truncation rank, default ``min(256, d)``.
    power : {1, 2}, default=1
    draws : int, default=4
        Random draws per layer for each control (0 skips the controls).
    seed : int, default=0

    Returns
    -------
    result : dict
        ``"alphas"``: (A,) ndarray;
        ``"dose"``: (A, L) effective rank of ``J_{l->L}`` per alpha and start layer;
        ``"dose_log_frobenius"``: (A, L) natural log of ``||J_{l->L}||_F`` of the (truncated)
        product, the transient amplification of paper 004's Fig. 5;
        ``"control_a"``, ``"control_b"``: (draws, A, L) effective ranks;
        ``"control_a_log_frobenius"``, ``"control_b_log_frobenius"``: (draws, A, L) their log
        Frobenius norms.

    Notes
    -----
    Why complex and not real. For real J with complex eigenvalues, ``Q D Q^H`` is complex, so
    ``J_alpha`` is complex for alpha != 1; its real part would change the eigenvalues and
    destroy normality at alpha = 0. The real Schur form (quasi-triangular, 2 x 2 blocks) keeps
    everything real, but its 2 x 2 blocks ``[[a, b], [c, a]]`` are themselves non-normal when
    ``|b| != |c|``, so zeroing the strictly block-upper part does not give a normal matrix at
    alpha = 0. Controls A (complex Gaussian R) and B (complex Haar W) are complex anyway. So all
    operators stay complex; the cumulative product and its singular values are computed in
    complex128 (effective rank is defined by singular values, which are real). At alpha = 1 the
    real J is recovered to rounding.
    """
    if mode not in SCHUR_MODES:
        raise ValueError(f"`mode` must be one of {SCHUR_MODES}, got {mode!r}")
    return schur_dose_responses(Js, modes=(mode,), alphas=alphas, rank=rank, power=power, draws=draws,
                                seed=seed)[mode]


def schur_dose_responses(Js, *, modes=SCHUR_MODES, alphas=DEFAULT_ALPHAS, rank=None, power=1, draws=4, seed=0,
                         progress=None, device=None, workers=1, threads=None):
    """:func:`schur_dose_response` of several modes in one backward sweep over the layers.

    Each mode's result equals its own call bit for bit; control B's Haar-random unitaries, which
    are the same in every mode (drawn from the same seeds, after control A's draw of the same
    size), are drawn once per (draw, layer) instead of once per mode (at d = 4096 about 12 s each
    on 2 cores). The modes' running products are held side by side.

    `progress`, if given, wraps the backward sequence of layers (e.g. a tqdm bar: at d = 4096 a
    layer takes minutes).

    `device` (a torch device, e.g. "cuda") runs everything but the Schur forms there: the Haar
    draws' QR (:func:`haar_unitary`), the triangles, the basis changes, the running products and
    their SVDs; the results equal the host's to rounding. `workers` > 1 computes the Schur forms
    (LAPACK, host only) ahead of the sweep in that many processes with ``threads // workers``
    BLAS threads each (a Schur form parallelises poorly over many threads, and the forms of
    different layers are independent), so that they overlap the device's work; the forms are the
    same as in-process ones to rounding.

    Returns
    -------
    dict
        mode -> result of :func:`schur_dose_response`.
    """
    modes = tuple(modes)
    if not modes or any(m not in SCHUR_MODES for m in modes) or len(set(modes)) < len(modes):
        raise ValueError(f"`modes` must be distinct values of {SCHUR_MODES}, got {modes!r}")
    check_power(power)
    Js = check_stack("Js", Js)
    alphas = np.asarray(alphas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"`alphas` must be a non-empty 1-D sequence, got shape {alphas.shape}")
    if draws < 0:
        raise ValueError(f"`draws` must be >= 0, got {draws}")
    sweep = _Sweep(modes, alphas, Js.shape[0], Js.shape[1], check_rank(rank, Js.shape[1]), power, draws, seed, device)
    # layers streamed backward so each Schur form is computed once and no per-layer factors are stored
    forms, layers = _schur_forms(Js, modes, workers, threads), range(Js.shape[0] - 1, -1, -1)
    try:
        for layer in progress(layers) if progress else layers:
            sweep.push(layer, *next(forms))
    finally:
        forms.close()  # stops the Schur-form workers
    return sweep.out


class _Sweep:
    """The running products of :func:`schur_dose_responses`: one per (mode, construction, draw,
    alpha), and the results they fill, layer by layer from the last."""

    def __init__(self, modes, alphas, L, d, rank, power, draws, seed, device):
        self.modes, self.alphas, self.L, self.d, self.power, self.draws, self.seed, self.device = (
            modes, alphas, L, d, power, draws, seed, device)
        self.fast = fast = d >= TORCH_MIN_WIDTH or device is not None
        A = alphas.size
        self.dose = {m: [SchurProduct(rank, fast) for _ in range(A)] for m in modes}
        self.ctrl_a = {m: [[SchurProduct(rank, fast) for _ in range(A)] for _ in range(draws)] for m in modes}
        self.ctrl_b = {m: [[SchurProduct(rank, fast) for _ in range(A)] for _ in range(draws)] for m in modes}
        self.out = {m: {"alphas": alphas, "dose": np.empty((A, L)), "dose_log_frobenius": np.empty((A, L)),
                        **{key: np.empty((draws, A, L)) for key in ("control_a", "control_b", "control_a_log_frobenius",
                                                                    "control_b_log_frobenius")}} for m in modes}
        self.schur_bases, self.haar_bases = {}, {}  # the later layer's Q per mode and W per draw

    def array(self, x):
        """NumPy below the torch width; else a float64 / complex128 tensor on the device."""
        if not self.fast:
            return np.asarray(x)
        return torch_of(x) if self.device is None else torch_of(x).to(self.device)

    def push(self, layer, formed, parts):
        """Push one layer, given its Schur forms (``parts``: mode -> :func:`schur_parts`), into every
        running product."""
        assert formed == layer, (formed, layer)
        last, alphas, fast, power = layer == self.L - 1, self.alphas, self.fast, self.power
        haar = {}  # draw -> (this layer's W, W_later^H W), shared by the modes
        for mode in self.modes:
            res = self.out[mode]
            Q, D, N_host = parts.pop(mode)
            Q, D, N = self.array(Q), self.array(D), self.array(N_host)
            c_q = None if last else self.schur_bases[mode].conj().T @ Q  # the basis change of dose and control A
            self.schur_bases[mode] = Q

            def triangle(X, alpha):
                return _schur_triangle(D, X, alpha, mode)

            # the last layer starts every product with a d x d SVD (at d = 4096 a minute each): the
            # dose's SVD of its triangle also starts control B, whose W T W^H shares it
            shared = [triangle_svd(triangle(N, alpha), fast) for alpha in alphas] if last else None
            for i, alpha in enumerate(alphas):
                product = self.dose[mode][i]
                s, res["dose_log_frobenius"][i, layer] = (product.start(shared[i]) if last else
                                                          product.push(c_q, triangle(N, alpha)))
                res["dose"][i, layer] = effective_rank(s, power=power)
            for j in range(self.draws):
                rng = np.random.default_rng([self.seed, j, layer])
                R = self.array(random_strict_upper(N_host, rng))
                if j not in haar:
                    W = (haar_unitary(self.d, rng, self.device) if self.device is not None else
                         self.array(haar_unitary(self.d, rng)))
                    haar[j] = W, None if last else self.haar_bases[j].conj().T @ W
                c_w = haar[j][1]
                for i, alpha in enumerate(alphas):
                    a, b = self.ctrl_a[mode][j][i], self.ctrl_b[mode][j][i]
                    s, res["control_a_log_frobenius"][j, i, layer] = (
                        a.start(triangle_svd(triangle(R, alpha), fast)) if last else a.push(c_q, triangle(R, alpha)))
                    res["control_a"][j, i, layer] = effective_rank(s, power=power)
                    s, res["control_b_log_frobenius"][j, i, layer] = (b.start(shared[i]) if last else
                                                                      b.push(c_w, triangle(N, alpha)))
                    res["control_b"][j, i, layer] = effective_rank(s, power=power)
        self.haar_bases = {j: W for j, (W, _) in haar.items()}


def _start_worker(threads, parent):
    """A Schur-form worker's initializer: its BLAS threads, and its end when the job's process ends
    however it ends (``kill -9``, the OOM killer, a node's ``scancel``), which no ``finally`` sees:
    on Linux the kernel sends it SIGTERM (a parent-death signal); elsewhere, or if the job had
    already gone, a thread that watches the parent's pid ends it."""
    threadpool_limits(threads)
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _schur_forms(Js, modes, workers, threads):
    """Yield ``(layer, {mode: schur_parts})`` from the last layer to the first; with ``workers > 1``
    computed ahead in worker processes (at most ``workers`` layers in flight: each form holds two
    d x d complex matrices)."""
    layers = range(len(Js) - 1, -1, -1)
    if workers <= 1:
        for layer in layers:
            yield layer, {mode: schur_parts(Js[layer], mode=mode) for mode in modes}
        return
    per_worker = max(1, (threads or multiprocessing.cpu_count()) // workers)
    # spawn: the parent may hold a CUDA context, which a forked child must not inherit
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                             initargs=(per_worker, os.getpid())) as pool:
        pending, ahead = deque(), iter(layers)

        def submit():
            layer = next(ahead, None)
            if layer is not None:
                pending.append((layer, {mode: pool.submit(schur_parts, Js[layer], mode=mode) for mode in modes}))
        for _ in range(workers):
            submit()
        while pending:
            layer, futures = pending.popleft()
            submit()
            yield layer, {mode: future.result() for mode, future in futures.items()}


def dose_response_table(result):
    """Long table of a :func:`schur_dose_response` result.

    Returns
    -------
    table : pandas.DataFrame
        One row per (construction, draw, alpha, start layer): ``construction`` in
        {"dose", "control_a", "control_b"}, ``draw`` (0 for the dose), ``alpha``, ``start_layer``,
        ``effective_rank``, ``log_frobenius`` (natural log of the product's Frobenius norm).
    """
    import pandas as pd

    alphas = result["alphas"]
    frames = []
    for construction in ("dose", "control_a", "control_b"):
        values, log_fro = result[construction], result[f"{construction}_log_frobenius"]
        if construction == "dose":  # (draws, A, L)
            values, log_fro = values[None], log_fro[None]
        draw, a, layer = np.indices(values.shape).reshape(3, -1)
        frames.append(pd.DataFrame({"construction": construction, "draw": draw, "alpha": alphas[a],
                                    "start_layer": layer, "effective_rank": values.ravel(),
                                    "log_frobenius": log_fro.ravel()}))
    return pd.concat(frames, ignore_index=True)


def fold_bottleneck(fold_means, *, rank=None, seed=0, progress=None, device=None, workers=1, threads=None):
    """The cumulative bottleneck of each sample fold's mean Jacobians: the effective rank of the
    composed stack from every start layer, as trained (dose 1) and with the non-normal Schur part
    removed (dose 0), mode J, no controls. Disjoint folds make these independent replicates: the
    units of the bottleneck's verdicts, which the whole sample's one value per start layer is not.

    Parameters
    ----------
    fold_means : (K, L, d, d) array_like
        ``fold_means`` of :func:`crosslayer.dynamics.checkpoint.block_jacobian_stats` (K may be 0).
    rank, seed, device, workers, threads
        As :func:`schur_dose_responses`.
    progress : callable, optional
        ``progress(layers, fold)`` wraps each fold's backward sequence of layers.

    Returns
    -------
    table : pandas.DataFrame
        fold, alpha (0.0, 1.0), start_layer, effective_rank, log_frobenius; no rows when K is 0.
    """
    import pandas as pd

    columns = ["fold", "alpha", "start_layer", "effective_rank", "log_frobenius"]
    frames = []
    for fold, Js in enumerate(np.asarray(fold_means)):
        result = schur_dose_responses(Js, modes=("J",), alphas=(0.0, 1.0), rank=rank, draws=0, seed=seed,
                                      progress=progress and (lambda layers, fold=fold: progress(layers, fold)),
                                      device=device, workers=workers, threads=threads)["J"]
        table = dose_response_table(result)
        frames.append(table[table["construction"] == "dose"].assign(fold=fold)[columns])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
