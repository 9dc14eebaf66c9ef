"""Paper 004's funnel (Fig. 4b, crosslayer.dynamics.funnel): the rank drop and its Spearman correlation
with the spectral radius, against SciPy on the spectra table the workflow saves."""

import numpy as np
import pytest
import scipy.stats
from spectra_tables import saved_profile

from crosslayer.dynamics.funnel import radius_vs_rank_drop, rank_drop


# --------------------------------------------------------------------------- Fig. 4b


@pytest.mark.parametrize("seed", range(4))
def test_radius_vs_rank_drop_is_scipys_spearman_on_the_saved_columns(tmp_path, seed):
    table, _, _ = saved_profile(tmp_path, seed)
    radius, ranks = table["spectral_radius"].to_numpy(), table["cumulative_effective_rank"].to_numpy()
    got = radius_vs_rank_drop(radius, ranks)
    expected = scipy.stats.spearmanr(radius[:-1], ranks[1:] - ranks[:-1])
    assert got["n"] == len(table) - 1
    assert got["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    assert got["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)


def test_rank_drop_by_hand_and_ties_as_scipy():
    np.testing.assert_array_equal(rank_drop([10.0, 7.0, 7.5, 2.0]), [-3.0, 0.5, -5.5])
    radius, ranks = [1.0, 2.0, 2.0, 3.0, 0.5, 9.0], [9.0, 5.0, 4.0, 4.0, 3.0, 1.0]
    expected = scipy.stats.spearmanr(radius[:-1], np.diff(ranks))
    got = radius_vs_rank_drop(radius, ranks)
    assert (got["rho"], got["p_value"]) == pytest.approx((expected.statistic, expected.pvalue), rel=1e-12)
    perfect = radius_vs_rank_drop([1.0, 2.0, 3.0, 4.0], [10.0, 9.0, 7.0, 4.0])  # drops -1, -2, -3
    assert perfect == {"rho": -1.0, "p_value": 0.0, "n": 3}
    assert np.isnan(radius_vs_rank_drop([1.0, 1.0, 1.0, 1.0], [4.0, 3.0, 1.0, 0.5])["rho"])


@pytest.mark.parametrize("call, match", [
    (lambda: rank_drop([1.0]), "at least 2 layers"),
    (lambda: radius_vs_rank_drop([1.0, 2.0], [3.0, 2.0, 1.0]), r"shape \(3,\)"),
    (lambda: radius_vs_rank_drop([1.0, np.nan, 2.0], [3.0, 2.0, 1.0]), "finite"),
])
def test_funnel_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
