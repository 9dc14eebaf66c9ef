"""The intervals every verdict kind shares, one place that knows how a table's units are resampled.

Units are what the catalogue names as independent (prompts, unordered layer pairs, seeds, models):
a claim whose rows are finer (token pairs within a prompt, both orders of a layer pair) averages them
within each unit first (the catalogue's ``unit.within``), so that the bootstrap resamples whole units,
the cluster bootstrap of the mean of unit means. Means and differences of means take a seeded
percentile bootstrap read at Hesterberg's expanded level (:func:`expanded_level`); a fraction of
0/1 units takes the exact Clopper-Pearson interval (:func:`proportion_interval`), since a bootstrap of
six zeros is [0, 0], a certainty six units cannot give; a correlation takes the same percentile
bootstrap over units, with a permutation test for few perfectly ordered units
(:func:`permutation_p`).
"""

import itertools
import math

import numpy as np
from scipy import stats

__all__ = ["expanded_level", "mean_interval", "difference_interval", "proportion_interval", "unseen_rate",
           "difference_of_means_interval", "ratio_interval",
           "correlation_change_interval",
           "correlation", "correlation_interval", "permutation_p", "change_permutation_p"]


def expanded_level(confidence, n):
    """The level at which to read a percentile bootstrap interval of ``n`` units for ``confidence``.

    Parameters
    ----------
    confidence : float
        Nominal coverage, in (0, 1).
    n : int
        Units (>= 2).

    Returns
    -------
    level : float
        ``1 - 2 Phi(-sqrt(n / (n - 1)) t_{n-1})`` with ``t_{n-1}`` the ``(1 + confidence) / 2``
        quantile of Student's t with n - 1 degrees of freedom: in [confidence, 1), tending to
        ``confidence`` as n grows.

    Notes
    -----
    The percentile interval of a mean is about ``mean +- z sd_n / sqrt(n)`` (``sd_n`` with divisor
    n); reading it at this level widens it to ``mean +- t sd / sqrt(n)``, the t interval.

    References
    ----------
    T. C. Hesterberg, "What teachers should know about the bootstrap", The American Statistician
    69(4), 2015 (the expanded percentile interval).

    Examples
    --------
    >>> round(expanded_level(0.95, 5), 4), round(expanded_level(0.95, 10_000), 4)
    (0.9981, 0.95)
    """
    if not 0 < confidence < 1 or n < 2:
        raise ValueError(f"need 0 < confidence < 1 and n >= 2, got {confidence} and {n}")
    t = stats.t.ppf(0.5 + confidence / 2, n - 1)
    return float(1 - 2 * stats.norm.cdf(-math.sqrt(n / (n - 1)) * t))


def correlation(x, y, *, method="spearman"):
    """Row-wise correlation of paired samples (vectorised over leading axes).

    Parameters
    ----------
    x, y : (..., n) array_like
        Paired values; each row is one sample of n units.
    method : {"spearman", "pearson", "pearson_r2"}
        Spearman ranks each row first (average ranks for ties); ``pearson_r2`` is the square of
        Pearson's r, the R^2 of a linear fit (how strongly, whatever the sign).

    Returns
    -------
    r : (...) ndarray of float
        In [-1, 1] (R^2 in [0, 1]); NaN for a row in which x or y is constant.

    Examples
    --------
    >>> float(correlation([1, 2, 3, 4], [1, 4, 9, 16]))
    1.0
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim < 1:
        raise ValueError(f"`x` and `y` must have one shape with a last axis of units, got {x.shape} and {y.shape}")
    if method not in ("spearman", "pearson", "pearson_r2"):
        raise ValueError(f"`method` must be spearman, pearson or pearson_r2, got {method!r}")
    constant = (np.ptp(x, axis=-1) == 0) | (np.ptp(y, axis=-1) == 0)
    if method == "spearman":
        x, y = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    xc, yc = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(axis=-1) / np.sqrt((xc**2).sum(axis=-1) * (yc**2).sum(axis=-1))
    r = np.clip(r, -1.0, 1.0) ** (2 if method == "pearson_r2" else 1)
    return np.where(constant, np.nan, r)


def permutation_p(x, y, *, method="spearman", side=1, n_perm=2000, rng=None):
    """One-sided permutation p-value of ``correlation(x, y)`` (``side`` +1: at least as large, -1:
    at most as small) under no association: exact over every order of ``y`` up to 8 units, else
    ``n_perm`` random orders (``(1 + count) / (1 + n_perm)``).

    Examples
    --------
    >>> round(permutation_p([1, 2, 3, 4], [1, 2, 3, 4]), 4)  # 1 order in 4! = 24
    0.0417
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    observed = side * correlation(x, y, method=method)
    if len(y) <= 8:
        orders = np.array(list(itertools.permutations(range(len(y)))))
        null = side * correlation(np.broadcast_to(x, orders.shape), y[orders], method=method)
        return float(np.mean(null >= observed - 1e-12))
    rng = rng if rng is not None else np.random.default_rng(0)
    orders = rng.permuted(np.broadcast_to(y, (n_perm, len(y))), axis=1)
    null = side * correlation(np.broadcast_to(x, orders.shape), orders, method=method)
    return float((1 + np.sum(null >= observed - 1e-12)) / (1 + n_perm))


def change_permutation_p(before, after, *, method="spearman", side=1, n_perm=2000, rng=None):
    """One-sided permutation p-value of ``correlation(after) - correlation(before)`` (each an
    ``(x, y)`` pair of arrays over the same units) under no change: each unit's before and after
    swapped or not, exact over every swap pattern up to 12 units, else ``n_perm`` random ones.

    Examples
    --------
    >>> x = [1, 2, 3, 4]
    >>> round(change_permutation_p((x, [4, 3, 2, 1]), (x, [1, 2, 3, 4])), 4)  # 1 pattern in 2**4
    0.0625
    """
    xb, yb, xa, ya = (np.asarray(a, dtype=float) for a in (*before, *after))
    n = len(xb)
    if n <= 12:
        swaps = np.array(list(itertools.product((False, True), repeat=n)))
    else:
        rng = rng if rng is not None else np.random.default_rng(0)
        swaps = rng.random((n_perm, n)) < 0.5

    def side_of(own, other):  # a side's values, the other side's where a unit is swapped
        return np.where(swaps, other, own)

    null = side * (correlation(side_of(xa, xb), side_of(ya, yb), method=method)
                   - correlation(side_of(xb, xa), side_of(yb, ya), method=method))
    observed = side * (correlation(xa, ya, method=method) - correlation(xb, yb, method=method))
    count = np.sum(null >= observed - 1e-12)
    return float(count / len(swaps)) if n <= 12 else float((1 + count) / (1 + n_perm))


def mean_interval(values, confidence, n_boot, rng, *, fraction=False):
    """Percentile bootstrap interval of the mean of independent units, read at the expanded level;
    for a ``fraction`` (every unit 0 or 1: an indicator's), the exact Clopper-Pearson interval
    (:func:`proportion_interval`)."""
    values = np.asarray(values, dtype=float)
    if fraction:
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError("a fraction's units are 0 or 1")
        return proportion_interval(int(values.sum()), values.size, confidence)
    result = stats.bootstrap((values,), np.mean, vectorized=True, n_resamples=n_boot, method="percentile",
                             confidence_level=expanded_level(confidence, values.size), rng=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def difference_interval(values, confidence, n_boot, rng, *, fraction=False):
    """Interval of the mean of paired per-unit differences. Differences of 0/1 units (``fraction``)
    that are all one value (every unit rose, or none changed) give a bootstrap interval of zero
    width, a certainty few units cannot give: the interval then reaches as far as a rate of change
    never seen in ``n`` units could go (:func:`unseen_rate`), clipped to [-1, 1]."""
    values = np.asarray(values, dtype=float)
    if fraction and np.ptp(values) == 0:
        reach = unseen_rate(values.size, confidence)
        return max(-1.0, values[0] - reach), min(1.0, values[0] + reach)
    return mean_interval(values, confidence, n_boot, rng)


def proportion_interval(k, n, confidence):
    """Exact (Clopper-Pearson) interval of a proportion of ``k`` in ``n`` independent units.

    Examples
    --------
    >>> [round(b, 3) for b in proportion_interval(0, 6, 0.95)]
    [0.0, 0.459]
    """
    interval = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="exact")
    return float(interval.low), float(interval.high)


def unseen_rate(n, confidence):
    """The largest rate of an event that ``n`` independent units, none showing it, cannot rule out:
    the upper Clopper-Pearson bound of 0 in ``n``, ``1 - ((1 - confidence) / 2) ** (1 / n)`` (the
    minimal detectable effect of a null result on n units).

    Examples
    --------
    >>> round(unseen_rate(6, 0.95), 3)
    0.459
    """
    return 1 - ((1 - confidence) / 2) ** (1 / n)


def correlation_interval(x, y, method, confidence, n_boot, rng):
    """Percentile bootstrap interval of the correlation over paired units, read at the expanded
    level; resamples with a constant column are left out (their count is returned)."""
    picks = rng.integers(0, len(x), size=(n_boot, len(x)))
    boot = correlation(x[picks], y[picks], method=method)
    dropped = int(np.isnan(boot).sum())
    tail = 50 * (1 - expanded_level(confidence, len(x)))
    if dropped == n_boot:
        return math.nan, math.nan, dropped
    low, high = np.nanpercentile(boot, [tail, 100 - tail])
    return float(low), float(high), dropped


def difference_of_means_interval(a, b, confidence, n_boot, rng):
    """Percentile bootstrap interval of ``mean(a) - mean(b)``, two independent groups of units each
    resampled on its own, read at the expanded level of the smaller group."""
    result = stats.bootstrap((a, b), _difference_of_means, vectorized=True, paired=False, n_resamples=n_boot,
                             confidence_level=expanded_level(confidence, min(len(a), len(b))),
                             method="percentile", rng=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _difference_of_means(a, b, axis=-1):
    return a.mean(axis=axis) - b.mean(axis=axis)


def ratio_interval(before, after, confidence, n_boot, rng):
    """Percentile bootstrap interval of ``mean(after) / mean(before)`` over paired units (both values
    of a unit drawn together), read at the expanded level; resamples whose mean before is not
    positive are left out."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    picks = rng.integers(0, len(before), size=(n_boot, len(before)))
    down = before[picks].sum(axis=1)
    ratios = after[picks].sum(axis=1)[down > 0] / down[down > 0]
    tail = 50 * (1 - expanded_level(confidence, len(before)))
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def correlation_change_interval(x_before, y_before, x_after, y_after, method, confidence, n_boot, rng):
    """Percentile bootstrap interval of ``correlation(after) - correlation(before)`` over paired
    units (the same units drawn for both), read at the expanded level; resamples with a constant
    column are left out (their count is returned)."""
    picks = rng.integers(0, len(x_before), size=(n_boot, len(x_before)))
    boot = (correlation(x_after[picks], y_after[picks], method=method)
            - correlation(x_before[picks], y_before[picks], method=method))
    dropped = int(np.isnan(boot).sum())
    if dropped == n_boot:
        return math.nan, math.nan, dropped
    tail = 50 * (1 - expanded_level(confidence, len(x_before)))
    low, high = np.nanpercentile(boot, [tail, 100 - tail])
    return float(low), float(high), dropped
