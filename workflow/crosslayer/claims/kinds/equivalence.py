"""An absence ("at chance", "flat", "no relation", "about 98%") as equivalence: two one-sided tests
against ``value +- margin``, each at (1 - confidence) / 2, read off the same interval every kind
gives at ``confidence`` (statsmodels' ``ttost_ind`` is the same test for two means)."""

import math

__all__ = ["decide_equivalence"]


def decide_equivalence(low, high, value, margin):
    """``holds`` when the interval lies inside ``value +- margin``, ``contradicted`` when it lies
    entirely outside it, else ``inconclusive``.

    Examples
    --------
    >>> decide_equivalence(-0.02, 0.03, 0.0, 0.05), decide_equivalence(0.06, 0.2, 0.0, 0.05)
    ('holds', 'contradicted')
    >>> decide_equivalence(0.01, 0.2, 0.0, 0.05)
    'inconclusive'
    """
    if math.isnan(low) or math.isnan(high) or math.isnan(margin):
        return "inconclusive"
    if value - margin <= low and high <= value + margin:
        return "holds"
    return "contradicted" if low > value + margin or high < value - margin else "inconclusive"
