"""Fractions of 0/1 units (an indicator's: layers whose test is significant, layer pairs above a
cut): the exact Clopper-Pearson interval, since a resampling of six zeros is [0, 0], a certainty six
units cannot give."""

from scipy import stats

__all__ = ["proportion_interval"]


def proportion_interval(k, n, confidence):
    """Exact (Clopper-Pearson) interval of a proportion of ``k`` in ``n`` independent units.

    Examples
    --------
    >>> [round(b, 3) for b in proportion_interval(0, 6, 0.95)]
    [0.0, 0.459]
    """
    interval = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="exact")
    return float(interval.low), float(interval.high)
