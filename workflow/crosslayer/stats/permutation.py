"""Permutation tests: a two-sample label-permutation test (difference of means or Cohen's d) with all
permutations drawn and evaluated as batched array operations, chunked to a memory budget; the same
test as a per-permutation loop (same random stream, same p-value; the benchmark reference); Cohen's
d; Benjamini-Hochberg FDR; Spearman's rho with a batched permutation p-value.

NumPy arrays and torch tensors are accepted; everything is computed in float64 and scalars come back
as Python floats.

Permutation p-values are ``(count + 1) / (n_permutations + 1)``, with ``count`` the permuted
statistics at least as extreme as the observed one: the observed labelling counts as one of
the equally likely ones, so p is never 0 and the test is exact (valid at every level) under
exchangeability. Permuted statistics within a relative ``TIE_RTOL`` of the observed one count
as ties, i.e. as at least as extreme: a value equal to the observed one in exact arithmetic
can differ from it by rounding (it is computed by another summation order), and a test must
not depend on that.
"""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.stats

from crosslayer.errors import DegenerateInputWarning
from crosslayer.linalg.arrays import to_numpy
from crosslayer.settings import is_int

__all__ = [
    "ALTERNATIVES", "PERMUTATION_CHUNK_BYTES", "STATISTICS", "TIE_RTOL", "PermutationResult", "cohens_d",
    "permutation_test", "permutation_test_loop", "bh_fdr", "spearman_permutation", "spearman_permutation_loop",
]

STATISTICS = ("mean_diff", "cohens_d")

ALTERNATIVES = ("two-sided", "greater", "less")

TIE_RTOL = 1e-9  # far above rounding of the statistics, far below any real gap between values

PERMUTATION_CHUNK_BYTES = 4 * 2**20  # small chunks stay in cache


@dataclass(frozen=True)
class PermutationResult:
    """Result of a two-sample permutation test.

    Attributes
    ----------
    statistic : float
        Observed statistic (``mean(x) - mean(y)`` or Cohen's d of x vs y); NaN if undefined.
    p_value : float
        ``(count + 1) / (n_permutations + 1)``, in ``[1 / (n_permutations + 1), 1]``; NaN if
        the statistic is undefined.
    n_permutations : int
    alternative : str
    null : (n_permutations,) ndarray
        The permuted statistics, in the order they were drawn.
    """

    statistic: float
    p_value: float
    n_permutations: int
    alternative: str
    null: np.ndarray = field(repr=False)


# --------------------------------------------------------------------------- validation


def check_vector(name, x, *, allow_nan=False, min_size=1):
    """1-D float64 array; NaN only if allowed, inf never."""
    x = to_numpy(x)
    if x.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got shape {x.shape}")
    if x.dtype == bool or not (np.issubdtype(x.dtype, np.number) and not np.iscomplexobj(x)):
        raise ValueError(f"`{name}` must hold real numbers, got dtype {x.dtype}")
    x = x.astype(np.float64, copy=False)
    bad = np.isinf(x) if allow_nan else ~np.isfinite(x)
    if bad.any():
        what = "infinite" if allow_nan else "non-finite"
        raise ValueError(f"`{name}` has {int(bad.sum())} {what} values (first at index {int(np.flatnonzero(bad)[0])})")
    if x.size < min_size:
        raise ValueError(f"`{name}` needs at least {min_size} values, got {x.size}")
    return x


def check_real_square(name, J):
    """(d, d) float64 matrix with finite entries."""
    J = to_numpy(J)
    if J.ndim != 2 or J.shape[0] != J.shape[1] or J.shape[0] == 0:
        raise ValueError(f"`{name}` must be a square 2-D (d, d) matrix, got shape {J.shape}")
    if np.iscomplexobj(J):
        raise ValueError(f"`{name}` must be real, got dtype {J.dtype}")
    J = J.astype(np.float64, copy=False)
    if not np.isfinite(J).all():
        raise ValueError(f"`{name}` has {int((~np.isfinite(J)).sum())} non-finite entries")
    return J


def check_count(name, n, minimum=1):
    if not is_int(n) or n < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {n!r}")
    return int(n)


def seeded_rng(seed):
    if seed is None:  # would draw fresh OS entropy: results would not be reproducible
        raise ValueError("`seed` must be an int (or anything numpy.random.default_rng accepts but None)")
    return np.random.default_rng(seed)


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")
    return value


def rows_per_chunk(chunk_bytes, row_bytes, what):
    """How many rows of ``row_bytes`` fit in ``chunk_bytes`` (at least one, else ValueError)."""
    chunk_bytes = check_count("chunk_bytes", chunk_bytes)
    if chunk_bytes < row_bytes:
        raise ValueError(f"`chunk_bytes`={chunk_bytes} is below the {row_bytes} bytes of one {what};"
                         f" pass at least {row_bytes}")
    return chunk_bytes // row_bytes


def membership_labels(membership, d=None):
    """Community labels as (inverse (d,) in 0..C-1, sizes (C,)), labels sorted ascending."""
    m = to_numpy(membership)
    if m.ndim != 1 or m.size == 0:
        raise ValueError(f"`membership` must be a non-empty 1-D array of community labels, got shape {m.shape}")
    if m.dtype == bool or not np.issubdtype(m.dtype, np.number) or np.iscomplexobj(m):
        raise ValueError(f"`membership` must hold integer community labels, got dtype {m.dtype}")
    if not np.issubdtype(m.dtype, np.integer):
        if not np.isfinite(m).all() or (m != np.round(m)).any():
            raise ValueError("`membership` must hold integer community labels, got non-integer values")
        m = m.astype(np.int64)
    if (m < 0).any():
        raise ValueError(f"`membership` labels must be >= 0, got {int(m.min())} (unit {int(np.argmin(m))})")
    if d is not None and m.size != d:
        raise ValueError(f"`membership` has {m.size} entries but `J` is {d} x {d}")
    _, inverse, sizes = np.unique(m, return_inverse=True, return_counts=True)
    return inverse.ravel(), sizes


# --------------------------------------------------------------------------- two-sample tests


def _cohens_d_raw(x, y):
    """Cohen's d with pooled sd; +-inf (NaN if the means are equal too) when both groups are
    constant. No warnings: the permutation loop calls it for every permutation."""
    diff = x.mean() - y.mean()
    if x.max() == x.min() and y.max() == y.min():  # exact test: rounding never fakes a spread
        return math.copysign(math.inf, diff) if diff != 0 else math.nan
    n_x, n_y = x.size, y.size
    pooled = math.sqrt(((n_x - 1) * x.var(ddof=1) + (n_y - 1) * y.var(ddof=1)) / (n_x + n_y - 2))
    return diff / pooled


def _raw_statistic(statistic, x, y):
    return x.mean() - y.mean() if statistic == "mean_diff" else _cohens_d_raw(x, y)


def cohens_d(x, y):
    """Cohen's d of x vs y with the pooled standard deviation.

    Parameters
    ----------
    x, y : (n_x,), (n_y,) array_like
        Finite samples, at least 2 values each.

    Returns
    -------
    d : float
        ``(mean(x) - mean(y)) / s_p`` with
        ``s_p = sqrt(((n_x - 1) s_x^2 + (n_y - 1) s_y^2) / (n_x + n_y - 2))`` and ``s^2`` the
        unbiased sample variances. NaN (with a :class:`DegenerateInputWarning`) when ``s_p = 0``,
        i.e. both groups are constant: the effect size is undefined there, never inf.
    """
    x = check_vector("x", x, min_size=2)
    y = check_vector("y", y, min_size=2)
    d = _cohens_d_raw(x, y)
    if not math.isfinite(d):
        warnings.warn("Cohen's d is undefined: both groups are constant (pooled sd 0); returning NaN",
                      DegenerateInputWarning, stacklevel=2)
        return math.nan
    return float(d)


def _prepare_two_sample(x, y, statistic, n_permutations, alternative):
    _check_choice("statistic", statistic, STATISTICS)
    _check_choice("alternative", alternative, ALTERNATIVES)
    n_permutations = check_count("n_permutations", n_permutations)
    min_size = 2 if statistic == "cohens_d" else 1
    x = check_vector("x", x, min_size=min_size)
    y = check_vector("y", y, min_size=min_size)
    z = np.concatenate([x, y])
    # both statistics are shift-invariant; centring keeps the sums well-conditioned. A constant
    # pooled sample is centred exactly (its float mean need not equal the value), so every
    # permuted difference of means is exactly 0 and p = 1
    zc = z - z.mean() if z.max() > z.min() else np.zeros_like(z)
    total_sq = float(zc @ zc)
    # the scale of the statistic, for the tie tolerance: Cohen's d is unitless, a difference of
    # means has the units of the data
    scale = 1.0 if statistic == "cohens_d" else (math.sqrt(total_sq / z.size) or 1.0)
    return x, y, zc, total_sq, scale, n_permutations


def _observed(statistic, x, y):
    """The reported statistic (Cohen's d through :func:`cohens_d`, so its warning and NaN)."""
    if statistic == "mean_diff":
        return float(x.mean() - y.mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateInputWarning)
        d = cohens_d(x, y)
    if math.isnan(d):
        warnings.warn("Cohen's d is undefined: both groups are constant (pooled sd 0); statistic and p-value"
                      " are NaN", DegenerateInputWarning, stacklevel=3)
    return d


def _count_extreme(null, observed, alternative, scale):
    """Number of permuted statistics at least as extreme as the observed one (ties included)."""
    tol = TIE_RTOL * max(abs(observed), scale)
    if alternative == "two-sided":
        hits = np.abs(null) >= abs(observed) - tol
    elif alternative == "greater":
        hits = null >= observed - tol
    else:
        hits = null <= observed + tol
    return int(np.count_nonzero(hits))


def _p_value(count, n_permutations):
    return (count + 1) / (n_permutations + 1)


def _from_group_sums(statistic, sum_x, n_x, n_y, total, total_sq):
    """The statistic from the sum of group x alone: with the pooled sum and sum of squares
    fixed under relabelling, sum_x determines both means and the within-group sum of squares."""
    sum_y = total - sum_x
    diff = sum_x / n_x - sum_y / n_y
    if statistic == "mean_diff":
        return diff
    within = np.maximum(total_sq - sum_x**2 / n_x - sum_y**2 / n_y, 0.0)  # >= 0 up to rounding
    with np.errstate(divide="ignore", invalid="ignore"):  # constant groups: +-inf, as the loop
        return diff / np.sqrt(within / (n_x + n_y - 2))


def permutation_test(x, y, statistic="mean_diff", *, n_permutations=5000, seed=0, alternative="two-sided",
                     chunk_bytes=PERMUTATION_CHUNK_BYTES):
    """Two-sample label-permutation test, all permutations as batched array operations.

    Permutation r draws ``n_x + n_y`` i.i.d. uniform keys (``rng.random``, one row of a
    ``(rows, n)`` matrix) and assigns to group x the ``n_x`` pooled values with the smallest
    keys (``np.argpartition``), i.e. a uniformly random relabelling that keeps the group sizes.
    With the pooled sum and sum of squares fixed, the statistic depends only on the sum of
    group x, so each permutation costs one gather-and-sum. Rows are drawn in chunks of at most
    ``chunk_bytes`` of working memory; the random stream is consumed row by row, so results do
    not depend on the chunk size. :func:`permutation_test_loop` draws the same keys one
    permutation at a time and gives the same p-value.

    Parameters
    ----------
    x, y : (n_x,), (n_y,) array_like
        Finite samples; at least 1 value each (2 for Cohen's d).
    statistic : {"mean_diff", "cohens_d"}, default="mean_diff"
        ``mean(x) - mean(y)``, or Cohen's d of x vs y (:func:`cohens_d`).
    n_permutations : int, default=5000
    seed : int, default=0
        Seeds ``numpy.random.default_rng``.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        Extreme means ``|t_perm| >= |t_obs|``, ``t_perm >= t_obs`` or ``t_perm <= t_obs``
        (each up to the tie tolerance ``TIE_RTOL * max(|t_obs|, scale)``, scale 1 for Cohen's d
        and the root-mean-square of the centred pooled sample for a difference of means).
        "greater": the alternative that x tends to exceed y.
    chunk_bytes : int, default=4 MiB
        Working-memory budget of one chunk of permutations: float64 keys and int64 indices of
        ``n_x + n_y`` units plus ``n_x`` gathered values per permutation. Must hold one
        permutation.

    Returns
    -------
    result : PermutationResult
        ``statistic``, ``p_value`` = ``(count + 1) / (n_permutations + 1)``,
        ``n_permutations``, ``alternative``, ``null`` (the permuted statistics). For Cohen's d
        with both groups constant, statistic and p-value are NaN, with a
        :class:`DegenerateInputWarning`.
    """
    x, y, zc, total_sq, scale, P = _prepare_two_sample(x, y, statistic, n_permutations, alternative)
    n_x, n_y = x.size, y.size
    n = n_x + n_y
    rows = rows_per_chunk(chunk_bytes, 8 * (2 * n + n_x), "permutation")
    rng = seeded_rng(seed)
    total = float(zc.sum())
    null = np.empty(P)
    for start in range(0, P, rows):
        r = min(rows, P - start)
        keys = rng.random((r, n))
        chosen = np.argpartition(keys, n_x - 1, axis=1)[:, :n_x]
        null[start : start + r] = _from_group_sums(statistic, zc[chosen].sum(axis=1), n_x, n_y, total, total_sq)
    observed = _observed(statistic, x, y)
    if math.isnan(observed):
        return PermutationResult(math.nan, math.nan, P, alternative, null)
    # compared on the same footing as the null: from group sums
    internal = float(_from_group_sums(statistic, zc[:n_x].sum(), n_x, n_y, total, total_sq))
    p = _p_value(_count_extreme(null, internal, alternative, scale), P)
    return PermutationResult(observed, p, P, alternative, null)


def permutation_test_loop(x, y, statistic="mean_diff", *, n_permutations=5000, seed=0, alternative="two-sided"):
    """:func:`permutation_test` as a per-permutation Python loop (the benchmark reference).

    Each iteration draws ``n_x + n_y`` keys with ``rng.random`` (the same stream as the batched
    version), splits the pooled sample by ``np.argpartition`` of the keys and computes the
    statistic directly from the two groups. Permuted statistics agree with the batched ones to
    rounding, and the p-value is identical. Parameters and result as :func:`permutation_test`.
    """
    x, y, zc, _, scale, P = _prepare_two_sample(x, y, statistic, n_permutations, alternative)
    n_x, n = x.size, x.size + y.size
    rng = seeded_rng(seed)
    z = np.concatenate([x, y])
    null = np.empty(P)
    for i in range(P):
        keys = rng.random(n)
        in_x = np.zeros(n, dtype=bool)
        in_x[np.argpartition(keys, n_x - 1)[:n_x]] = True
        null[i] = _raw_statistic(statistic, z[in_x], z[~in_x])
    observed = _observed(statistic, x, y)
    if math.isnan(observed):
        return PermutationResult(math.nan, math.nan, P, alternative, null)
    p = _p_value(_count_extreme(null, observed, alternative, scale), P)
    return PermutationResult(observed, p, P, alternative, null)


# --------------------------------------------------------------------------- multiple testing


def bh_fdr(p_values, q=0.05):
    """Benjamini-Hochberg false discovery rate control.

    Parameters
    ----------
    p_values : array_like of float
        Any shape; values in [0, 1]. NaN marks a test that was not run (e.g. an undefined
        statistic): it is left out of the family, so it neither counts towards m nor is
        rejected.
    q : float, default=0.05
        Target FDR, in (0, 1).

    Returns
    -------
    reject : bool ndarray, same shape
        True where the null is rejected at FDR q (False at NaN).
    q_values : float ndarray, same shape
        BH-adjusted p-values (``statsmodels.stats.multitest.multipletests(method="fdr_bh")``)
        over the non-NaN p-values; NaN at NaN.
    """
    from statsmodels.stats.multitest import multipletests

    p = to_numpy(p_values)
    if p.dtype == bool or not np.issubdtype(p.dtype, np.number) or np.iscomplexobj(p):
        raise ValueError(f"`p_values` must hold real numbers, got dtype {p.dtype}")
    p = p.astype(np.float64)
    if np.isinf(p).any() or (p[~np.isnan(p)] < 0).any() or (p[~np.isnan(p)] > 1).any():
        raise ValueError("`p_values` must lie in [0, 1] (NaN for tests that were not run)")
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not 0 < q < 1:
        raise ValueError(f"`q` must be a number in (0, 1), got {q!r}")
    flat = p.ravel()
    valid = ~np.isnan(flat)
    reject = np.zeros(flat.shape, dtype=bool)
    q_values = np.full(flat.shape, np.nan)
    if valid.any():
        reject[valid], q_values[valid], _, _ = multipletests(flat[valid], alpha=q, method="fdr_bh")
    return reject.reshape(p.shape), q_values.reshape(p.shape)


# --------------------------------------------------------------------------- Spearman


def _spearman_inputs(x, y, n_permutations):
    """Finite pairs (NaN pairs dropped) and their standardized ranks, or None if undefined."""
    n_permutations = check_count("n_permutations", n_permutations)
    x = check_vector("x", x, allow_nan=True)
    y = check_vector("y", y, allow_nan=True)
    if x.size != y.size:
        raise ValueError(f"`x` and `y` must have the same length, got {x.size} and {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if x.size < 3:
        warnings.warn(f"Spearman's rho needs at least 3 pairs without NaN, got {x.size}; returning NaN",
                      DegenerateInputWarning, stacklevel=3)
        return x, y, None, None, n_permutations
    if x.max() == x.min() or y.max() == y.min():
        warnings.warn("Spearman's rho is undefined for a constant variable; returning NaN",
                      DegenerateInputWarning, stacklevel=3)
        return x, y, None, None, n_permutations

    def standardized_ranks(v):
        r = scipy.stats.rankdata(v)  # average ranks for ties, as spearmanr
        r -= r.mean()
        return r / np.linalg.norm(r)

    return x, y, standardized_ranks(x), standardized_ranks(y), n_permutations


def _spearman_result(rho, count, n, P):
    p = math.nan if count is None else _p_value(count, P)
    return {"rho": rho, "p_value": p, "n_pairs": int(n), "n_permutations": P}


def spearman_permutation(x, y, *, n_permutations=10000, seed=0, chunk_bytes=PERMUTATION_CHUNK_BYTES):
    """Spearman's rho with a two-sided permutation p-value, all permutations batched.

    Permutation r draws n i.i.d. uniform keys (``rng.random``, row r of a ``(rows, n)`` matrix)
    and pairs x with y reordered by ``argsort(keys)`` (stable). Rho is the dot product of
    standardized ranks, so the rhos of a chunk of permutations come from one matrix product of
    the permuted y-ranks with the x-ranks.

    Parameters
    ----------
    x, y : (n,) array_like
        Paired values; a pair with NaN in either is dropped.
    n_permutations : int, default=10000
    seed : int, default=0
    chunk_bytes : int, default=4 MiB
        Working-memory budget of one chunk (float64 keys, int64 order and float64 permuted ranks
        per permutation). Results do not depend on it.

    Returns
    -------
    result : dict
        ``"rho"``: ``scipy.stats.spearmanr`` of the kept pairs; ``"p_value"``:
        ``(count + 1) / (n_permutations + 1)`` with count the permutations with
        ``|rho_perm| >= |rho|`` (ties within ``TIE_RTOL`` included); ``"n_pairs"``: pairs kept;
        ``"n_permutations"``. With fewer than 3 pairs, or a constant variable, rho and p are
        NaN, with a :class:`DegenerateInputWarning`.
    """
    x, y, a, b, P = _spearman_inputs(x, y, n_permutations)
    if a is None:
        return _spearman_result(math.nan, None, x.size, P)
    n = x.size
    rows = rows_per_chunk(chunk_bytes, 24 * n, "permutation")
    rng = seeded_rng(seed)
    null = np.empty(P)
    for start in range(0, P, rows):
        r = min(rows, P - start)
        order = np.argsort(rng.random((r, n)), axis=1, kind="stable")
        null[start : start + r] = b[order] @ a
    rho = float(scipy.stats.spearmanr(x, y).statistic)
    return _spearman_result(rho, _count_extreme(null, float(a @ b), "two-sided", 1.0), n, P)


def spearman_permutation_loop(x, y, *, n_permutations=10000, seed=0):
    """:func:`spearman_permutation` as a per-permutation loop calling ``scipy.stats.spearmanr``
    (the benchmark reference): same keys, same reordering, same p-value."""
    x, y, a, _, P = _spearman_inputs(x, y, n_permutations)
    if a is None:
        return _spearman_result(math.nan, None, x.size, P)
    n = x.size
    rng = seeded_rng(seed)
    null = np.empty(P)
    for i in range(P):
        order = np.argsort(rng.random(n), kind="stable")
        null[i] = scipy.stats.spearmanr(x, y[order]).statistic
    rho = float(scipy.stats.spearmanr(x, y).statistic)
    return _spearman_result(rho, _count_extreme(null, rho, "two-sided", 1.0), n, P)
