"""Paper 004's funnel (Fig. 4b, crosslayer.dynamics.funnel): the rank drop and its Spearman correlation
with the spectral radius, against SciPy on the spectra table the workflow saves."""

import numpy as np
import pytest
import scipy.stats
from spectra_tables import saved_profile

from crosslayer.dynamics.funnel import EXACT_MAX_N, radius_vs_rank_drop, rank_drop


# --------------------------------------------------------------------------- Fig. 4b


@pytest.mark.parametrize("seed", range(4))
def test_radius_vs_rank_drop_is_scipys_spearman_on_the_saved_columns(tmp_path, seed):
    table, _, _ = saved_profile(tmp_path, seed)
    radius, ranks = table["spectral_radius"].to_numpy(), table["cumulative_effective_rank"].to_numpy()
    got = radius_vs_rank_drop(radius, ranks)
    expected = scipy.stats.spearmanr(radius[:-1], ranks[1:] - ranks[:-1])
    assert got["n"] == len(table) - 1
    assert got["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    if got["n"] > EXACT_MAX_N:
        assert got["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    else:
        assert got["p_value"] == pytest.approx(exact_p(radius[:-1], np.diff(ranks)), rel=1e-9)


def exact_p(x, y):
    """scipy's exact two-sided permutation test of Spearman's rho (every pairing), vectorized."""
    ry = scipy.stats.rankdata(y) - (len(y) + 1) / 2

    def statistic(a, axis):
        ra = scipy.stats.rankdata(a, axis=axis)
        ra = ra - ra.mean(axis=axis, keepdims=True)
        return (ra * ry).sum(axis=axis) / np.sqrt((ra**2).sum(axis=axis) * (ry**2).sum())

    return scipy.stats.permutation_test((x,), statistic, permutation_type="pairings", n_resamples=np.inf,
                                        vectorized=True).pvalue


@pytest.mark.parametrize("n", [3, 4, 6, 8, 9])
def test_few_layers_get_the_exact_p_value(n):
    rng = np.random.default_rng(n)
    radius, ranks = rng.uniform(0.5, 2, n + 1), np.cumsum(rng.uniform(0, 3, n + 1))[::-1]
    ranks[2] = ranks[3] if n >= 4 else ranks[2]  # a tie among the drops
    got = radius_vs_rank_drop(radius, ranks)
    assert got["p_value"] == pytest.approx(exact_p(radius[:-1], np.diff(ranks)), rel=1e-9)


def test_more_layers_get_students_t_as_scipy():
    rng = np.random.default_rng(12)
    radius, ranks = rng.uniform(0.5, 2, 13), np.cumsum(rng.uniform(0, 3, 13))[::-1]
    got, expected = radius_vs_rank_drop(radius, ranks), scipy.stats.spearmanr(radius[:-1], np.diff(ranks))
    assert got["n"] == 12 > EXACT_MAX_N and got["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)


def test_rank_drop_by_hand_and_ties_as_scipy():
    np.testing.assert_array_equal(rank_drop([10.0, 7.0, 7.5, 2.0]), [-3.0, 0.5, -5.5])
    radius, ranks = [1.0, 2.0, 2.0, 3.0, 0.5, 9.0], [9.0, 5.0, 4.0, 4.0, 3.0, 1.0]
    got = radius_vs_rank_drop(radius, ranks)
    assert got["rho"] == pytest.approx(scipy.stats.spearmanr(radius[:-1], np.diff(ranks)).statistic, rel=1e-12)
    perfect = radius_vs_rank_drop([1.0, 2.0, 3.0, 4.0], [10.0, 9.0, 7.0, 4.0])  # drops -1, -2, -3
    assert perfect == {"rho": -1.0, "p_value": pytest.approx(2 / 6), "n": 3}  # 1 of 3! pairings each way
    assert np.isnan(radius_vs_rank_drop([1.0, 1.0, 1.0, 1.0], [4.0, 3.0, 1.0, 0.5])["rho"])


@pytest.mark.parametrize("call, match", [
    (lambda: rank_drop([1.0]), "at least 2 layers"),
    (lambda: radius_vs_rank_drop([1.0, 2.0], [3.0, 2.0, 1.0]), r"shape \(3,\)"),
    (lambda: radius_vs_rank_drop([1.0, np.nan, 2.0], [3.0, 2.0, 1.0]), "finite"),
])
def test_funnel_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- Fig. 5a's recovery ratios


def dose_table(ranks, *, mode="J", start_layer=0):
    """A schur.tsv's dose rows (``alpha -> rank``) and a control row that must not count."""
    import pandas as pd

    rows = [{"construction": "dose", "draw": 0, "alpha": a, "start_layer": start_layer, "effective_rank": r,
             "log_frobenius": 0.0, "mode": mode} for a, r in ranks.items()]
    rows.append({"construction": "control_a", "draw": 0, "alpha": 0.0, "start_layer": 0, "effective_rank": 999.0,
                 "log_frobenius": 0.0, "mode": mode})
    return pd.DataFrame(rows)


def test_recovery_is_the_rank_without_the_non_normal_part_over_the_trained_rank():
    import pandas as pd

    from crosslayer.dynamics.funnel import recovery_table

    table = pd.concat([dose_table({0.0: 30.0, 0.5: 20.0, 1.0: 12.0, 1.5: 9.0}),
                       dose_table({0.0: 31.0, 1.0: 31.0}, mode="J - I"),
                       dose_table({0.0: 1.0, 1.0: 2.0}, start_layer=3)])  # another start layer: not Fig. 5a's
    out = recovery_table({("m", 10): table, ("n", 0): dose_table({0.25: 5.0, 1.0: 4.0})})
    assert out[["model", "step", "mode"]].values.tolist() == [["m", 10, "J"], ["m", 10, "J - I"], ["n", 0, "J"]]
    assert out.recovery.tolist()[:2] == [2.5, 1.0] and out.rank_at_alpha_max.tolist()[0] == 9.0
    assert np.isnan(out.recovery.iloc[2])  # no dose 0 in its grid
