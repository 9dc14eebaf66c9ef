"""The verdict rule, one for every kind: where a claim's interval lies against the paper's value
(:func:`decide`), against its size (:func:`strength`), and the two read together (:func:`combine`).

Monotone by construction: moving an interval further in the paper's direction never gives a worse
verdict (:data:`ORDER`). A size is part of the verdict only where the quote's own words state it
("far below", "fails to", "erases", "largely dissolved"); there, a result short of it is
``weaker``, and no effect with the paper's size ruled out is ``contradicted``. A size the paper
only prints beside its words is reported in the magnitude column and leaves the verdict to the
direction.
"""

import math

from crosslayer.claims.records import OPS

__all__ = ["ORDER", "decide", "decide_by_p", "strength", "combine"]

#: The verdicts from worst to best for the paper: the order an interval moving in the paper's
#: direction never goes back along.
ORDER = ("contradicted", "inconclusive", "weaker", "holds")


def decide(low, high, direction, value):
    """Where the interval ``[low, high]`` lies against the paper's ``direction value``.

    Parameters
    ----------
    low, high : float
        The interval (NaN: undefined).
    direction : {">", ">=", "<", "<="}
        The paper's side of ``value``: a strict direction counts ``value`` itself on the other side.
    value : float

    Returns
    -------
    str
        ``holds`` (entirely on the paper's side), ``contradicted`` (entirely on the other side) or
        ``inconclusive`` (straddling, or NaN).

    Examples
    --------
    >>> decide(0.1, 0.3, ">", 0.0), decide(-0.3, -0.1, ">", 0.0), decide(-0.1, 0.2, ">", 0.0)
    ('holds', 'contradicted', 'inconclusive')
    >>> decide(0.0, 0.0, ">=", 0.0), decide(0.0, 0.0, ">", 0.0)
    ('holds', 'contradicted')
    """
    if math.isnan(low) or math.isnan(high):
        return "inconclusive"
    if direction in (">", ">="):
        paper_side, other_side = OPS[direction](low, value), not OPS[direction](high, value)
    elif direction in ("<", "<="):
        paper_side, other_side = OPS[direction](high, value), not OPS[direction](low, value)
    else:
        raise ValueError(f"`direction` must be one of {list(OPS)}, got {direction!r}")
    return "holds" if paper_side else "contradicted" if other_side else "inconclusive"


def decide_by_p(p, confidence):
    """A direction from one-sided p-values alone (``(paper's side, other side)``), where a
    permutation test is the whole test (one run's checkpoints): each side at (1 - confidence) / 2.

    Examples
    --------
    >>> decide_by_p((0.008, 1.0), 0.95), decide_by_p((0.2, 0.9), 0.95), decide_by_p((1.0, 0.01), 0.95)
    ('holds', 'inconclusive', 'contradicted')
    """
    alpha = (1 - confidence) / 2
    return "holds" if p[0] <= alpha else "contradicted" if p[1] <= alpha else "inconclusive"


def strength(low, high, direction, size, spread=0.0):
    """Our interval against the paper's size ``size`` +- ``spread`` (on the paper's side of
    ``direction``): ``as strong`` when the two overlap, ``stronger`` when ours lies entirely beyond
    the paper's, ``weaker`` when entirely short of it, ``undetermined`` when ours is undefined.

    Examples
    --------
    >>> strength(0.006, 0.119, ">", 0.74), strength(0.6, 0.9, ">", 0.74), strength(0.8, 0.9, ">", 0.74)
    ('weaker', 'as strong', 'stronger')
    >>> strength(-0.9, -0.8, "<", -0.5), strength(0.6, 0.65, ">", 0.74, spread=0.1)
    ('stronger', 'as strong')
    """
    if math.isnan(low) or math.isnan(high) or math.isnan(size):
        return "undetermined"
    sign = 1 if direction in (">", ">=") else -1
    near, far = (low, high) if sign > 0 else (-high, -low)
    return ("weaker" if far < sign * size - spread else "stronger" if near > sign * size + spread
            else "as strong")


def combine(direction, magnitude, words):
    """The verdict from its direction and magnitude parts; ``words``: whether the quote's words
    state the paper's size (then the size is part of the claim).

    Examples
    --------
    >>> combine("holds", "weaker", True), combine("inconclusive", "weaker", True)
    ('weaker', 'contradicted')
    >>> combine("holds", "weaker", False), combine("inconclusive", "weaker", False)
    ('holds', 'inconclusive')
    """
    if words and magnitude == "weaker":
        if direction == "holds":
            return "weaker"  # the sign alone is not the claim
        if direction == "inconclusive":
            return "contradicted"  # no effect shown, and the size the words state ruled out
    return direction
