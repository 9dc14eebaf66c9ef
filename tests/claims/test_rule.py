"""The verdict rule (crosslayer.claims.rule): where an interval lies against the paper's value and
size, and the rule's monotonicity: for every sized claim of the catalogues, an interval moved further
in the paper's direction never gets a worse verdict."""

import math

import numpy as np
import pytest

from crosslayer.claims.catalogue import Lookup, PerModel, catalogue_papers, load_catalogue
from crosslayer.claims.rule import ORDER, combine, decide, decide_by_p, strength


@pytest.mark.parametrize(
    "low, high, direction, value, expected",
    [
        (0.1, 0.3, ">", 0, "holds"), (-0.3, -0.1, ">", 0, "contradicted"), (-0.1, 0.1, ">", 0, "inconclusive"),
        (0.0, 0.2, ">", 0, "inconclusive"), (0.0, 0.2, ">=", 0, "holds"), (-0.2, 0.0, ">", 0, "contradicted"),
        (-0.2, 0.0, ">=", 0, "inconclusive"), (-0.3, -0.1, "<", 0, "holds"), (0.1, 0.3, "<", 0, "contradicted"),
        (-0.2, 0.0, "<=", 0, "holds"), (0.0, 0.2, "<", 0, "contradicted"), (0.0, 0.2, "<=", 0, "inconclusive"),
        (0.6, 0.9, ">", 0.5, "holds"), (math.nan, math.nan, ">", 0, "inconclusive"),
    ],
)
def test_decide(low, high, direction, value, expected):
    assert decide(low, high, direction, value) == expected


def test_decide_refuses_an_unknown_direction():
    with pytest.raises(ValueError, match="direction"):
        decide(0, 1, "!=", 0)


@pytest.mark.parametrize("p, expected", [((0.02, 0.9), "holds"), ((0.025, 0.9), "holds"), ((0.03, 0.9), "inconclusive"),
                                         ((0.9, 0.01), "contradicted"), ((0.5, 0.5), "inconclusive")])
def test_a_permutation_test_alone_decides_at_half_the_level_a_side(p, expected):
    assert decide_by_p(p, 0.95) == expected


@pytest.mark.parametrize("direction, magnitude, words, expected", [
    ("holds", "as strong", True, "holds"), ("holds", "weaker", True, "weaker"), ("holds", "weaker", False, "holds"),
    ("inconclusive", "weaker", True, "contradicted"), ("inconclusive", "weaker", False, "inconclusive"),
    ("inconclusive", "as strong", True, "inconclusive"), ("contradicted", "weaker", True, "contradicted"),
    ("holds", "stronger", False, "holds"), ("holds", "no number given", False, "holds"),
])
def test_the_size_is_part_of_the_verdict_only_where_the_words_state_it(direction, magnitude, words, expected):
    assert combine(direction, magnitude, words) == expected


def _paper_size(claim):
    """The claim's size as a number (a looked-up or per-model size: a point on the paper's side)."""
    value = claim.magnitude.value
    if isinstance(value, PerModel):
        value = next(v for _, v in value.values)
    reference = 0.25 if isinstance(claim.value, Lookup) else claim.value
    return reference + (0.1 if claim.direction in (">", ">=") else -0.1) if isinstance(value, Lookup) else value


SIZED = [c for paper in catalogue_papers() for c in load_catalogue(paper).claims if c.testable and c.magnitude]


@pytest.mark.parametrize("words", [True, False])
@pytest.mark.parametrize("claim", SIZED, ids=[c.id for c in SIZED])
def test_moving_the_interval_toward_the_paper_never_worsens_the_verdict(claim, words):
    """Intervals of several widths swept along the axis from far on the other side to far beyond
    the paper's size, read by the engine's rule with the claim's own value, size and spread, with
    and without words stating the size: the verdict never steps down :data:`ORDER`."""
    reference = 0.25 if isinstance(claim.value, Lookup) else float(claim.value)
    size, sign = float(_paper_size(claim)), 1 if claim.direction in (">", ">=") else -1
    reach = abs(size - reference) + 1.0
    for width in (0.01, 0.1, abs(size - reference) / 2, 2 * abs(size - reference) + 0.1):
        ranks = []
        for centre in reference + sign * np.linspace(-2 * reach, 2 * reach, 401):
            low, high = centre - width / 2, centre + width / 2
            magnitude = strength(low, high, claim.direction, size, claim.magnitude.spread)
            ranks.append(ORDER.index(combine(decide(low, high, claim.direction, reference), magnitude, words)))
        assert all(b >= a for a, b in zip(ranks, ranks[1:])), (claim.id, width, ranks)
        assert ORDER[ranks[0]] == "contradicted" and ORDER[ranks[-1]] == "holds"
