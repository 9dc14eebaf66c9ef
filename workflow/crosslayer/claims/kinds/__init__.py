"""One module per verdict kind, as scipy.stats keeps one function per test over shared machinery:
:mod:`~.difference` (a mean, a paired difference, two groups), :mod:`~.ratio` (a ratio of means),
:mod:`~.proportion` (a fraction of 0/1 units), :mod:`~.correlation` (a trend and its change),
:mod:`~.equivalence` (an absence), over :mod:`~.units`, which knows each table's units. Each kind
turns a claim and a run's tables into an :class:`~.units.Estimate`; :func:`estimate` dispatches.
"""

from crosslayer.claims.kinds.correlation import trend_estimate
from crosslayer.claims.kinds.difference import contrast_estimate, mean_estimate
from crosslayer.claims.kinds.ratio import ratio_estimate
from crosslayer.claims.kinds.units import Estimate

__all__ = ["Estimate", "estimate"]


def estimate(claim, data, models, confidence, n_perm, rng):
    """The claim's :class:`Estimate` on the tables of ``models`` (the engine's one call per claim)."""
    if claim.kind == "trend":
        return trend_estimate(claim, data, models, confidence, n_perm, rng)
    if claim.kind == "contrast":
        return contrast_estimate(claim, data, models, confidence)
    if claim.statistic == "ratio_of_means":
        return ratio_estimate(claim, data, models, confidence)
    return mean_estimate(claim, data, models, confidence)
