"""Depth regimes (paper 004): each layer early, mid or late, and per-regime means of per-layer
statistics. NumPy and pandas only, so table jobs need no torch."""

import numpy as np

__all__ = ["PAPER_BOUNDARIES", "REGIMES", "depth_regimes", "regime_summary", "minimum_layer"]

PAPER_BOUNDARIES = (5, 20)  # 32 layers: early 0-4, mid 5-19, late 20-31
REGIMES = ("early", "mid", "late")


def depth_regimes(n_layers, *, boundaries=None, fractions=None):
    """Label each layer "early", "mid" or "late".

    Parameters
    ----------
    n_layers : int
        L >= 1.
    boundaries : (int, int), optional
        ``(b1, b2)``: layers ``[0, b1)`` early, ``[b1, b2)`` mid, ``[b2, L)`` late;
        ``0 <= b1 <= b2 <= L``. The paper's 32-layer split 0-4 / 5-19 / 20-31 is ``(5, 20)``.
    fractions : (float, float), optional
        ``(f1, f2)`` in [0, 1], converted to ``boundaries = round(f * L)``. Default (neither
        given): ``(5/32, 20/32)``, the paper's split scaled to L.

    Returns
    -------
    labels : (L,) ndarray of str
    """
    if n_layers < 1:
        raise ValueError(f"`n_layers` must be >= 1, got {n_layers}")
    if boundaries is not None and fractions is not None:
        raise ValueError("give `boundaries` or `fractions`, not both")
    if boundaries is None:
        fractions = (PAPER_BOUNDARIES[0] / 32, PAPER_BOUNDARIES[1] / 32) if fractions is None else fractions
        if len(fractions) != 2 or not 0 <= fractions[0] <= fractions[1] <= 1:
            raise ValueError(f"`fractions` must be (f1, f2) with 0 <= f1 <= f2 <= 1, got {fractions}")
        boundaries = tuple(int(round(f * n_layers)) for f in fractions)
    if len(boundaries) != 2 or not 0 <= boundaries[0] <= boundaries[1] <= n_layers:
        raise ValueError(f"`boundaries` must be (b1, b2) with 0 <= b1 <= b2 <= {n_layers}, got {boundaries}")
    index = np.arange(n_layers)
    labels = np.full(n_layers, "mid", dtype=object)
    labels[index < boundaries[0]] = "early"
    labels[index >= boundaries[1]] = "late"
    return labels.astype(str)


def regime_summary(stats, regimes):
    """Mean of each per-layer statistic within each depth regime.

    Parameters
    ----------
    stats : pandas.DataFrame or mapping of str -> (L,) array_like
        One row (entry) per layer; NaNs (e.g. forward alignment of the last layer) are skipped.
    regimes : (L,) array_like of str
        Labels from :func:`depth_regimes`.

    Returns
    -------
    summary : pandas.DataFrame
        Index ``regime`` in the order early, mid, late (regimes without layers omitted), one
        column per statistic, plus ``n_layers``.
    """
    import pandas as pd

    if isinstance(stats, pd.DataFrame):
        table = stats
    else:
        table = pd.DataFrame({name: np.asarray(values) for name, values in stats.items()})
    regimes = np.asarray(regimes)
    if regimes.shape != (len(table),):
        raise ValueError(f"`regimes` must have shape ({len(table)},) like the stats, got {regimes.shape}")
    unknown = set(regimes) - set(REGIMES)
    if unknown:
        raise ValueError(f"`regimes` must hold labels from {REGIMES}, got {sorted(unknown)}")
    grouped = table.reset_index(drop=True).groupby(pd.Series(regimes, name="regime"), sort=False)
    summary = grouped.mean(numeric_only=True)
    summary["n_layers"] = grouped.size()
    order = [r for r in REGIMES if r in summary.index]
    return summary.loc[order]


def minimum_layer(values):
    """The layer where a per-layer statistic is smallest (paper 004's Table 2 "min layer" of
    self-alignment).

    Parameters
    ----------
    values : (L,) array_like
        One value per layer, in depth order; NaNs are skipped.

    Returns
    -------
    layer : int
        First index of the minimum, in [0, L).
    value : float
        The minimum.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.size == 0 or np.isnan(values).all():
        raise ValueError(f"`values` must be 1-D with at least one non-NaN value, got shape {values.shape}")
    layer = int(np.nanargmin(values))
    return layer, float(values[layer])
