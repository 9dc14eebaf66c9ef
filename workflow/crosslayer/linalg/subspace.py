"""Subspaces and how much two of them overlap.

Functions named ``*_overlap`` return the mean cosine of the principal angles between
k-dimensional subspaces, a float (or array of floats) in [0, 1].
"""

import functools

import numpy as np
from scipy.sparse.linalg import svds

__all__ = [
    "SVD_METHODS",
    "subspace_overlap",
    "pairwise_overlap",
    "top_singular_subspaces",
    "random_overlap_baseline",
]

SVD_METHODS = ("arpack", "full")


def _check_bases(name, bases, ndim):
    bases = np.asarray(bases, dtype=float)
    if bases.ndim != ndim:
        shape = "(d, k)" if ndim == 2 else "(n, d, k)"
        raise ValueError(f"`{name}` must be {ndim}-D {shape}, got shape {bases.shape}")
    if bases.shape[-1] > bases.shape[-2]:
        raise ValueError(f"`{name}` has more columns (k={bases.shape[-1]}) than rows (d={bases.shape[-2]})")
    return bases


def subspace_overlap(A, B):
    """Mean cosine of the principal angles between span(A) and span(B).

    Parameters
    ----------
    A, B : (d, k) array_like
        Orthonormal bases (columns) of two k-dimensional subspaces of R^d.

    Returns
    -------
    overlap : float
        Mean singular value of ``A.T @ B``, clipped to [0, 1]. 1 means equal subspaces,
        0 orthogonal ones.

    Notes
    -----
    The singular values of ``A^T B`` are the cosines of the principal angles, so this equals
    ``mean(cos(scipy.linalg.subspace_angles(A, B)))``.

    Examples
    --------
    >>> import numpy as np
    >>> e = np.eye(4)
    >>> subspace_overlap(e[:, :2], e[:, 1:3])
    0.5
    """
    A, B = _check_bases("A", A, 2), _check_bases("B", B, 2)
    if A.shape != B.shape:
        raise ValueError(f"`A` and `B` must have the same shape, got {A.shape} and {B.shape}")
    return float(np.clip(np.linalg.svd(A.T @ B, compute_uv=False), 0.0, 1.0).mean())


def pairwise_overlap(bases_a, bases_b=None):
    """Overlap between every pair of subspaces in two stacks.

    Parameters
    ----------
    bases_a : (n, d, k) array_like
        n orthonormal bases, e.g. one per layer.
    bases_b : (m, d, k) array_like, optional
        A second stack; defaults to ``bases_a``.

    Returns
    -------
    overlap : (n, m) ndarray
        ``overlap[i, j] = subspace_overlap(bases_a[i], bases_b[j])``, in [0, 1].
    """
    bases_a = _check_bases("bases_a", bases_a, 3)
    bases_b = bases_a if bases_b is None else _check_bases("bases_b", bases_b, 3)
    if bases_a.shape[1:] != bases_b.shape[1:]:
        raise ValueError(f"bases must share (d, k), got {bases_a.shape[1:]} and {bases_b.shape[1:]}")
    cross = np.einsum("idk,jdl->ijkl", bases_a, bases_b)  # (n, m, k, k): A_i^T B_j
    return np.clip(np.linalg.svd(cross, compute_uv=False), 0.0, 1.0).mean(axis=-1)


def top_singular_subspaces(M, k, *, method="arpack", seed=0):
    """Top-k left and right singular vectors of a matrix, in float64.

    Parameters
    ----------
    M : (m, n) array_like
    k : int
        Number of singular vectors, ``1 <= k < min(m, n)``.
    method : {"arpack", "full"}, default="arpack"
        ``"arpack"``: implicitly restarted Lanczos (``scipy.sparse.linalg.svds``) converged to
        machine precision (``tol=0``) from a seeded start vector. It needs only products with
        ``M`` and is exact to rounding, unlike randomized top-k SVD, which misses the top
        subspace on flat spectra. ``"full"``: the complete SVD (LAPACK ``gesdd``).
    seed : int, default=0
        Seeds ARPACK's start vector so results are reproducible.

    Returns
    -------
    U : (m, k) ndarray
        Left singular vectors (output space), columns ordered by decreasing singular value.
    s : (k + 1,) ndarray
        The top k + 1 singular values, decreasing; the extra one gives the gap after the k-th.
    V : (n, k) ndarray
        Right singular vectors (input space).
    """
    if method not in SVD_METHODS:
        raise ValueError(f"`method` must be one of {SVD_METHODS}, got {method!r}")
    A = np.asarray(M, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"`M` must be 2-D, got shape {A.shape}")
    m, n = A.shape
    if not 1 <= k < min(m, n):
        raise ValueError(f"`k` must satisfy 1 <= k < min(M.shape) = {min(m, n)}, got {k}")
    if method == "full":
        U, s, Vh = np.linalg.svd(A, full_matrices=False)
        return U[:, :k], s[: k + 1], Vh[:k].T
    # k + 1 triplets: the last gives the spectral gap; ARPACK needs k + 1 < min(m, n).
    n_vec = min(k + 1, min(m, n) - 1)
    v0 = np.random.default_rng(seed).standard_normal(min(m, n))
    U, s, Vh = svds(A, k=n_vec, tol=0, v0=v0, solver="arpack")
    order = np.argsort(s)[::-1]
    U, s, V = U[:, order], s[order], Vh[order].T
    if n_vec == k:  # k = min(m, n) - 1: the gap needs the smallest singular value too
        s = np.append(s, np.linalg.svd(A, compute_uv=False)[-1])
    return U[:, :k], s, V[:, :k]


@functools.lru_cache(maxsize=16)  # a spectra job asks twice (J and J - I) for the same numbers
def random_overlap_baseline(d, k, *, draws=1000, seed=0):
    """Overlap expected between two independent Haar-random k-dim subspaces of R^d.

    Parameters
    ----------
    d : int
        Ambient dimension.
    k : int
        Subspace dimension, ``1 <= k <= d``.
    draws : int, default=1000
        Monte-Carlo pairs.
    seed : int, default=0
        Seed of the draws (same seed -> same numbers).

    Returns
    -------
    mean, sd : float
        Mean and standard deviation of ``subspace_overlap`` over the draws.

    Notes
    -----
    For k = 1 the exact mean is ``Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) ~ sqrt(2 / (pi d))``.
    For large d it behaves like the mean singular value of a k x k Gaussian matrix over sqrt(d):
    about 0.117 at d = 512, 0.083 at d = 1024 and 0.058 at d = 2048 for k = 10.
    """
    if not 1 <= k <= d:
        raise ValueError(f"need 1 <= k <= d, got k={k}, d={d}")
    if draws < 2:
        raise ValueError(f"`draws` must be >= 2, got {draws}")
    rng = np.random.default_rng(seed)
    values = np.empty(draws)
    for start in range(0, draws, 64):  # chunks keep memory at 128 * d * k floats
        n = min(64, draws - start)
        Q, _ = np.linalg.qr(rng.standard_normal((2 * n, d, k)))  # Haar bases via QR of Gaussians
        values[start : start + n] = _paired_overlap(Q[:n], Q[n:])
    return float(values.mean()), float(values.std(ddof=1))


def _paired_overlap(bases_a, bases_b):
    """Overlap of bases_a[i] with bases_b[i] for each i: (n,) array."""
    cross = np.einsum("idk,idl->ikl", bases_a, bases_b)
    return np.clip(np.linalg.svd(cross, compute_uv=False), 0.0, 1.0).mean(axis=-1)
