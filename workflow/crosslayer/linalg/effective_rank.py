"""Effective rank of a spectrum, and of cumulative Jacobians ``J_{l->L}`` composed backward by
truncated SVD (paper 004; paper 003 uses :func:`effective_rank` for weight stacks).

Inputs are float NumPy arrays or torch tensors; wide operators (``d >= TORCH_MIN_WIDTH``) compose in
torch, the rest in NumPy.
"""

import math
import sys

import numpy as np

from crosslayer.linalg.arrays import check_stack

__all__ = ["TORCH_MIN_WIDTH", "effective_rank", "cumulative_effective_rank"]


def check_power(power):
    if power not in (1, 2):
        raise ValueError(f"`power` must be 1 or 2, got {power!r}")


# --------------------------------------------------------------------------- effective rank


def effective_rank(s, *, power=1):
    """Roy-Vetterli effective rank ``exp(H(p))`` of a spectrum.

    Parameters
    ----------
    s : (n,) array_like
        Singular values, >= 0.
    power : {1, 2}, default=1
        ``p_i = s_i^power / sum_j s_j^power``: 1 is Roy-Vetterli (paper 004), 2 weights by
        energy ``s^2``.

    Returns
    -------
    erank : float
        In [1, n] (n when all s_i are equal, 1 for rank one); NaN when all s are 0.
    """
    check_power(power)
    s = np.asarray(s, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"`s` must be a non-empty 1-D array, got shape {s.shape}")
    if np.any(s < 0):
        raise ValueError("`s` must be >= 0")
    # scipy.special.entr(p) = -p log p (0 at p = 0), the terms scipy.stats.entropy sums, which
    # this equals bit for bit; scipy.stats itself would add ~0.6 s to every job's imports
    from scipy.special import entr

    w = s**power
    total = w.sum()
    if total == 0:
        return math.nan
    return float(np.exp(entr(w / total).sum()))


#: Width from which the Schur surgery's running products run in torch: its LAPACK SVD is about
#: twice NumPy's at d = 576, while below, importing torch (~2 s per job) costs more than it saves.
TORCH_MIN_WIDTH = 256


class _BackwardProduct:
    """Running rank-r product ``J_L ... J_l`` kept as ``U S V^H`` with max-normalized S.

    Only S and V^H are stored: multiplying an earlier layer on the right, ``U S V^H J_l``,
    has the singular values and right vectors of ``S V^H J_l`` because U has orthonormal
    columns.
    """

    def __init__(self, rank):
        self.rank = rank
        self.s = None
        self.vh = None
        self.log_scale = 0.0

    def push(self, J):
        """Multiply J (the next, earlier layer) on the right; return (singular values, log||P||_F)."""
        _, s, vh = np.linalg.svd(J if self.s is None else self.s[:, None] * (self.vh @ J), full_matrices=False)
        self.vh = vh[: self.rank]
        self.log_scale, self.s, out = _rescale(self.log_scale, s[: self.rank])
        return out


def _rescale(log_scale, s):
    """Divide singular values by their largest and add its log to ``log_scale``. Returns the
    new log scale, the divided values, and ``(those as NumPy, log Frobenius norm)``."""
    top = float(s[0])
    if top > 0:
        log_scale += math.log(top)
        s = s / top
    values = s if isinstance(s, np.ndarray) else s.cpu().numpy()
    return log_scale, s, (values, log_scale + math.log(float(np.linalg.norm(values))) if top > 0 else -math.inf)


class SchurProduct:
    """Running rank-r product ``J_L ... J_l`` of layers given as ``J = B T B^H`` (B unitary, T
    upper triangular: a Schur form, its dose or a control), kept as ``P B_l^H``.

    P is (r, d), scaled so that its largest singular value is 1 (the scale goes to a log), and
    B_l, the basis of the layer pushed last, is never applied: the next push receives
    ``C = B_l^H B_{l-1}``, one d x d product that every running product on the same chain of
    bases shares (the dose and control A at every alpha share the Schur bases of a mode; control
    B's draw j shares its Haar unitaries across alphas and modes). A push is ``P <- P C T`` (two
    r x d x d products) and the singular values of the new P (values only). Truncation to rank r
    happens once, at the start: every later product has rank r already, so P needs no
    re-orthogonalization (its rows carry an absolute error ~ eps ||P|| per layer, as an SVD's
    singular values do). With ``use_torch`` the arrays are float64 / complex128 CPU tensors,
    else NumPy.
    """

    def __init__(self, rank, use_torch=False):
        self.rank = rank
        self.use_torch = use_torch
        self.p = None
        self.log_scale = 0.0

    def start(self, svd_of_T):
        """Begin with the last layer ``B T B^H`` from :func:`triangle_svd` of T: ``P = S V^H``
        truncated to rank r (the product's own truncation: B rotates both sides)."""
        s, vh = svd_of_T
        self.log_scale, s, out = _rescale(self.log_scale, s[: self.rank])
        self.p = (s.to(vh.dtype) if self.use_torch else s)[:, None] * vh[: self.rank]
        return out

    def push(self, C, T):
        """Multiply the next, earlier layer ``B T B^H`` on the right, given ``C = B_l^H B``;
        return (singular values / their max, log||P||_F)."""
        self.p = (self.p @ C) @ T
        s = sys.modules["torch"].linalg.svdvals(self.p) if self.use_torch else np.linalg.svd(self.p, compute_uv=False)
        if float(s[0]) > 0:
            self.p /= float(s[0])
        self.log_scale, _, out = _rescale(self.log_scale, s)
        return out


def triangle_svd(T, use_torch):
    """``(s, V^H)`` of a triangle T: those of ``B T B^H`` are ``s`` and ``V^H B^H`` for any
    unitary B, so one SVD starts every product whose last layer shares T (the dose, control B)."""
    _, s, vh = (sys.modules["torch"].linalg.svd if use_torch else np.linalg.svd)(T, full_matrices=False)
    return s, vh


def torch_of(x):
    """A float64 / complex128 CPU tensor sharing a NumPy array's memory (the arrays here are)."""
    import torch  # imported here: the rest of the module runs without it

    x = torch.from_numpy(np.asarray(x))
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def check_rank(rank, d):
    rank = min(256, d) if rank is None else rank
    if not 1 <= rank <= d:
        raise ValueError(f"`rank` must satisfy 1 <= rank <= d = {d}, got {rank}")
    return int(rank)


def cumulative_effective_rank(Js, *, rank=None, power=1):
    """Effective rank of the cumulative Jacobian from each start layer to the last.

    ``J_{l->L} = J_{L-1} ... J_{l+1} J_l`` (layers 0..L-1) is composed backward: the last layer
    is factorized by SVD and truncated to rank r, then each earlier layer is multiplied on the
    right and the product re-truncated by SVD to rank r. After each step the singular values are
    divided by their maximum and the log of that factor accumulated, so the scale never
    overflows; the log Frobenius norm is reported separately.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer (mean) Jacobians in depth order; real or complex.
    rank : int, optional
        Truncation rank r, ``1 <= r <= d``; default ``min(256, d)``. With r = d nothing is
        truncated and the result is that of the exact product.
    power : {1, 2}, default=1
        See :func:`effective_rank`.

    Returns
    -------
    erank : (L,) ndarray
        ``erank[l]`` = effective rank of the rank-r truncation of ``J_{l->L}``, in [1, r];
        ``erank[L-1]`` is the last layer alone.
    log_frobenius : (L,) ndarray
        Natural log of the Frobenius norm of that (truncated) product.
    """
    check_power(power)
    Js = check_stack("Js", Js)
    r = check_rank(rank, Js.shape[1])
    L = Js.shape[0]
    erank, log_fro = np.empty(L), np.empty(L)
    product = _BackwardProduct(r)
    for layer in range(L - 1, -1, -1):
        s, log_fro[layer] = product.push(Js[layer])
        erank[layer] = effective_rank(s, power=power)
    return erank, log_fro
