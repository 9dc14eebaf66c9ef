"""Paper 000's tables (crosslayer.alignment.tables) on constructed overlaps: Table 1, overlaps by
distance, first peaks and the cascade statistics."""

import math

import numpy as np
import pytest
from scipy.stats import pearsonr

from crosslayer.alignment.tables import (
    adjacent_overlap,
    cascade_statistics,
    first_peak_step,
    overlap_at_distance,
    table1_metrics,
)


def distance_decay(L):
    """overlap[i, j] = 1 / (1 + |i - j|): every distance has a known value."""
    i = np.arange(L)
    return 1.0 / (1.0 + np.abs(i[:, None] - i[None, :]))


def test_table1_on_constructed_matrix():
    row = table1_metrics(distance_decay(7), threshold=0.3, distances=(1, 3, 5))
    # pairs at distance 1 (0.5, 6 pairs) and 2 (0.333, 5 pairs) exceed 0.3; 21 pairs in all
    assert row == {
        "pairs_above": 11,
        "n_pairs": 21,
        "fraction_above": pytest.approx(11 / 21),
        "mean_d1": pytest.approx(0.5),
        "mean_d3": pytest.approx(0.25),
        "mean_d5": pytest.approx(1 / 6),
    }


def test_table1_uses_only_upper_triangle_and_strict_threshold():
    O = np.full((4, 4), 0.15)
    O[3, 0] = 0.9  # lower triangle ignored
    row = table1_metrics(O, threshold=0.15, distances=(1, 5))
    assert row["pairs_above"] == 0 and row["n_pairs"] == 6
    assert math.isnan(row["mean_d5"])  # no pair 5 layers apart in a 4-layer model


def test_overlap_at_distance_and_adjacent():
    O = distance_decay(5)
    assert np.allclose(adjacent_overlap(O), [0.5] * 4)
    assert overlap_at_distance(O, 4).tolist() == [0.2]
    assert overlap_at_distance(O, 9).size == 0
    with pytest.raises(ValueError, match="square"):
        overlap_at_distance(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="distance"):
        overlap_at_distance(O, 0)


@pytest.mark.parametrize(
    "values, min_height, expected",
    [
        ([0.1, 0.3, 0.2, 0.5], -math.inf, 10),  # first local maximum, not the global one
        ([0.1, 0.2, 0.3, 0.4], -math.inf, 1000),  # still rising: the last step
        ([0.5, 0.4, 0.3, 0.2], -math.inf, 0),  # falling from the start
        ([0.1, 0.3, 0.2, 0.5], 0.4, 1000),  # the small early bump is under min_height
        ([0.1, 0.1, 0.1, 0.1], 0.2, math.nan),
        ([0.1, 0.3, 0.3, 0.2], -math.inf, 100),  # plateau: the peak is where it starts to fall
    ],
)
def test_first_peak_step(values, min_height, expected):
    got = first_peak_step([0, 10, 100, 1000], values, min_height=min_height)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_first_peak_rejects_unsorted_steps():
    with pytest.raises(ValueError, match="increasing"):
        first_peak_step([0, 5, 3], [1, 2, 3])


def test_cascade_statistics_planted_backward_cascade():
    steps = [0, 100, 500, 2000]
    adjacent = np.array(  # boundaries 0..4; the final one (4) peaks first, then 3 and 2, then 1 and 0
        [
            [0.2, 0.2, 0.3, 0.6],
            [0.2, 0.2, 0.4, 0.6],
            [0.2, 0.3, 0.6, 0.5],
            [0.2, 0.4, 0.7, 0.5],
            [0.2, 0.8, 0.7, 0.7],
        ]
    )
    per_boundary, fit = cascade_statistics(steps, adjacent, reference_step=500, min_height=0.25)
    assert per_boundary["first_peak_step"].tolist() == [2000, 2000, 500, 500, 100]
    assert per_boundary["distance_from_final"].tolist() == [4, 3, 2, 1, 0]
    assert per_boundary["overlap_at_reference"].tolist() == [0.3, 0.4, 0.6, 0.7, 0.7]
    r, p = pearsonr([4, 3, 2, 1, 0], [0.3, 0.4, 0.6, 0.7, 0.7])
    assert fit == {"reference_step": 500, "n_boundaries": 5, "pearson_r": pytest.approx(r), "pearson_p": pytest.approx(p)}
    assert r < -0.9  # weaker with distance from the final boundary


def test_cascade_statistics_exact_linear_trend_and_errors():
    steps = [0, 1]
    adjacent = np.column_stack([np.zeros(4), [0.1, 0.2, 0.3, 0.4]])
    _, fit = cascade_statistics(steps, adjacent, reference_step=1)
    assert fit["pearson_r"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="reference_step"):
        cascade_statistics(steps, adjacent, reference_step=7)
    _, flat = cascade_statistics(steps, np.zeros((4, 2)), reference_step=1)
    assert math.isnan(flat["pearson_r"])


def test_table1_distances_beyond_the_depth_are_refused():
    from crosslayer.alignment.tables import summarize_model

    overlap = np.stack([distance_decay(4)] * 2)
    data = {f"overlap_{s}": overlap for s in ("left", "right", "cross")}
    data.update(steps=np.array([0, 1]), d_model=16, k=2, singular_values=np.ones((2, 4, 3)))
    with pytest.raises(ValueError, match=r"alignment\.distances: \[4, 5\] must be below the model's 4 layers"):
        summarize_model(data, reference_step=1, distances=(1, 4, 5), baseline_draws=10)
    assert len(summarize_model(data, reference_step=1, distances=(1, 3), baseline_draws=10)["table1"]) == 6
