"""The ratio of two means over paired units (``after / before``: a quantity trained against its
value at initialization): Fieller's interval, exact under normal noise, unbounded (NaN: no
interval) where the mean before cannot be told from 0; the jackknife where units share layers."""

import numpy as np
import pandas as pd
from scipy import stats

from crosslayer.claims.kinds.units import Estimate, gather, jackknife_interval
from crosslayer.claims.rows import Missing, change, enough

__all__ = ["fieller_interval", "ratio_estimate"]


def fieller_interval(before, after, confidence):
    """Fieller's interval of ``mean(after) / mean(before)`` over paired units (last axis): the ratios
    r whose paired differences ``after - r before`` have a mean the t test cannot tell from 0.

    Returns
    -------
    low, high : ndarray
        NaN where the interval is unbounded (the mean before is within its own noise of 0).

    Examples
    --------
    >>> before = np.array([1.0, 1.1, 0.9, 1.0])
    >>> [round(float(v), 3) for v in fieller_interval(before, 2 * before, 0.95)]
    [2.0, 2.0]
    """
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    n = before.shape[-1]
    mb, ma = before.mean(axis=-1), after.mean(axis=-1)
    db, da = before - mb[..., None], after - ma[..., None]
    vbb, vaa, vab = ((x * y).sum(axis=-1) / (n - 1) / n for x, y in ((db, db), (da, da), (da, db)))
    t2 = stats.t.ppf(0.5 + confidence / 2, n - 1) ** 2
    a, b, c = mb**2 - t2 * vbb, -2 * (ma * mb - t2 * vab), ma**2 - t2 * vaa
    # with a > 0 the interval holds mean(after) / mean(before), so disc >= 0 but for rounding
    disc = np.maximum(b**2 - 4 * a * c, 0.0)
    bounded = a > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(np.where(bounded, disc, 0.0))
        low, high = (-b - root) / (2 * a), (-b + root) / (2 * a)
    return np.where(bounded, low, np.nan), np.where(bounded, high, np.nan)


def ratio_estimate(claim, data, models, confidence):
    """``ratio_of_means``: the mean after over the mean before, units paired."""
    samples = gather(claim, models, lambda m: pd.concat(change(claim, data, m, pair=True), axis=1,
                                                         keys=["before", "after"]))
    before, after = samples["before"], samples["after"]
    enough(claim, before.n, "", after.values - before.values)
    if before.values.sum() <= 0:
        raise Missing(f"the mean before is {before.values.mean():.3g}: a ratio to it is not defined")
    if before.clusters is None:
        low, high = fieller_interval(before.values, after.values, confidence)
        method = "Fieller"
    else:
        b, a = before.values, after.values
        masks = before.masks()
        low, high = jackknife_interval(lambda keep: a[keep].sum() / b[keep].sum(), masks, confidence)
        method = f"jackknife over {len(masks)} layers"
    detail = f" (mean {after.values.mean():.3g} after, {before.values.mean():.3g} before)"
    return Estimate(float(after.values.sum() / before.values.sum()), float(low), float(high), before.n,
                    claim.value, detail, method=method)
