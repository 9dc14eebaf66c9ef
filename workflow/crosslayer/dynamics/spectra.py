"""Spectral geometry of per-layer mean block Jacobians (paper 004).

Inputs are Jacobians ``J = d block(x) / d x`` of shape (d, d) with ``J = I + J_res`` (the block
contains its residual connection), float32/float64 NumPy arrays or torch tensors; everything is
computed in float64 (complex128 where the operator is complex) and scalars come back as Python
floats. Functions taking ``residual=True`` analyse ``J - I`` instead of ``J``.

* eigen statistics: spectral radius, fraction of expanding modes, fraction of eigenvalues in
  complex-conjugate pairs; Henrici departure from normality;
* singular-subspace alignment: self-alignment (top-k left vs right singular subspace of one
  layer), forward alignment (layer l's left vs layer l+1's right), Monte-Carlo baselines;
* the per-layer depth profile of the above with the cumulative effective rank
  (:mod:`crosslayer.linalg.effective_rank`). Per-sample statistics: :mod:`crosslayer.linalg.conditioning`;
  Schur surgery: :mod:`crosslayer.dynamics.surgery`; depth regimes: :mod:`crosslayer.dynamics.regimes`.
"""

import math

import numpy as np

from crosslayer.linalg.arrays import check_square, check_stack, strip_identity
from crosslayer.linalg.effective_rank import cumulative_effective_rank
from crosslayer.linalg.subspace import SVD_METHODS, pairwise_overlap, random_overlap_baseline, top_singular_subspaces

__all__ = [
    "eigen_stats", "henrici_departure", "residual_norm_ratio", "layer_subspaces", "self_alignment",
    "alignment_profile", "spectral_profile",
]


# --------------------------------------------------------------------------- eigenvalues


def eigen_stats(J, *, residual=False, tol=1e-6):
    """Eigenvalue statistics of one (mean) Jacobian.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
        Typically the mean Jacobian of a layer.
    residual : bool, default=False
        Use ``J - I``.
    tol : float, default=1e-6
        An eigenvalue counts as complex when ``|Im lambda| > tol * max|lambda|`` (relative).

    Returns
    -------
    stats : dict
        ``"eigenvalues"``: (d,) complex ndarray (``numpy.linalg.eigvals``);
        ``"spectral_radius"``: float, ``max|lambda| >= 0``;
        ``"frac_expanding"``: float in [0, 1], fraction with ``|lambda| > 1``;
        ``"frac_complex"``: float in [0, 1], fraction in complex-conjugate pairs (for real J they
        come in pairs, so this is even / d).
    """
    if not tol >= 0:
        raise ValueError(f"`tol` must be >= 0, got {tol}")
    J = strip_identity(check_square("J", J), residual)
    lam = np.linalg.eigvals(J)
    radius = float(np.abs(lam).max())
    return {
        "eigenvalues": lam,
        "spectral_radius": radius,
        "frac_expanding": float(np.mean(np.abs(lam) > 1.0)),
        "frac_complex": float(np.mean(np.abs(lam.imag) > tol * radius)) if radius > 0 else 0.0,
    }


def henrici_departure(J, *, residual=False, eigenvalues=None):
    """Henrici departure from normality ``sqrt(max(||J||_F^2 - sum|lambda|^2, 0)) / ||J||_F``.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    residual : bool, default=False
        Use ``J - I``.
    eigenvalues : (d,) array_like, optional
        Eigenvalues of the analysed operator if already computed.

    Returns
    -------
    departure : float
        In [0, 1]: 0 for normal matrices, -> 1 when the strictly upper-triangular Schur part
        dominates (it is ``||N||_F / ||J||_F`` for the Schur form ``J = Q (D + N) Q^H``).
        NaN for J = 0.
    """
    J = strip_identity(check_square("J", J), residual)
    lam = np.linalg.eigvals(J) if eigenvalues is None else np.asarray(eigenvalues)
    if lam.shape != (J.shape[0],):
        raise ValueError(f"`eigenvalues` must have shape ({J.shape[0]},), got {lam.shape}")
    fro2 = float(np.vdot(J, J).real)
    if fro2 == 0:
        return math.nan
    return math.sqrt(max(fro2 - float(np.sum(np.abs(lam) ** 2)), 0.0) / fro2)


def residual_norm_ratio(J):
    """``||J - I||_F / ||I||_F = ||J - I||_F / sqrt(d)``, a float >= 0.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    """
    J = check_square("J", J)
    R = strip_identity(J, True)
    return float(np.sqrt(np.vdot(R, R).real / J.shape[0]))


# --------------------------------------------------------------------------- alignment


def layer_subspaces(Js, *, k=10, residual=False, method="arpack", seed=0):
    """Top-k left and right singular subspaces of each layer's (mean) Jacobian.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
    k : int, default=10
        ``1 <= k < d``.
    residual : bool, default=False
        Use ``J - I``.
    method : {"arpack", "full"}, default="arpack"
        See :func:`crosslayer.linalg.subspace.top_singular_subspaces`.
    seed : int, default=0

    Returns
    -------
    U, V : (L, d, k) ndarray
        Left (output-space) and right (input-space) orthonormal bases.
    """
    Js = check_stack("Js", Js)
    if np.iscomplexobj(Js):
        raise ValueError(f"`Js` must be real, got dtype {Js.dtype}")
    if method not in SVD_METHODS:
        raise ValueError(f"`method` must be one of {SVD_METHODS}, got {method!r}")
    d = Js.shape[1]
    if not 1 <= k < d:
        raise ValueError(f"`k` must satisfy 1 <= k < d = {d}, got {k}")
    Us, Vs = [], []
    for J in Js:
        U, _, V = top_singular_subspaces(strip_identity(J, residual), k, method=method, seed=seed)
        Us.append(U)
        Vs.append(V)
    return np.stack(Us), np.stack(Vs)


def self_alignment(J, *, k=10, residual=False, method="arpack", seed=0):
    """Overlap between the top-k left and top-k right singular subspaces of one matrix.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    k : int, default=10
        ``1 <= k < d``.
    residual : bool, default=False
        Use ``J - I``.
    method, seed
        See :func:`layer_subspaces`.

    Returns
    -------
    overlap : float
        In [0, 1] (mean cosine of the principal angles); 1 for symmetric (e.g. PSD) matrices
        with a gap after the k-th singular value; about ``random_overlap_baseline(d, k)`` for
        unrelated subspaces.
    """
    J = check_square("J", J)
    U, V = layer_subspaces(J[None], k=k, residual=residual, method=method, seed=seed)
    return float(pairwise_overlap(U, V)[0, 0])


def alignment_profile(Js, *, k=10, residual=False, method="arpack", seed=0, draws=1000):
    """Self- and forward alignment across layers, with the Monte-Carlo random baseline.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians in depth order.
    k : int, default=10
    residual : bool, default=False
        Use ``J - I``.
    method, seed
        See :func:`layer_subspaces`; ``seed`` also seeds the baseline.
    draws : int, default=1000
        Monte-Carlo pairs for :func:`crosslayer.linalg.subspace.random_overlap_baseline`.

    Returns
    -------
    profile : dict
        ``"self"``: (L,) ndarray, overlap(U_l, V_l);
        ``"forward"``: (L - 1,) ndarray, overlap(U_l, V_{l+1}) (layer l's output subspace against
        layer l+1's input subspace);
        ``"baseline_mean"``, ``"baseline_sd"``: float, overlap of random k-dim subspaces of R^d.
        All in [0, 1].
    """
    U, V = layer_subspaces(Js, k=k, residual=residual, method=method, seed=seed)
    overlap = pairwise_overlap(U, V)  # [i, j] = overlap(U_i, V_j)
    mean, sd = random_overlap_baseline(U.shape[1], k, draws=draws, seed=seed)
    return {
        "self": np.diagonal(overlap).copy(),
        "forward": np.diagonal(overlap, offset=1).copy(),
        "baseline_mean": mean,
        "baseline_sd": sd,
    }


# --------------------------------------------------------------------------- depth profile


def spectral_profile(Js, *, k=10, tol=1e-6, method="arpack", seed=0, draws=1000, rank=None, progress=None):
    """Per-layer table of the mean-Jacobian statistics, for J and J - I.

    Parameters
    ----------
    Js : (L, d, d) array_like or torch.Tensor, or list of (d, d)
        Per-layer mean Jacobians (real).
    k, tol, method, seed, draws
        See :func:`eigen_stats` and :func:`alignment_profile`.
    rank : int, optional
        Truncation rank of the cumulative Jacobians (:func:`cumulative_effective_rank`).
    progress : callable, optional
        Wraps each pass over the layers' eigendecompositions, called with the layers and a label
        (``"J"``, ``"J - I"``): e.g. a tqdm bar (at d = 4096 each is seconds to minutes).

    Returns
    -------
    table : pandas.DataFrame
        Index ``layer`` 0..L-1. Columns ``spectral_radius``, ``frac_expanding``,
        ``frac_complex``, ``henrici``, ``self_alignment``, ``forward_alignment`` (NaN for the last
        layer), each also with suffix ``_res`` for J - I; ``residual_norm_ratio``;
        ``cumulative_effective_rank`` and ``cumulative_log_frobenius`` of ``J_{l->L}`` from each
        start layer l. The alignment baselines are in ``table.attrs`` (``baseline_mean``,
        ``baseline_sd``).
    eigenvalues : (L, d) complex ndarray
        Eigenvalues of each J (those of J - I are these minus 1).
    """
    import pandas as pd

    Js = check_stack("Js", Js)
    rows = {}
    for suffix, residual in (("", False), ("_res", True)):
        layers = progress(Js, "J - I" if residual else "J") if progress else Js
        eig = [eigen_stats(J, residual=residual, tol=tol) for J in layers]
        if not residual:
            eigenvalues = np.stack([e["eigenvalues"] for e in eig])
        rows["spectral_radius" + suffix] = [e["spectral_radius"] for e in eig]
        rows["frac_expanding" + suffix] = [e["frac_expanding"] for e in eig]
        rows["frac_complex" + suffix] = [e["frac_complex"] for e in eig]
        rows["henrici" + suffix] = [
            henrici_departure(J, residual=residual, eigenvalues=e["eigenvalues"]) for J, e in zip(Js, eig)
        ]
        align = alignment_profile(Js, k=k, residual=residual, method=method, seed=seed, draws=draws)
        rows["self_alignment" + suffix] = align["self"]
        rows["forward_alignment" + suffix] = np.append(align["forward"], np.nan)
    rows["residual_norm_ratio"] = [residual_norm_ratio(J) for J in Js]
    rows["cumulative_effective_rank"], rows["cumulative_log_frobenius"] = cumulative_effective_rank(Js, rank=rank)
    table = pd.DataFrame(rows, index=pd.RangeIndex(Js.shape[0], name="layer"))
    table.attrs["baseline_mean"] = align["baseline_mean"]
    table.attrs["baseline_sd"] = align["baseline_sd"]
    return table, eigenvalues
