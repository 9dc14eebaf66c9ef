"""The topology-dynamics tests of paper 004, per layer.

Inputs per layer are the mean block Jacobian ``J`` (d, d), a community membership (d,) of int
labels (a partition of the d residual units) and a participation coefficient per unit (d,), NaN for
isolated units.

* mesoscale operator (Test 2): community basis B, variance captured
  ``||B^T J B||_F^2 / ||J||_F^2`` and the top singular value of ``B^T J B``, against random
  partitions with the same community sizes (one-sided one-sample t-test);
* boundary-node test (Test 3): Cohen's d of Jacobian column norms between the top and
  bottom participation tails, two-sided permutation p-value;
* rate-level test (Test 1, Appendix D): Spearman's rho between adjacent-layer topology
  disruption ``1 - NMI`` and the swings of the mesoscale operator, permutation p-values.

Paper 004 calls the last two "boundary-node coupling" and "rate-level coupling"; here "coupling"
names paper 002's block coupling only (:mod:`crosslayer.coupling`). The tables these tests fill keep
the file name ``step{step}.coupling.tsv`` (docs/coverage.md). The permutation machinery:
:mod:`crosslayer.stats.permutation`.
"""

import math
import warnings

import numpy as np
import scipy.stats

from crosslayer.errors import DegenerateInputWarning
from crosslayer.stats.permutation import (
    PERMUTATION_CHUNK_BYTES,
    check_count,
    check_real_square,
    check_vector,
    membership_labels,
    permutation_test,
    rows_per_chunk,
    seeded_rng,
    spearman_permutation,
)

__all__ = [
    "NULL_CHUNK_BYTES", "community_basis", "mesoscale_operator", "variance_captured", "mesoscale_top_singular",
    "random_partition_null", "mesoscale_test", "jacobian_column_norms", "participation_tails", "boundary_node_test",
    "rate_level_test",
]

NULL_CHUNK_BYTES = 32 * 2**20  # random partitions: wide GEMMs run faster

CONSTANT_NULL_RTOL = 1e-9  # a random-partition null this flat is constant up to rounding


# --------------------------------------------------------------------------- mesoscale operator


def community_basis(membership):
    """Orthonormal community basis.

    Parameters
    ----------
    membership : (d,) array_like of int
        Community label of every unit, >= 0. Labels need not be contiguous; communities are
        the distinct labels in ascending order.

    Returns
    -------
    B : (d, C) float64 ndarray
        Column c is the indicator of community c over ``sqrt(|c|)``; ``B^T B = I_C``.
    """
    inverse, sizes = membership_labels(membership)
    B = np.zeros((inverse.size, sizes.size))
    B[np.arange(inverse.size), inverse] = 1.0 / np.sqrt(sizes[inverse])
    return B


def _projected(J, labels, sizes):
    """(k, C, C) operators ``B_k^T J B_k`` for k labellings (k, d) with community sizes (C,).

    The bases are stacked side by side so that ``J @ [B_1 ... B_k]`` is one GEMM (no d x d
    projector is formed); the row side is a batched (C, d) @ (d, C) product.
    """
    k, d = labels.shape
    C = sizes.size
    B = np.zeros((d, k, C))
    B[np.arange(d)[:, None], np.arange(k)[None, :], labels.T] = 1.0 / np.sqrt(sizes[labels.T])
    T = (J @ B.reshape(d, k * C)).reshape(d, k, C)
    return np.matmul(B.transpose(1, 2, 0), T.transpose(1, 0, 2))


def _frobenius_sq(J):
    norm_sq = float(np.einsum("ij,ij->", J, J))
    if norm_sq == 0:
        raise ValueError("`J` is zero: the variance it captures is undefined")
    return norm_sq


def mesoscale_operator(J, membership):
    """The coarse-grained operator ``B^T J B`` (C, C), B = :func:`community_basis`."""
    J = check_real_square("J", J)
    inverse, sizes = membership_labels(membership, J.shape[0])
    return _projected(J, inverse[None], sizes)[0]


def variance_captured(J, membership):
    """Fraction of the Jacobian's Frobenius mass captured by the community basis.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    membership : (d,) array_like of int

    Returns
    -------
    vc : float
        ``||B B^T J B B^T||_F^2 / ||J||_F^2 = ||B^T J B||_F^2 / ||J||_F^2`` in [0, 1]
        (B has orthonormal columns); 1 when J is constant on every (community, community)
        block. ValueError for J = 0.
    """
    J = check_real_square("J", J)
    inverse, sizes = membership_labels(membership, J.shape[0])
    M = _projected(J, inverse[None], sizes)[0]
    return float(np.einsum("ij,ij->", M, M)) / _frobenius_sq(J)


def mesoscale_top_singular(J, membership):
    """Largest singular value of the mesoscale operator ``B^T J B`` (float)."""
    return float(np.linalg.norm(mesoscale_operator(J, membership), 2))


def _random_null(J, inverse, sizes, n, rng, chunk_bytes):
    d, C = J.shape[0], sizes.size
    norm_sq = _frobenius_sq(J)
    # per draw: float64 keys and int64 order (d each), the stacked basis and J @ basis (d * C each)
    rows = rows_per_chunk(chunk_bytes, 16 * d + 16 * d * C, "random partition")
    null = np.empty(n)
    for start in range(0, n, rows):
        r = min(rows, n - start)
        order = np.argsort(rng.random((r, d)), axis=1, kind="stable")
        M = _projected(J, inverse[order], sizes)
        null[start : start + r] = np.einsum("kab,kab->k", M, M) / norm_sq
    return null


def random_partition_null(J, membership, *, n=100, seed=0, chunk_bytes=NULL_CHUNK_BYTES):
    """Variance captured by random partitions with the same community sizes.

    Draw k gives unit i the label of unit ``argsort(keys_k)[i]`` (keys_k: d uniform draws of
    ``rng.random``, stable argsort), a uniformly random relabelling that keeps every community
    size. Draws are evaluated in chunks (one GEMM each); the draws do not depend on the chunk
    size, the values only to rounding (BLAS blocking).

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    membership : (d,) array_like of int
    n : int, default=100
        Random partitions.
    seed : int, default=0
    chunk_bytes : int, default=32 MiB
        Working-memory budget per chunk of draws (about ``16 d (C + 1)`` bytes per draw, C the
        number of communities). Must hold one draw.

    Returns
    -------
    null : (n,) ndarray
        :func:`variance_captured` of each random partition.
    """
    J = check_real_square("J", J)
    inverse, sizes = membership_labels(membership, J.shape[0])
    return _random_null(J, inverse, sizes, check_count("n", n), seeded_rng(seed), chunk_bytes)


def mesoscale_test(J, membership, *, n_random=100, seed=0, chunk_bytes=NULL_CHUNK_BYTES):
    """Does the partition capture more of J than random partitions of the same sizes (Test 2)?

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor
    membership : (d,) array_like of int
    n_random : int, default=100
        Random same-size partitions (:func:`random_partition_null`); at least 2.
    seed : int, default=0
    chunk_bytes : int, default=32 MiB
        As :func:`random_partition_null`.

    Returns
    -------
    result : dict
        ``"observed"``: :func:`variance_captured`; ``"null_mean"``, ``"null_sd"`` (ddof 1) of
        the random partitions; ``"excess"`` = observed - null mean; ``"t"``, ``"p_value"``:
        ``scipy.stats.ttest_1samp(null, observed, alternative="less")``, i.e. H1: the mean
        variance captured by random partitions is below the observed one; ``t < 0`` when the
        observed partition beats the null mean, and p is small when it does so consistently;
        ``"n_random"``; ``"n_communities"``.

        t and p are NaN, with a :class:`DegenerateInputWarning`, when every random partition is
        the observed one (a single community, or all singletons) or when the null is constant
        to ``CONSTANT_NULL_RTOL`` (e.g. J a multiple of I): the null has no spread and the test
        is undefined.
    """
    J = check_real_square("J", J)
    d = J.shape[0]
    inverse, sizes = membership_labels(membership, d)
    n_random = check_count("n_random", n_random, minimum=2)
    norm_sq = _frobenius_sq(J)
    M = _projected(J, inverse[None], sizes)[0]
    observed = float(np.einsum("ij,ij->", M, M)) / norm_sq
    null = _random_null(J, inverse, sizes, n_random, seeded_rng(seed), chunk_bytes)
    C = sizes.size
    null_mean = float(null.mean())
    if C in (1, d):
        why = "a single community" if C == 1 else "all communities singletons"
        reason = f"the partition has {why}: every random same-size partition is the same partition"
    elif np.ptp(null) <= CONSTANT_NULL_RTOL * np.abs(null).max():
        reason = "the random-partition null is constant (e.g. J is a multiple of I)"
    else:
        reason = None
    if reason is None:
        t, p = scipy.stats.ttest_1samp(null, observed, alternative="less")
        t, p = float(t), float(p)
    else:
        warnings.warn(f"{reason}; the t-test is undefined, t and p are NaN", DegenerateInputWarning, stacklevel=2)
        t = p = math.nan
    return {
        "observed": observed,
        "null_mean": null_mean,
        "null_sd": float(null.std(ddof=1)),
        "excess": observed - null_mean,
        "t": t,
        "p_value": p,
        "n_random": n_random,
        "n_communities": int(C),
    }


# --------------------------------------------------------------------------- boundary-node test


def jacobian_column_norms(J):
    """Euclidean norm of every column ``||J[:, i]||_2``: how strongly unit i is amplified.

    Parameters
    ----------
    J : (d, d) array_like or torch.Tensor

    Returns
    -------
    norms : (d,) float64 ndarray
    """
    J = check_real_square("J", J)
    return np.sqrt(np.einsum("ij,ij->j", J, J))


def participation_tails(participation, *, tail=0.10):
    """The bottom (core) and top (boundary) participation tails of Test 3.

    Units with a participation coefficient (NaN = isolated unit: left out) are ordered by
    ascending participation with a stable sort; the bottom tail is the first
    ``k = floor(tail * n_valid)`` of that order and the top tail the last k (ties at a cutoff
    broken by unit index; the tails never overlap).

    Parameters
    ----------
    participation : (d,) array_like
        Participation coefficient per unit; NaN for isolated units.
    tail : float, default=0.10
        Fraction in (0, 0.5].

    Returns
    -------
    bottom, top : (k,) int64 ndarray
        Unit indices of each tail, ascending (unit order).

    Raises
    ------
    ValueError
        When a tail would hold fewer than 2 units.
    """
    part = check_vector("participation", participation, allow_nan=True)
    if isinstance(tail, bool) or not isinstance(tail, (int, float, np.floating)) or not 0 < tail <= 0.5:
        raise ValueError(f"`tail` must be a fraction in (0, 0.5], got {tail!r}")
    valid = np.flatnonzero(~np.isnan(part))
    n_valid = valid.size
    k = math.floor(tail * n_valid + 1e-9)  # 0.1 * 30 must give 3 despite rounding
    if k < 2:
        raise ValueError(
            f"each participation tail needs at least 2 units, but tail={tail} of the {n_valid} units with a"
            f" participation coefficient gives {k}; use a larger `tail` (at least {2 / max(n_valid, 1):.3g})"
            " or more units with a participation coefficient")
    order = valid[np.argsort(part[valid], kind="stable")]
    # each tail in unit order: the permutation stream then does not depend on how ties in
    # participation were ordered inside a tail
    return np.sort(order[:k]), np.sort(order[n_valid - k:])


def boundary_node_test(column_norms, participation, *, tail=0.10, n_permutations=5000, seed=0,
                      chunk_bytes=PERMUTATION_CHUNK_BYTES):
    """Are boundary units (high participation) amplified more than core units (Test 3)?

    Units with a participation coefficient (NaN = isolated unit: left out) are ordered by
    ascending participation with a stable sort; the bottom tail is the first
    ``k = floor(tail * n_valid)`` of that order and the top tail the last k. Ties at a cutoff
    are thus broken by unit index (lower index into the bottom tail, higher index into the top
    tail), deterministically, and the tails never overlap.

    Parameters
    ----------
    column_norms : (d,) array_like
        :func:`jacobian_column_norms` of the layer's J (finite where participation is defined).
    participation : (d,) array_like
        Participation coefficient per unit; NaN for isolated units.
    tail : float, default=0.10
        Fraction of the units with a participation coefficient in each tail, in (0, 0.5].
    n_permutations : int, default=5000
    seed : int, default=0
    chunk_bytes : int, default=4 MiB
        As :func:`permutation_test`.

    Returns
    -------
    result : dict
        ``"cohens_d"``: Cohen's d of the column norms, top tail minus bottom tail (> 0: boundary
        units amplified more); ``"p_value"``: two-sided permutation p-value on Cohen's d
        (:func:`permutation_test` of the top-tail vs the bottom-tail norms, each tail in unit
        order); ``"n_top"``, ``"n_bottom"`` (= k); ``"n_valid"``: units with
        a participation coefficient; ``"n_permutations"``. Cohen's d and p are NaN (with a
        :class:`DegenerateInputWarning`) when both tails have constant column norms.

    Raises
    ------
    ValueError
        When a tail would hold fewer than 2 units.
    """
    norms = check_vector("column_norms", column_norms, allow_nan=True)
    part = check_vector("participation", participation, allow_nan=True)
    if norms.size != part.size:
        raise ValueError(f"`column_norms` and `participation` must have the same length, got {norms.size}"
                         f" and {part.size}")
    if isinstance(tail, bool) or not isinstance(tail, (int, float, np.floating)) or not 0 < tail <= 0.5:
        raise ValueError(f"`tail` must be a fraction in (0, 0.5], got {tail!r}")
    if np.isnan(norms[~np.isnan(part)]).any():
        raise ValueError("`column_norms` is NaN for units that have a participation coefficient")
    bottom, top = participation_tails(part, tail=tail)
    k, n_valid = bottom.size, int((~np.isnan(part)).sum())
    result = permutation_test(norms[top], norms[bottom], "cohens_d", n_permutations=n_permutations, seed=seed,
                              alternative="two-sided", chunk_bytes=chunk_bytes)
    return {
        "cohens_d": result.statistic,
        "p_value": result.p_value,
        "n_top": int(k),
        "n_bottom": int(k),
        "n_valid": int(n_valid),
        "n_permutations": result.n_permutations,
    }


# --------------------------------------------------------------------------- rate-level test


def rate_level_test(nmi_adjacent, top_singular, variance, *, n_permutations=10000, seed=0):
    """Do layers where the partition reorganizes show larger swings of the mesoscale operator?

    Parameters
    ----------
    nmi_adjacent : (L - 1,) array_like
        NMI between the partitions of layers l and l + 1, in [0, 1] (NaN: pair left out).
    top_singular : (L,) array_like
        :func:`mesoscale_top_singular` per layer.
    variance : (L,) array_like
        :func:`variance_captured` per layer.
    n_permutations : int, default=10000
    seed : int, default=0
        Seeds both tests (the same permutations for both: each p-value is valid on its own,
        and the two are not combined).

    Returns
    -------
    result : dict
        ``"disruption"``: (L - 1,) ``1 - NMI``; ``"delta_top_singular"``,
        ``"delta_variance"``: (L - 1,) absolute changes ``|s_{l+1} - s_l|``, ``|v_{l+1} - v_l|``
        (the paper asks whether reorganization goes with large swings, in either direction);
        ``"top_singular"``, ``"variance"``: :func:`spearman_permutation` of disruption vs each
        (keys rho, p_value, n_pairs, n_permutations).
    """
    nmi = check_vector("nmi_adjacent", nmi_adjacent, allow_nan=True)
    top = check_vector("top_singular", top_singular, allow_nan=True, min_size=2)
    var = check_vector("variance", variance, allow_nan=True, min_size=2)
    if top.size != var.size:
        raise ValueError(f"`top_singular` and `variance` must both have one value per layer, got {top.size}"
                         f" and {var.size}")
    if nmi.size != top.size - 1:
        raise ValueError(f"`nmi_adjacent` must have L - 1 = {top.size - 1} values (one per adjacent pair of"
                         f" layers), got {nmi.size}")
    finite = nmi[~np.isnan(nmi)]
    if ((finite < -1e-9) | (finite > 1 + 1e-9)).any():
        raise ValueError("`nmi_adjacent` must lie in [0, 1]")
    disruption = 1.0 - nmi
    d_top, d_var = np.abs(np.diff(top)), np.abs(np.diff(var))
    return {
        "disruption": disruption,
        "delta_top_singular": d_top,
        "delta_variance": d_var,
        "top_singular": spearman_permutation(disruption, d_top, n_permutations=n_permutations, seed=seed),
        "variance": spearman_permutation(disruption, d_var, n_permutations=n_permutations, seed=seed),
    }
