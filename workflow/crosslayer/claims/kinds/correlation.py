"""Trends: the correlation of a column with ``x`` across units, and its change between two
selections over the same units (a gradient training installs, against the one already there at
initialization; one predictor against another).

A trend's interval is Fisher's z (Bonett and Wright's standard error for Spearman's rho; along a
chain of boundaries, over the half of them that share no layer), or the jackknife over layers
where all pairs of layers are the units; its direction must also pass the one-sided exact
permutation test, which is what keeps a few perfectly ordered units from deciding by chance (4
units: 1 order in 24). A trend over one run's checkpoints has no replicates: its permutation test
alone decides, and the verdict says it is one run's ordering. A change of trend takes the
jackknife over units, guarded by the permutation test that swaps each unit's before and after.
"""

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from crosslayer.claims.kinds.units import Estimate, gather, jackknife_interval
from crosslayer.claims.readers import READERS
from crosslayer.claims.rows import Decided, Missing, enough, values_at, where_at
from crosslayer.claims.rule import decide

__all__ = ["correlation", "permutation_p", "change_permutation_p", "fisher_interval", "trend_estimate",
           "swappable", "is_series"]


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


def fisher_interval(r, n, method, confidence):
    """Fisher's z interval of a correlation ``r`` over ``n`` independent units (last axis free):
    ``tanh(atanh(r) +- z se)``, ``se = 1 / sqrt(n - 3)`` for Pearson, ``sqrt((1 + r^2 / 2) / (n - 3))``
    for Spearman (Bonett and Wright 2000); ``|r|`` is first held half an adjacent swap short of 1,
    so that a perfect order of few units is not read as a certainty. NaN under 4 units.

    Examples
    --------
    >>> [round(float(v), 3) for v in fisher_interval(0.5, 30, "pearson", 0.95)]
    [0.17, 0.729]
    """
    r = np.asarray(r, dtype=float)
    if n < 4:
        return np.full_like(r, np.nan), np.full_like(r, np.nan)
    cap = 1 - 6 / (n * (n**2 - 1))
    r = np.clip(r, -cap, cap)
    se = np.sqrt((1 + r**2 / 2) / (n - 3)) if method == "spearman" else 1 / np.sqrt(n - 3)
    z, half = np.arctanh(r), stats.norm.ppf(0.5 + confidence / 2) * se
    return np.tanh(z - half), np.tanh(z + half)


def is_series(claim):
    """Whether the claim's units are one run's checkpoints (its reader says so)."""
    reader = READERS.get(claim.table)
    return bool(reader is not None and reader.series and claim.unit != "model")


def _paper_side(claim):
    return 1 if claim.direction in (">", ">=") else -1


def trend_estimate(claim, data, models, confidence, n_perm, rng):
    """Correlation of ``column`` with ``x`` across units, or its change ``before`` -> ``after``."""
    if claim.before:
        return _trend_change(claim, data, models, confidence, n_perm, rng)

    def measure(model):
        rows = values_at(claim, data, model, claim.at)
        if claim.x == claim.unit:  # x is the unit itself (a trend over checkpoints: units = steps)
            rows = rows.assign(**{claim.x: rows.index.to_numpy()})
        return rows[[claim.x, claim.column]]

    samples = gather(claim, models, measure)
    x, y = samples[claim.x], samples[claim.column]
    enough(claim, x.n, "")
    _varies(claim, x, claim.x)
    _varies(claim, y, claim.column)
    method = "pearson" if claim.statistic == "pearson_r2" else claim.statistic
    r = float(correlation(x.values, y.values, method=method))
    estimate = r**2 if claim.statistic == "pearson_r2" else r
    if is_series(claim):  # one run's checkpoints: no replicates, its ordering is what can be tested
        side = _paper_side(claim)
        p = tuple(permutation_p(x.values, y.values, method=method, side=s, n_perm=n_perm, rng=rng)
                  for s in (side, -side))
        detail = (f" (one run's checkpoints: a descriptive trend, its exact permutation test p = {p[0]:.2g} on the "
                  f"paper's side)")
        return Estimate(estimate, math.nan, math.nan, x.n, claim.value, detail, p=p, method="permutation test")
    if x.clusters is None or x.chain:
        # along a chain (boundaries) a trend's variance is up to twice the independent one's (a
        # lag-one correlation of at most 1/2): Fisher's z over the units that share no layer
        count = x.n if x.clusters is None else math.ceil(x.n / 2)
        low, high = fisher_interval(r, count, method, confidence)
        how = "Fisher's z" + ("" if count == x.n else f" over {count} boundaries that share no layer")
    else:
        masks = x.masks()
        low, high = jackknife_interval(lambda keep: correlation(x.values[keep], y.values[keep], method=method),
                                       masks, confidence)
        low, high = np.clip(low, -1, 1), np.clip(high, -1, 1)
        how = f"jackknife over {len(masks)} layers"
    low, high = float(low), float(high)
    if claim.statistic == "pearson_r2":  # the square of r's interval
        low, high = (0.0, max(low**2, high**2)) if low <= 0 <= high else tuple(sorted((low**2, high**2)))
    gate = _permutation_gate(claim, low, high, confidence, x.n, lambda side: permutation_p(
        x.values, y.values, method=claim.statistic, side=side, n_perm=n_perm, rng=rng))
    return Estimate(estimate, low, high, x.n, claim.value, "", gate=gate, method=how)


def _varies(claim, sample, column):
    """A trend needs both columns to vary: a constant one has nothing to order (not testable)."""
    if sample.n and np.ptp(sample.values) == 0:
        raise Missing(f"{column} takes one value ({sample.values[0]:g}) over the {sample.n} {claim.unit_name}: "
                      "a trend needs it to vary")


def _trend_change(claim, data, models, confidence, n_perm, rng):
    """``correlation(after) - correlation(before)`` over the units present at both."""
    def measure(model):
        sides = [values_at(claim, data, model, selection)[[claim.x, claim.column]]
                 for selection in (claim.before, claim.after)]
        both = pd.concat(sides, axis=1, join="inner")
        both.columns = ["xb", "yb", "xa", "ya"]
        return both

    s = gather(claim, models, measure)
    xb, yb, xa, ya = (s[c].values for c in ("xb", "yb", "xa", "ya"))
    n = len(xb)
    enough(claim, n, "")
    for name, sample in (("before", s["yb"]), ("after", s["ya"])):
        _varies(claim, sample, f"{claim.column} {name}")
    before, after = (float(correlation(x, y, method=claim.statistic)) for x, y in ((xb, yb), (xa, ya)))
    detail = f" ({claim.statistic} {before:.3g} before, {after:.3g} after)"
    guarded = swappable(claim)
    side, alpha = _paper_side(claim), (1 - confidence) / 2
    # the trend already there where the paper starts from: contradicts "installs", not "grows"
    if guarded and claim.direction != "==" and not claim.grows:
        p_before = permutation_p(xb, yb, method=claim.statistic, side=side, n_perm=n_perm, rng=rng)
        if p_before <= alpha / 2:  # half the level: a false "contradicted" has the interval's route too
            raise Decided("contradicted", f"{claim.statistic} {before:.3g} over the {n} {claim.unit_name} at "
                          f"{where_at(claim.before)} already (permutation p = {p_before:.2g}; after: {after:.3g}): "
                          "present before training, so training cannot have installed it", n)
    masks = s["xb"].masks() if s["xb"].clusters is not None else ~np.eye(n, dtype=bool)
    low, high = jackknife_interval(lambda keep: correlation(xa[keep], ya[keep], method=claim.statistic)
                                   - correlation(xb[keep], yb[keep], method=claim.statistic), masks, confidence)
    gate = _permutation_gate(claim, float(low), float(high), confidence, n, lambda side: change_permutation_p(
        (xb, yb), (xa, ya), method=claim.statistic, side=side, n_perm=n_perm, rng=rng),
        how=" (before and after swapped per unit)") if guarded else ""
    how = "jackknife over " + (f"{len(masks)} layers" if s["xb"].clusters is not None else f"{n} units")
    return Estimate(after - before, float(low), float(high), n, claim.value, detail, gate=gate, method=how)


def _permutation_gate(claim, low, high, confidence, n, p_value, how=""):
    """Why an interval that excludes no association (or no change) still leaves the verdict open:
    the one-sided permutation p-value (``p_value(side)``, at the interval's side) is above
    (1 - confidence) / 2; "" where it is not, or where the interval decides nothing."""
    if claim.value != 0 or claim.direction == "==" or decide(low, high, claim.direction, 0.0) == "inconclusive":
        return ""
    p, alpha = p_value(1 if low > 0 else -1), (1 - confidence) / 2
    return f"permutation p = {p:.2g}{how} over {n} {claim.unit_name}, above {alpha:.3g}" if p > alpha else ""


def swappable(claim):
    """Whether a trend change's before and after are one variable at two checkpoints (they select
    the same rows but for ``step``), so that swapping a unit's two values is a null of no change;
    two predictors of one score (coupling against size) are not."""
    return [(c, s) for c, s in claim.before if c != "step"] == [(c, s) for c, s in claim.after if c != "step"]


